"""Feishu message content (the JSON string in ``message.content``) → canonical content and attachments.

Decisions:

- ``text``: ``@_user_N`` placeholders are resolved from the event's ``mentions`` into mention nodes that
  carry the open_id; ``@_all`` becomes ``@all``; a placeholder with no ``mentions`` entry stays literal text.
- ``post``: lines are joined with ``\\n``; a title becomes a bold first line; ``text``/``a`` styles nest as
  bold > italic > underline > strikethrough (a fixed order, so equal posts build equal trees); ``at``
  resolves like text; ``img``/``media`` become attachments in document order; ``emotion`` becomes a custom
  emoji whose alt is the Unicode emoji when known, else ``[NAME]``; ``code_block`` becomes ``pre``.
  Received posts are flat (``{"title", "content"}``); the locale-wrapped send form
  (``{"zh_cn": {...}}``) is accepted too, first locale in document order.
- Media kinds map as image → photo, file → file, audio → voice, media → video, sticker → sticker; Feishu
  durations are milliseconds.
- ``interactive`` (cards) keep their visible text (:mod:`.cards`) after ``[card: title]``; a shared group
  or contact card names what was shared (``[shared group: name]``, ``[shared contact: name]``, from the
  names the caller knows, else the bare kind); ``merge_forward`` and the other rare kinds become a
  readable bracketed placeholder, never an error: losing a message is worse than showing a summary.
  Placeholder kinds need nothing from the content, so one that is not JSON (some tenants send
  ``merge_forward`` content as the plain string ``Merged and Forwarded Message``) is accepted as well.
- ``at`` elements resolve by key (``@_user_N``) or by the open_id some carry (``open_id``, or an
  ``ou_`` id in ``user_id``), taking the name from ``mentions`` when it lists that id.
- Adjacent text is merged so that one text has one spelling (see ``larkbot.canonical.content``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from larkbot.canonical.content import (
    Attachment,
    AttachmentType,
    Bold,
    Content,
    CustomEmoji,
    Inline,
    Italic,
    Link,
    Mention,
    Pre,
    Strikethrough,
    Text,
    Underline,
)
from larkbot.canonical.text import replace_lone_surrogates

from . import emoji
from .cards import card_lines, card_title
from .errors import MalformedPayload
from .fields import Fields


@dataclass(frozen=True, slots=True)
class MentionRef:
    """One ``mentions`` entry of a message: who ``@_user_N`` stands for."""

    open_id: str | None
    name: str


_PLACEHOLDER = re.compile(r"@_user_\d+|@_all")
_STYLES: tuple[tuple[str, type[Bold | Italic | Underline | Strikethrough]], ...] = (
    ("bold", Bold),
    ("italic", Italic),
    ("underline", Underline),
    ("lineThrough", Strikethrough),
)
#: The fields that say what a placeholder kind shows, in order of preference.
_DETAIL_KEYS = ("topic", "summary", "title", "name", "file_name", "text")
_PLACEHOLDER_KINDS: Mapping[str, str] = {
    "merge_forward": "merged and forwarded messages",
    "location": "location",
    "todo": "task",
    "vote": "poll",
    "hongbao": "red packet",
    "share_calendar_event": "shared calendar event",
    "calendar": "calendar invitation",
    "general_calendar": "calendar event",
    "video_chat": "video call",
    "folder": "folder",
}


def parse_content(
    message_type: str,
    raw: str,
    mentions: Mapping[str, MentionRef],
    path: str,
    event_type: str,
    names: Mapping[str, str] | None = None,
) -> tuple[Content, tuple[Attachment, ...]]:
    """Parse ``message.content`` of a message of ``message_type``; ``names`` (open_id or chat_id → name)
    name what a shared card shows."""
    try:
        data = replace_lone_surrogates(json.loads(raw))
    except ValueError:
        if message_type in _PLACEHOLDER_KINDS:
            return Content.from_text(f"[{_PLACEHOLDER_KINDS[message_type]}]"), ()
        raise MalformedPayload(f"{path}: not JSON", event_type=event_type) from None
    body = Fields(data, path, event_type)
    if message_type == "text":
        text = body.data.get("text")
        if not isinstance(text, str):
            raise MalformedPayload(f"{path}.text: missing or not a string", event_type=event_type)
        return Content(nodes=_merge(_text_with_mentions(text, mentions))), ()
    if message_type == "post":
        return _post(body, mentions)
    if message_type == "image":
        return Content(), (Attachment(type=AttachmentType.PHOTO, file_id=body.req("image_key")),)
    if message_type == "file":
        return Content(), (
            Attachment(
                type=AttachmentType.FILE,
                file_id=body.req("file_key"),
                name=body.opt("file_name"),
            ),
        )
    if message_type == "audio":
        return Content(), (
            Attachment(type=AttachmentType.VOICE, file_id=body.req("file_key"), duration_s=_seconds(body)),
        )
    if message_type == "media":
        return Content(), (
            Attachment(
                type=AttachmentType.VIDEO,
                file_id=body.req("file_key"),
                name=body.opt("file_name"),
                duration_s=_seconds(body),
            ),
        )
    if message_type == "sticker":
        return Content(), (Attachment(type=AttachmentType.STICKER, file_id=body.req("file_key")),)
    if message_type == "interactive":
        title = card_title(body.data)
        lines = [f"[card: {title}]" if title else "[card]", *card_lines(body.data)]
        return Content.from_text("\n".join(lines)), ()
    if message_type in ("share_chat", "share_user"):
        shared = body.req("chat_id" if message_type == "share_chat" else "user_id")
        kind = "shared group" if message_type == "share_chat" else "shared contact"
        name = (names or {}).get(shared)
        return Content.from_text(f"[{kind}: {name}]" if name else f"[{kind}]"), ()
    label = _PLACEHOLDER_KINDS.get(message_type, f"{message_type} message")
    return Content.from_text(_placeholder(label, body.data)), ()


def _placeholder(label: str, data: Any) -> str:
    """``[label: what it shows]``: its topic, summary, title or name, and a poll's options."""
    if not isinstance(data, Mapping):
        return f"[{label}]"
    detail = next((data[k] for k in _DETAIL_KEYS if isinstance(data.get(k), str) and data[k]), None)
    summary = data.get("summary")
    if detail is None and isinstance(summary, Mapping):
        detail = card_title(summary) or " ".join(card_lines(summary)) or None
    if label == "poll":
        if data.get("status") == 1:
            label = "poll (closed)"
        options = [o for o in data.get("options") or () if isinstance(o, str)]
        if options:
            detail = f"{detail or ''} — {' / '.join(options)}".strip()
    return f"[{label}: {detail}]" if detail else f"[{label}]"


def _seconds(body: Fields) -> float | None:
    millis = body.opt_int("duration")
    return None if millis is None else millis / 1000


def _text_with_mentions(text: str, mentions: Mapping[str, MentionRef]) -> list[Inline]:
    out: list[Inline] = []
    pos = 0
    for match in _PLACEHOLDER.finditer(text):
        key = match.group(0)
        ref = mentions.get(key)
        if ref is None and key != "@_all":
            continue
        if match.start() > pos:
            out.append(Text(text=text[pos : match.start()]))
        if ref is None:
            out.append(Mention(user_id=None, text="@all"))
        else:
            out.append(Mention(user_id=ref.open_id, text=f"@{ref.name}"))
        pos = match.end()
    if pos < len(text):
        out.append(Text(text=text[pos:]))
    return out


def _post(body: Fields, mentions: Mapping[str, MentionRef]) -> tuple[Content, tuple[Attachment, ...]]:
    if "content" not in body.data:
        # The send form wraps the post in a locale key; take the first one.
        for locale, inner in body.data.items():
            if isinstance(inner, Mapping) and "content" in inner:
                body = Fields(inner, f"{body.path}.{locale}", body.event_type)
                break
        else:
            raise MalformedPayload(f"{body.path}.content: missing", event_type=body.event_type)
    nodes: list[Inline] = []
    attachments: list[Attachment] = []
    title = body.opt("title")
    if title:
        nodes.append(Bold(children=(Text(text=title),)))
    for i, line in enumerate(body.array("content")):
        if not isinstance(line, list):
            raise MalformedPayload(f"{body.path}.content.{i}: not a list", event_type=body.event_type)
        inline: list[Inline] = []
        for j, element in enumerate(line):
            item = Fields(element, f"{body.path}.content.{i}.{j}", body.event_type)
            _post_element(item, mentions, inline, attachments)
        if line and not inline:
            continue  # a line holding only an image or a video: it lives on as an attachment
        if nodes:
            nodes.append(Text(text="\n"))
        nodes.extend(inline)
    return Content(nodes=_merge(nodes)), tuple(attachments)


def _post_element(
    item: Fields, mentions: Mapping[str, MentionRef], nodes: list[Inline], attachments: list[Attachment]
) -> None:
    tag = item.req("tag")
    if tag == "text":
        nodes.extend(_styled([Text(text=_any_text(item))], item))
    elif tag == "a":
        href = item.opt("href")
        label = _any_text(item) or (href or "")
        inner: list[Inline] = [Text(text=label)] if label else []
        if href:
            nodes.extend(_styled([Link(url=href, children=tuple(inner))], item))
        else:
            nodes.extend(_styled(inner, item))
    elif tag == "at":
        user = item.opt("user_id") or item.opt("open_id") or ""
        open_id = item.opt("open_id") or (user if user.startswith("ou_") else None)
        ref = mentions.get(user) or next(
            (r for r in mentions.values() if open_id and r.open_id == open_id), None
        )
        if ref is not None:
            nodes.append(Mention(user_id=ref.open_id, text=f"@{ref.name}"))
        elif user in ("all", "@_all"):
            nodes.append(Mention(user_id=None, text="@all"))
        else:
            name = item.opt("user_name") or user
            nodes.append(Mention(user_id=open_id, text=f"@{name}"))
    elif tag == "img":
        attachments.append(
            Attachment(
                type=AttachmentType.PHOTO,
                file_id=item.req("image_key"),
                width=item.opt_int("width"),
                height=item.opt_int("height"),
            )
        )
    elif tag == "media":
        attachments.append(Attachment(type=AttachmentType.VIDEO, file_id=item.req("file_key")))
    elif tag == "emotion":
        kind = item.req("emoji_type")
        known = emoji.TO_UNICODE.get(kind)
        nodes.append(CustomEmoji(alt=known or f"[{kind}]"))
    elif tag == "code_block":
        lang = item.opt("language")
        nodes.append(Pre(text=_any_text(item), lang=lang.lower() if lang else None))
    elif tag == "hr":
        nodes.append(Text(text="---"))
    else:
        # md and tags newer than this adapter: keep whatever text they carry.
        text = _any_text(item)
        nodes.append(Text(text=text if text else f"[{tag}]"))


def _any_text(item: Fields) -> str:
    value = item.data.get("text")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MalformedPayload(f"{item.path}.text: not a string", event_type=item.event_type)
    return value


def _styled(nodes: list[Inline], item: Fields) -> list[Inline]:
    styles = item.array("style")
    if not nodes or not styles:
        return nodes
    wrapped: list[Inline] = nodes
    for name, model in reversed(_STYLES):
        if name in styles:
            wrapped = [model(children=tuple(wrapped))]
    return wrapped


def _merge(nodes: list[Inline]) -> tuple[Inline, ...]:
    """Merge adjacent text and drop empty text (recursively inside styles)."""
    out: list[Inline] = []
    for node in nodes:
        if isinstance(node, Bold | Italic | Underline | Strikethrough):
            node = type(node)(children=_merge(list(node.children)))
        if isinstance(node, Text):
            if not node.text:
                continue
            if out and isinstance(out[-1], Text):
                out[-1] = Text(text=out[-1].text + node.text)
                continue
        out.append(node)
    return tuple(out)
