"""Telegram text + entities → the canonical content tree.

Offsets and lengths are UTF-16 code units (Bot API): an emoji outside the BMP counts two, so every
boundary is mapped to a Python string index through the UTF-16 positions of the text; a boundary that
falls inside a surrogate pair is a malformed payload.

Nesting follows the Bot API rules (an entity sharing characters with another is contained in it); a
payload that crosses them anyway is not rejected: the inner entity is clipped at its parent's end and its
remainder continues as a sibling, so every character keeps every style it had. Ties on equal ranges nest
in a fixed order (:data:`_RANK`): block quote, link, bold, italic, underline, strikethrough, spoiler,
then the leaves (code, pre, mentions, custom emoji), which keep their text raw.

Entity kinds without a node of their own (hashtag, cashtag, bot_command, email, phone_number and any kind
the Bot API adds later) stay plain text: the text is kept, only the decoration is not.
``Content.plain_text()`` of the result always equals the message text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from larkbot.canonical.content import (
    Blockquote,
    Bold,
    Code,
    Content,
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

from .errors import MalformedUpdate
from .payload import Obj

_RANK: Final = {
    "blockquote": 0,
    "expandable_blockquote": 0,
    "text_link": 1,
    "url": 1,
    "bold": 2,
    "italic": 3,
    "underline": 4,
    "strikethrough": 5,
    "spoiler": 6,
    "code": 7,
    "pre": 7,
    "mention": 7,
    "text_mention": 7,
    "custom_emoji": 7,
}
_LEAVES: Final = frozenset({"code", "pre", "mention", "text_mention", "custom_emoji"})


@dataclass(frozen=True, slots=True)
class _Span:
    start: int  # Python string index
    end: int
    kind: str
    entity: Obj

    @property
    def rank(self) -> int:
        return _RANK[self.kind]


def utf16_index(text: str) -> dict[int, int]:
    """UTF-16 offset → string index, for every character boundary of ``text``."""
    index: dict[int, int] = {}
    pos = 0
    for i, ch in enumerate(text):
        index[pos] = i
        pos += 2 if ord(ch) > 0xFFFF else 1
    index[pos] = len(text)
    return index


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def to_content(text: str, entities: list[Obj]) -> Content:
    """Build the content tree of ``text`` decorated by raw ``MessageEntity`` objects."""
    if not text:
        return Content()
    index = utf16_index(text)
    spans: list[_Span] = []
    for entity in entities:
        kind = entity.str_("type")
        offset = entity.int_("offset")
        length = entity.int_("length")
        if offset < 0 or length < 0:
            raise MalformedUpdate(entity.path, "negative offset or length")
        start, end = index.get(offset), index.get(offset + length)
        if start is None or end is None:
            total = utf16_len(text)
            if offset + length > total:
                raise MalformedUpdate(entity.path, f"entity ends at {offset + length}, text has {total}")
            raise MalformedUpdate(entity.path, "entity boundary inside a surrogate pair")
        if kind in _RANK and end > start:
            spans.append(_Span(start, end, kind, entity))
    return Content(nodes=_build(text, 0, len(text), spans))


def _order(span: _Span) -> tuple[int, int, int]:
    # Outer first: earlier start, then longer, then lower rank.
    return (span.start, -span.end, span.rank)


def _build(text: str, start: int, end: int, spans: list[_Span]) -> tuple[Inline, ...]:
    pending = sorted(spans, key=_order)
    out: list[Inline] = []
    pos = start
    while pending:
        head = pending.pop(0)
        if head.end <= pos:
            continue
        if head.start < pos:  # overlaps a previous sibling: keep the part after it
            head = _Span(pos, head.end, head.kind, head.entity)
        if head.start > pos:
            out.append(Text(text=text[pos : head.start]))
        inner: list[_Span] = []
        rest: list[_Span] = []
        for span in pending:
            if span.start >= head.end:
                rest.append(span)
            elif span.end <= head.end:
                inner.append(span)
            else:  # crosses the end of ``head``: split it there
                inner.append(_Span(span.start, head.end, span.kind, span.entity))
                rest.append(_Span(head.end, span.end, span.kind, span.entity))
        pending = sorted(rest, key=_order)
        out.append(
            _node(text, head, () if head.kind in _LEAVES else _build(text, head.start, head.end, inner))
        )
        pos = head.end
    if pos < end:
        out.append(Text(text=text[pos:end]))
    return _merge_text(out)


def _node(text: str, span: _Span, children: tuple[Inline, ...]) -> Inline:
    raw = text[span.start : span.end]
    kind = span.kind
    entity = span.entity
    if kind == "bold":
        return Bold(children=children)
    if kind == "italic":
        return Italic(children=children)
    if kind == "underline":
        return Underline(children=children)
    if kind == "strikethrough":
        return Strikethrough(children=children)
    if kind == "spoiler":
        return Spoiler(children=children)
    if kind in ("blockquote", "expandable_blockquote"):
        return Blockquote(children=children)
    if kind == "url":
        return Link(url=raw, children=children)
    if kind == "text_link":
        url = entity.str_("url")
        if not url:
            raise MalformedUpdate(f"{entity.path}.url", "empty url")
        return Link(url=url, children=children)
    if kind == "code":
        return Code(text=raw)
    if kind == "pre":
        return Pre(text=raw, lang=entity.opt_str("language") or None)
    if kind == "mention":
        return Mention(text=raw)
    if kind == "text_mention":
        return Mention(text=raw, user_id=str(entity.obj("user").int_("id")))
    emoji_id = entity.str_("custom_emoji_id")
    return CustomEmoji(alt=raw, emoji_id=emoji_id or None)


def _merge_text(nodes: list[Inline]) -> tuple[Inline, ...]:
    merged: list[Inline] = []
    for node in nodes:
        if isinstance(node, Text) and merged and isinstance(merged[-1], Text):
            merged[-1] = Text(text=merged[-1].text + node.text)
        elif not (isinstance(node, Text) and not node.text):
            merged.append(node)
    return tuple(merged)
