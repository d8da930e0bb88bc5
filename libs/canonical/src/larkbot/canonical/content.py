"""The rich-text content tree of a message and its attachments (SPEC §1).

Decisions:

- One spelling per text: a line break is a ``\\n`` inside :class:`Text` (there is no line-break node), so
  two adapters that see the same message build equal trees and the reducer can compare them.
- Styles nest (``Bold(children=(Italic(...),))``); leaves are :class:`Text`, :class:`Code`, :class:`Pre`,
  :class:`Mention` and :class:`CustomEmoji`. The union is discriminated by ``kind``.
- :meth:`Content.plain_text` concatenates leaf text without decoration, which reproduces the platform's
  own plain text (Telegram's ``message.text`` exactly: entities only mark ranges of it).
- Attachments carry the platform's file key, never bytes. ``thumbnail_key`` is an object-store key filled in
  by the pipeline once the media transform is done; alt text is not stored here (it is cached
  content-addressed and hydrated at render time, SPEC §6).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field

from ._base import Id, NonNegativeInt, WireModel

__all__ = [
    "Attachment",
    "AttachmentType",
    "Blockquote",
    "Bold",
    "Code",
    "Content",
    "CustomEmoji",
    "Inline",
    "Italic",
    "Link",
    "Mention",
    "Pre",
    "Spoiler",
    "StickerFormat",
    "Strikethrough",
    "Text",
    "Underline",
]


class Text(WireModel):
    """Plain text; may contain ``\\n``."""

    kind: Literal["text"] = "text"
    text: str


class Bold(WireModel):
    kind: Literal["bold"] = "bold"
    children: tuple[Inline, ...]


class Italic(WireModel):
    kind: Literal["italic"] = "italic"
    children: tuple[Inline, ...]


class Underline(WireModel):
    kind: Literal["underline"] = "underline"
    children: tuple[Inline, ...]


class Strikethrough(WireModel):
    kind: Literal["strikethrough"] = "strikethrough"
    children: tuple[Inline, ...]


class Spoiler(WireModel):
    kind: Literal["spoiler"] = "spoiler"
    children: tuple[Inline, ...]


class Code(WireModel):
    """Inline code (a leaf: formatting inside code is not kept)."""

    kind: Literal["code"] = "code"
    text: str


class Pre(WireModel):
    """A code block; ``lang`` is the language tag when the platform gives one."""

    kind: Literal["pre"] = "pre"
    text: str
    lang: str | None = None


class Link(WireModel):
    """A hyperlink; ``children`` are the visible text (a bare URL in text has itself as its child)."""

    kind: Literal["link"] = "link"
    url: Id
    children: tuple[Inline, ...]


class Mention(WireModel):
    """A mention. ``text`` is what the message shows (``@name``); ``user_id`` is the stable platform id
    when the platform resolves it (Feishu ``ou_…``; Telegram text mentions), ``None`` for a bare
    ``@username`` or ``@all``."""

    kind: Literal["mention"] = "mention"
    user_id: Id | None = None
    text: str


class Blockquote(WireModel):
    kind: Literal["blockquote"] = "blockquote"
    children: tuple[Inline, ...]


class CustomEmoji(WireModel):
    """A custom emoji. ``alt`` is its fallback text (the standard emoji it stands for, or Feishu's
    ``[name]``); ``emoji_id`` keys the media transform that describes it (Telegram's
    ``custom_emoji_id``; Feishu's ``emoji_type``, which no transform resolves). ``pack`` (its sticker
    set) and ``alt_key`` (``emoji:<id>``, the cache key of its description) are written by the pipeline
    once a media worker described it, like an attachment's ``thumbnail_key``: an emoji committed
    without them renders its fallback, whatever the cache learns later."""

    kind: Literal["custom_emoji"] = "custom_emoji"
    alt: str
    emoji_id: Id | None = None
    pack: str | None = None
    alt_key: Id | None = None


Inline = Annotated[
    Text
    | Bold
    | Italic
    | Underline
    | Strikethrough
    | Spoiler
    | Code
    | Pre
    | Link
    | Mention
    | Blockquote
    | CustomEmoji,
    Field(discriminator="kind"),
]

_CONTAINERS = (Bold, Italic, Underline, Strikethrough, Spoiler, Link, Blockquote)
for _model in _CONTAINERS:
    _model.model_rebuild()


def _plain(nodes: tuple[Inline, ...], out: list[str]) -> None:
    for node in nodes:
        if isinstance(node, Text | Code | Pre | Mention):
            out.append(node.text)
        elif isinstance(node, CustomEmoji):
            out.append(node.alt)
        elif isinstance(node, Link) and not node.children:
            out.append(node.url)
        else:
            _plain(node.children, out)


class Content(WireModel):
    """The body of a message: a sequence of inline nodes (empty for a media-only message)."""

    nodes: tuple[Inline, ...] = ()

    @classmethod
    def from_text(cls, text: str) -> Content:
        """Unformatted content; the empty string gives empty content, not an empty :class:`Text`."""
        return cls(nodes=(Text(text=text),) if text else ())

    def plain_text(self) -> str:
        out: list[str] = []
        _plain(self.nodes, out)
        return "".join(out)


class AttachmentType(StrEnum):
    """Telegram's media kinds; Feishu maps image → PHOTO, file → FILE, audio → VOICE, media → VIDEO,
    sticker → STICKER."""

    PHOTO = "photo"
    STICKER = "sticker"
    ANIMATION = "animation"
    VIDEO = "video"
    VIDEO_NOTE = "video_note"
    AUDIO = "audio"
    VOICE = "voice"
    DOCUMENT = "document"
    FILE = "file"


class StickerFormat(StrEnum):
    """How a sticker is encoded: WebP/PNG, Lottie (TGS, gzip-compressed), or WebM video."""

    STATIC = "static"
    ANIMATED = "animated"
    VIDEO = "video"


class Attachment(WireModel):
    """One media item of a message. Sizes and durations are what the platform reported (``None`` when it
    did not); ``content_hash`` (``sha256:<hex>``) is set once the bytes have been seen."""

    type: AttachmentType
    file_id: Id
    mime: str | None = None
    name: str | None = None
    width: NonNegativeInt | None = None
    height: NonNegativeInt | None = None
    duration_s: Annotated[float, Field(ge=0)] | None = None
    size_bytes: NonNegativeInt | None = None
    content_hash: str | None = None
    sticker_pack: str | None = None
    sticker_emoji: str | None = None
    sticker_format: StickerFormat | None = None
    thumbnail_key: str | None = None
