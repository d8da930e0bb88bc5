"""The Bot API objects a member's action produces, built as Telegram builds them (pure: no I/O).

Telegram's shapes (core.telegram.org/bots/api): a ``Message`` carries ``entities`` (``caption_entities``
for a photo) with offsets and lengths in UTF-16 code units, a ``mention`` for each ``@username`` in the
text; ``reply_to_message`` is the replied message itself, without its own reply; an edit is an
``edited_message`` with the same ``message_id`` and an ``edit_date``; a reaction is a
``message_reaction`` (``MessageReactionUpdated``) with the user's ``old_reaction`` and ``new_reaction``;
a photo is an array of ``PhotoSize``. A member's deletion has no update at all: the Bot API tells a bot
nothing when someone deletes a message in a group.
"""

from __future__ import annotations

import io
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from PIL import Image, UnidentifiedImageError

if TYPE_CHECKING:
    from larkbot.ingress_telegram.fake.wire import Recorded

#: Telegram's ``ReactionTypeEmoji`` set (the emoji a bot or a member may react with).
REACTION_EMOJI: Final = frozenset(
    (
        "👍", "👎", "❤", "🔥", "🥰", "👏", "😁", "🤔", "🤯", "😱", "🤬", "😢",
        "🎉", "🤩", "🤮", "💩", "🙏", "👌", "🕊", "🤡", "🥱", "🥴", "😍", "🐳",
        "❤‍🔥", "🌚", "🌭", "💯", "🤣", "⚡", "🍌", "🏆", "💔", "🤨", "😐", "🍓",
        "🍾", "💋", "🖕", "😈", "😴", "😭", "🤓", "👻", "👨‍💻", "👀", "🎃", "🙈",
        "😇", "😨", "🤝", "✍", "🤗", "🫡", "🎅", "🎄", "☃", "💅", "🤪", "🗿",
        "🆒", "💘", "🙉", "🦄", "😘", "💊", "🙊", "😎", "👾", "🤷‍♂", "🤷", "🤷‍♀",
        "😡",
    )
)  # fmt: skip
#: The ones the page offers first, as Telegram's own picker does.
QUICK_REACTIONS: Final = ("👍", "❤", "🔥", "😁", "🤔", "👀", "🎉", "👎", "🙏", "💯")
#: Telegram's limit for a photo sent from a client.
MAX_PHOTO_BYTES: Final = 10 * 1024 * 1024
#: What a client sends as a photo; anything else would be a document.
PHOTO_FORMATS: Final = {"JPEG": "image/jpeg", "PNG": "image/png", "WEBP": "image/webp"}
# A username is 4-32 letters, digits and underscores; Telegram marks it when nothing word-like touches it.
_MENTION: Final = re.compile(r"(?<![A-Za-z0-9_@])@[A-Za-z0-9_]{4,32}(?![A-Za-z0-9_])")


class NotAPhoto(ValueError):
    """The upload is not a JPEG, PNG or WebP image, or it cannot be read."""


@dataclass(frozen=True, slots=True)
class ImageInfo:
    content_type: str
    extension: str
    width: int
    height: int


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def mention_entities(text: str) -> list[dict[str, Any]]:
    return [
        {"type": "mention", "offset": utf16_len(text[: m.start()]), "length": utf16_len(m.group())}
        for m in _MENTION.finditer(text)
    ]


def member_user(user_id: int, name: str) -> dict[str, Any]:
    return {"id": user_id, "is_bot": False, "first_name": name}


def text_fields(text: str, *, caption: bool) -> dict[str, Any]:
    """``text`` and ``entities``, or for a photo ``caption`` and ``caption_entities`` (none when empty)."""
    if caption and not text:
        return {}
    key = "caption" if caption else "text"
    entities = mention_entities(text)
    return {key: text, **({f"{key}_entities" if caption else "entities": entities} if entities else {})}


def message(
    message_id: int,
    user: dict[str, Any],
    chat: dict[str, Any],
    date: int,
    text: str,
    *,
    reply_to: dict[str, Any] | None = None,
    photo: list[dict[str, Any]] | None = None,
    media: tuple[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """``media``: ``("voice" | "audio", its Bot API object)``; like a photo, it takes a caption."""
    built: dict[str, Any] = {"message_id": message_id, "from": user, "chat": chat, "date": date}
    if reply_to is not None:
        built["reply_to_message"] = {k: v for k, v in reply_to.items() if k != "reply_to_message"}
    if photo is not None:
        built["photo"] = photo
    if media is not None:
        built[media[0]] = media[1]
    return {**built, **text_fields(text, caption=photo is not None or media is not None)}


def edited(previous: dict[str, Any], text: str, edit_date: int) -> dict[str, Any]:
    """``previous`` with its new text (or caption) and ``edit_date``."""
    photo = "photo" in previous or "voice" in previous or "audio" in previous
    kept = {
        k: v
        for k, v in previous.items()
        if k not in ("text", "entities", "caption", "caption_entities", "edit_date")
    }
    return {**kept, "edit_date": edit_date, **text_fields(text, caption=photo)}


def reaction(
    chat: dict[str, Any],
    message_id: int,
    user: dict[str, Any],
    date: int,
    old: list[str],
    new: list[str],
) -> dict[str, Any]:
    return {
        "chat": chat,
        "message_id": message_id,
        "user": user,
        "date": date,
        "old_reaction": [{"type": "emoji", "emoji": e} for e in old],
        "new_reaction": [{"type": "emoji", "emoji": e} for e in new],
    }


def photo_sizes(file_id: str, unique_id: str, info: ImageInfo, size: int) -> list[dict[str, Any]]:
    # One size, the original: Telegram adds smaller ones it renders itself, which the fake has no bytes for.
    return [
        {"file_id": file_id, "file_unique_id": unique_id, "width": info.width, "height": info.height,
         "file_size": size}
    ]  # fmt: skip


def image_info(data: bytes) -> ImageInfo:
    """The format and size from the image's header (Pillow reads no pixels for these)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                found, (width, height) = image.format, image.size
    except (UnidentifiedImageError, Image.DecompressionBombWarning, Image.DecompressionBombError) as exc:
        raise NotAPhoto(f"not a JPEG, PNG or WebP image ({type(exc).__name__})") from None
    if found not in PHOTO_FORMATS:
        raise NotAPhoto(f"a {found} image is not sent as a photo; JPEG, PNG or WebP")
    extension = {"JPEG": "jpg"}.get(found, found.lower())
    return ImageInfo(PHOTO_FORMATS[found], extension, width, height)


__all__ = [
    "MAX_PHOTO_BYTES",
    "QUICK_REACTIONS",
    "REACTION_EMOJI",
    "ImageInfo",
    "NotAPhoto",
    "edited",
    "image_info",
    "member_user",
    "mention_entities",
    "message",
    "photo_sizes",
    "reaction",
    "text_fields",
    "utf16_len",
]


#: How long Telegram shows "typing…" after one ``sendChatAction`` (or until the bot's next message).
TYPING_S = 5.0


def bot_typing(requests: Iterable[Recorded], chat_id: int, now: float) -> bool:
    """Whether a member would see the bot typing at ``now``: a ``typing`` chat action for this chat within
    :data:`TYPING_S`, and no message the bot sent there since."""
    chat = str(chat_id)
    requests = list(requests)
    last = max(
        (
            r.at
            for r in requests
            if r.method == "sendChatAction"
            and str(r.params.get("chat_id")) == chat
            and r.params.get("action") == "typing"
        ),
        default=None,
    )
    if last is None or now - last > TYPING_S:
        return False
    return not any(
        r.method == "sendMessage" and str(r.params.get("chat_id")) == chat and r.at >= last for r in requests
    )
