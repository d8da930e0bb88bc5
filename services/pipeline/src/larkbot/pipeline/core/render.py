"""RC = render(IC, params): one XML segment per IC node (SPEC §3). Pure.

Every rule depends only on the node and nodes before it (the alias table is claimed in context order), so
appending a node never changes an earlier segment's bytes. Vocabulary, attributes in this order:

- ``<message id sender uid? t received? edited? forwarded_from? maintainer? bot? myself? deleted?
  blocked?>``: body is an optional ``<in-reply-to id sender? quoted?>preview</in-reply-to>``, the content,
  then one line per attachment. Deleted and blocked messages are self-closing.
- ``uid`` (both platforms: the open_id, the Telegram user id) is omitted when the rendered sender already
  is that id; ``<mention uid>`` omits it for the message's own sender (and for a mention nobody resolved);
- ``received`` appears when the message arrived more than 120 s after its platform time, or after a
  message with a later platform time (``MessageNode.out_of_order``): arrival order stays, the model sees
  why the times go backwards;
- inline ``<b> <i> <u> <s> <spoiler> <code> <pre lang?> <a href> <blockquote> <mention uid?>
  <custom-emoji pack?>``, a custom emoji's body its description when the event records one
  (``alt_key``), else its fallback emoji;
- attachments ``<image|sticker|animation|attachment type? mime? name? size? duration? pack? file-id>alt
  </…>``; without alt text a thumbnail image part follows. What was said in a voice note, an audio file
  or a video note follows as ``<transcript>…</transcript>`` inside the element (after the alt text, if
  any). ``file-id`` is ``<rendered message id>:<index>``, and ``Segment.attachments`` lists every
  rendered attachment under that index with its platform file key;
- ``topic`` (a message in a forum topic: the topic's name when the message arrived) comes after ``edited``;
  ``forwarded_from`` names the person, or the chat with the author's signature in parentheses;
- a message segment's provenance fields come from the same facts as its attributes (``myself`` ⇔
  ``is_myself``, ``bot`` ⇔ ``is_bot and not is_myself``, ``deleted`` ⇔ ``is_deleted``, ``forwarded_from``
  ⇔ ``is_forwarded``); ``reply_to_message_id`` is the canonical id that ``<in-reply-to id>`` shows
  aliased. A self-closing (deleted, blocked) message keeps them all;
- ``<event type t …>`` for system nodes (:mod:`.events_xml`), ``<runtime-event type t …>text</runtime-event>``
  for runtime ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import assert_never

from larkbot.canonical.content import (
    Attachment,
    AttachmentType,
    Blockquote,
    Bold,
    Code,
    CustomEmoji,
    Inline,
    Italic,
    Link,
    Mention,
    Pre,
    Spoiler,
    Strikethrough,
    Text,
    Underline,
)
from larkbot.canonical.context import AttachmentRef
from larkbot.canonical.events import CanonicalEvent, EditEvent, ForwardInfo, MessageEvent, Sender
from larkbot.canonical.llm import ImagePart

from . import xml
from .aliases import AliasTable
from .emoji import alt_keys
from .events_xml import event_xml
from .model import MessageNode, Node, RuntimeNode, SystemNode
from .params import RenderParams
from .segments import Rendered, attachment_ref
from .timefmt import format_time, is_late

_TAGS: dict[type, str] = {
    Bold: "b",
    Italic: "i",
    Underline: "u",
    Strikethrough: "s",
    Spoiler: "spoiler",
    Blockquote: "blockquote",
}
_ATTACHMENT_TAGS = {
    AttachmentType.PHOTO: "image",
    AttachmentType.STICKER: "sticker",
    AttachmentType.ANIMATION: "animation",
}
THUMBNAIL_MIME = "image/webp"


def attachment_key(attachment: Attachment) -> str | None:
    """The content-addressed key its alt text is cached under (thumbnail first, then file hash)."""
    return attachment.thumbnail_key or attachment.content_hash


def transcript_key(attachment: Attachment) -> str | None:
    """The key its transcript is cached under: the file's hash, apart from descriptions (a video note
    has both)."""
    return f"transcript:{attachment.content_hash}" if attachment.content_hash else None


def attachment_alt_keys(attachment: Attachment) -> tuple[str, ...]:
    """Every cache key the rendering of ``attachment`` may read."""
    return tuple(key for key in (attachment_key(attachment), transcript_key(attachment)) if key is not None)


def render_keys(event: CanonicalEvent) -> set[str]:
    """The alt-text keys rendering ``event`` may need: its attachments' (descriptions and transcripts)
    and its custom emoji's."""
    if not isinstance(event, MessageEvent | EditEvent):
        return set()
    keys = {key for a in event.attachments for key in attachment_alt_keys(a)}
    return keys | alt_keys(event.content.nodes)


class Renderer:
    """Renders nodes of one chat. Holds the alias table, so nodes must be rendered in context order."""

    def __init__(self, params: RenderParams, alt_texts: Mapping[str, str] | None = None) -> None:
        self.params = params
        self.aliases = AliasTable(params.chat_id, params.alias_message_ids)
        self.alt_texts: Mapping[str, str] = alt_texts if alt_texts is not None else {}

    # -- helpers ---------------------------------------------------------------------------------------
    def time(self, epoch_sec: float, offset_min: int) -> str:
        p = self.params
        offset = p.chat_utc_offset_min if p.chat_utc_offset_min is not None else offset_min
        return format_time(epoch_sec, offset, p.deployment_utc_offset_min)

    def is_myself(self, user_id: str | None) -> bool:
        return user_id is not None and user_id == self.params.bot_user_id

    def person(self, name: str, sender: Sender | None) -> list[tuple[str, str]]:
        if sender is None:
            return []
        shown = self.params.name_of(sender.id, sender.display_name)
        pairs = [(name, shown)]
        if shown != sender.id:
            pairs.append(("uid", sender.id))
        return pairs

    # -- content ---------------------------------------------------------------------------------------
    def inline(self, nodes: tuple[Inline, ...], sender_id: str) -> str:
        out: list[str] = []
        for node in nodes:
            match node:
                case Text():
                    out.append(xml.text(node.text))
                case Mention():
                    pairs = []
                    if node.user_id is not None and node.user_id != sender_id:
                        pairs.append(("uid", node.user_id))
                    out.append(xml.element("mention", pairs, xml.text(node.text) or None))
                case Code():
                    out.append(f"<code>{xml.text(node.text)}</code>")
                case Pre():
                    pairs = [("lang", node.lang)] if node.lang else []
                    out.append(f"<pre{xml.attrs(pairs)}>{xml.text(node.text)}</pre>")
                case Link():
                    body = self.inline(node.children, sender_id) if node.children else xml.text(node.url)
                    out.append(f'<a href="{xml.attr(node.url)}">{body}</a>')
                case CustomEmoji():
                    pairs = [("pack", node.pack)] if node.pack else []
                    # The description only where the event records one (``core.emoji``), else the fallback.
                    alt = self.alt_texts.get(node.alt_key) if node.alt_key is not None else None
                    body = xml.text(alt or node.alt)
                    out.append(f"<custom-emoji{xml.attrs(pairs)}>{body}</custom-emoji>")
                case Bold() | Italic() | Underline() | Strikethrough() | Spoiler() | Blockquote():
                    tag = _TAGS[type(node)]
                    out.append(f"<{tag}>{self.inline(node.children, sender_id)}</{tag}>")
                case _:
                    assert_never(node)
        return "".join(out)

    def attachment(self, attachment: Attachment, index: int, shown_id: str, images: list[ImagePart]) -> str:
        tag = _ATTACHMENT_TAGS.get(attachment.type, "attachment")
        pairs: list[tuple[str, str]] = []
        if tag == "attachment":
            pairs.append(("type", attachment.type.value))
        if attachment.mime:
            pairs.append(("mime", attachment.mime))
        if attachment.name:
            pairs.append(("name", attachment.name))
        if attachment.width is not None and attachment.height is not None:
            pairs.append(("size", f"{attachment.width}x{attachment.height}"))
        if attachment.duration_s is not None:
            pairs.append(("duration", f"{attachment.duration_s:g}s"))
        if attachment.sticker_pack:
            pairs.append(("pack", attachment.sticker_pack))
        pairs.append(("file-id", f"{shown_id}:{index}"))
        key = attachment_key(attachment)
        alt = self.alt_texts.get(key) if key is not None else None
        heard_key = transcript_key(attachment)
        heard = self.alt_texts.get(heard_key) if heard_key is not None else None
        transcript = f"<transcript>{xml.text(heard)}</transcript>" if heard else ""
        if alt:
            return xml.element(tag, pairs, xml.text(alt) + transcript)
        if attachment.thumbnail_key:
            images.append(ImagePart(blob_key=attachment.thumbnail_key, mime=THUMBNAIL_MIME))
            return xml.element(tag, pairs, transcript or None)
        return xml.element(tag, pairs, (xml.text(attachment.sticker_emoji or "") + transcript) or None)

    # -- nodes -----------------------------------------------------------------------------------------
    def message(self, node: MessageNode) -> Rendered:
        p = self.params
        sender = node.sender
        myself = node.is_self_sent or self.is_myself(sender.id)
        blocked = sender.id in p.blocked_users and not myself
        shown_id = self.aliases.render(node.message_id)
        pairs: list[tuple[str, str]] = [("id", shown_id), *self.person("sender", sender)]
        pairs.append(("t", self.time(node.timestamp_sec, node.utc_offset_min)))
        if node.out_of_order or is_late(node.received_at_ms, node.timestamp_sec):
            pairs.append(("received", self.time(node.received_at_ms / 1000.0, node.utc_offset_min)))
        if node.edited_at_sec is not None:
            offset = node.edited_offset_min if node.edited_offset_min is not None else node.utc_offset_min
            pairs.append(("edited", self.time(node.edited_at_sec, offset)))
        if node.topic is not None:
            pairs.append(("topic", node.topic))
        if node.forward_info is not None:
            pairs.append(("forwarded_from", _forwarded_from(node.forward_info)))
        if sender.id in p.maintainers and not myself and not blocked:
            pairs.append(("maintainer", "true"))
        if sender.is_bot and not myself:
            pairs.append(("bot", "true"))
        if myself:
            pairs.append(("myself", "true"))
        if node.deleted:
            pairs.append(("deleted", "true"))
        if blocked:
            pairs.append(("blocked", "true"))

        images: list[ImagePart] = []
        refs: list[AttachmentRef] = []
        mentions_me = replies_to_me = False
        reply = node.reply
        if reply is not None:
            # Claimed before the body is built either way, so that a deleted or blocked message claims the
            # same aliases as its live rendering did (collision order stays stable across deletes).
            reply_id = self.aliases.render(reply.message_id)
        if node.deleted or blocked:
            text = xml.element("message", pairs, None)
        else:
            body: list[str] = []
            if reply is not None:
                reply_pairs: list[tuple[str, str]] = [("id", reply_id)]
                if reply.sender_id is not None:
                    reply_pairs.append(("sender", p.name_of(reply.sender_id, reply.sender_name)))
                if reply.quote:
                    reply_pairs.append(("quoted", reply.quote))
                body.append(xml.element("in-reply-to", reply_pairs, xml.text(reply.preview or "") or None))
                replies_to_me = reply.sender_self_sent or self.is_myself(reply.sender_id)
            kept = node.body
            # A plain text renders as a ``Text`` node would (``model.Body``).
            content = xml.text(kept) if isinstance(kept, str) else self.inline(kept.nodes, sender.id)
            if content:
                body.append(content)
            for index, attachment in enumerate(node.attachments):
                body.append(self.attachment(attachment, index, shown_id, images))
                refs.append(attachment_ref(index, attachment))
            text = f"<message{xml.attrs(pairs)}>{chr(10).join(body)}</message>"
            if not isinstance(kept, str):
                mentions_me = _mentions(kept.nodes, p.bot_user_id, _handle(p.bot_username))
        return Rendered(
            text,
            tuple(images),
            tuple(refs),
            sender.id,
            myself,
            mentions_me and not blocked and not node.deleted,
            replies_to_me and not blocked and not node.deleted,
        )

    def names(self, members: tuple[Sender, ...]) -> str:
        return ", ".join(self.params.name_of(m.id, m.display_name) for m in members)

    def system(self, node: SystemNode) -> Rendered:
        text, sender_id = event_xml(self, node)
        return Rendered(text, (), (), sender_id, self.is_myself(sender_id), False, False)

    def runtime(self, node: RuntimeNode) -> Rendered:
        pairs: list[tuple[str, str]] = [
            ("type", node.type),
            ("t", self.time(node.timestamp_sec, node.utc_offset_min)),
        ]
        xml.add_attributes(pairs, node.attributes)
        text = xml.element("runtime-event", pairs, xml.text(node.text or "") or None)
        return Rendered(text, (), (), None, False, False, False)

    def render(self, node: Node) -> Rendered:
        match node:
            case MessageNode():
                return self.message(node)
            case SystemNode():
                return self.system(node)
            case RuntimeNode():
                return self.runtime(node)
            case _:
                assert_never(node)


def _forwarded_from(f: ForwardInfo) -> str:
    """The chat a message was forwarded from, with the author's signature beside it; else the person."""
    chat = f.from_chat_title or f.from_chat_id
    if chat is not None:
        return f"{chat} ({f.from_name})" if f.from_name else chat
    return f.from_name or f.from_id or "hidden"


def _handle(username: str | None) -> str | None:
    return f"@{username.lower()}" if username else None


def _mentions(nodes: tuple[Inline, ...], user_id: str | None, handle: str | None) -> bool:
    """A mention of the bot: by id, or (Telegram ``@username`` entities carry no id) by its handle."""
    for node in nodes:
        if isinstance(node, Mention):
            if node.user_id is not None:
                if node.user_id == user_id:
                    return True
            elif handle is not None and node.text.strip().lower() == handle:
                return True
        elif isinstance(
            node, Bold | Italic | Underline | Strikethrough | Spoiler | Link | Blockquote
        ) and _mentions(node.children, user_id, handle):
            return True
    return False
