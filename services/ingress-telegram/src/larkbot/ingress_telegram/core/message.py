"""Pieces of a Telegram ``Message``: senders, content, attachments, replies and forwards."""

from __future__ import annotations

from typing import Final

from larkbot.canonical.content import Attachment, AttachmentType, Content, StickerFormat
from larkbot.canonical.events import ForwardInfo, Sender

from .entities import to_content
from .errors import MalformedUpdate
from .payload import Obj

#: Message fields that carry content this adapter understands (text/caption and the media kinds).
MEDIA_KINDS: Final = (
    "animation",  # checked before ``document``: an animation message also carries ``document``
    "photo",
    "sticker",
    "video",
    "video_note",
    "voice",
    "audio",
    "document",
)
#: Content kinds that exist in the Bot API but that this adapter does not consume (dead-lettered).
UNSUPPORTED_CONTENT: Final = (
    "poll",
    "dice",
    "game",
    "location",
    "venue",
    "contact",
    "story",
    "invoice",
    "paid_media",
    "checklist",
    "giveaway",
    "giveaway_winners",
)


def user_sender(user: Obj) -> Sender:
    first = user.str_("first_name")
    last = user.opt_str("last_name")
    return Sender(
        id=str(user.int_("id")),
        display_name=f"{first} {last}" if last else first,
        username=user.opt_str("username"),
        is_bot=user.bool_("is_bot"),
    )


def chat_sender(chat: Obj) -> Sender:
    """A chat speaking as itself (anonymous group admin, linked channel, a channel reacting)."""
    title = chat.opt_str("title")
    if title is None:
        first, last = chat.opt_str("first_name"), chat.opt_str("last_name")
        title = " ".join(p for p in (first, last) if p) or chat.opt_str("username") or str(chat.int_("id"))
    return Sender(id=str(chat.int_("id")), display_name=title, username=chat.opt_str("username"))


def message_sender(msg: Obj) -> Sender:
    """``sender_chat`` wins over ``from``: for anonymous admins and channel posts ``from`` is a placeholder
    account (GroupAnonymousBot, Telegram) shared by every such message."""
    sender_chat = msg.opt_obj("sender_chat")
    if sender_chat is not None:
        return chat_sender(sender_chat)
    return user_sender(msg.obj("from"))


def message_content(msg: Obj) -> Content:
    if msg.has("text"):
        return to_content(msg.str_("text"), msg.objs("entities"))
    if msg.has("caption"):
        return to_content(msg.str_("caption"), msg.objs("caption_entities"))
    return Content()


def attachments(msg: Obj) -> tuple[Attachment, ...]:
    for kind in MEDIA_KINDS:
        if msg.has(kind):
            return (_attachment(kind, msg),)
    return ()


def _attachment(kind: str, msg: Obj) -> Attachment:
    if kind == "photo":
        return _photo(msg)
    media = msg.obj(kind)
    base = {
        "file_id": media.str_("file_id"),
        "size_bytes": media.opt_int("file_size"),
        "mime": media.opt_str("mime_type"),
        "duration_s": media.opt_int("duration"),
    }
    if kind == "sticker":
        animated, video = media.bool_("is_animated"), media.bool_("is_video")
        fmt = StickerFormat.ANIMATED if animated else StickerFormat.VIDEO if video else StickerFormat.STATIC
        return Attachment(
            type=AttachmentType.STICKER,
            file_id=base["file_id"],
            size_bytes=base["size_bytes"],
            mime=_STICKER_MIME[fmt],
            width=media.int_("width"),
            height=media.int_("height"),
            sticker_pack=media.opt_str("set_name"),
            sticker_emoji=media.opt_str("emoji"),
            sticker_format=fmt,
        )
    if kind == "video_note":
        side = media.int_("length")
        return Attachment(type=AttachmentType.VIDEO_NOTE, width=side, height=side, **base)
    if kind == "audio":
        name = media.opt_str("file_name")
        if name is None:
            parts = [p for p in (media.opt_str("performer"), media.opt_str("title")) if p]
            name = " - ".join(parts) or None
        return Attachment(type=AttachmentType.AUDIO, name=name, **base)
    if kind == "voice":
        return Attachment(type=AttachmentType.VOICE, **base)
    if kind == "document":
        return Attachment(type=AttachmentType.DOCUMENT, name=media.opt_str("file_name"), **base)
    # animation, video
    return Attachment(
        type=AttachmentType(kind),
        name=media.opt_str("file_name"),
        width=media.opt_int("width"),
        height=media.opt_int("height"),
        **base,
    )


_STICKER_MIME: Final = {
    StickerFormat.STATIC: "image/webp",
    StickerFormat.ANIMATED: "application/x-tgsticker",
    StickerFormat.VIDEO: "video/webm",
}


def _photo(msg: Obj) -> Attachment:
    sizes = msg.objs("photo")
    if not sizes:
        raise MalformedUpdate(f"{msg.path}.photo", "empty array of sizes")
    # Largest by pixels, then by bytes; the later entry wins a full tie (Telegram lists ascending).
    best = max(
        enumerate(sizes),
        key=lambda item: (
            item[1].int_("width") * item[1].int_("height"),
            item[1].opt_int("file_size") or 0,
            item[0],
        ),
    )[1]
    return Attachment(
        type=AttachmentType.PHOTO,
        file_id=best.str_("file_id"),
        width=best.int_("width"),
        height=best.int_("height"),
        size_bytes=best.opt_int("file_size"),
    )


def reply_target(msg: Obj) -> str | None:
    reply = msg.opt_obj("reply_to_message")
    if reply is None:
        return None
    # In forum topics every message "replies" to the topic's creation message; that is not a reply.
    if msg.bool_("is_topic_message") and reply.has("forum_topic_created"):
        return None
    return str(reply.int_("message_id"))


def reply_quote(msg: Obj) -> Content | None:
    quote = msg.opt_obj("quote")
    if quote is None:
        return None
    return to_content(quote.str_("text"), quote.objs("entities"))


def forward_info(msg: Obj) -> ForwardInfo | None:
    origin = msg.opt_obj("forward_origin")
    if origin is None:
        return None
    kind = origin.str_("type")
    date = float(origin.int_("date"))
    if kind == "user":
        user = user_sender(origin.obj("sender_user"))
        return ForwardInfo(from_name=user.display_name, from_id=user.id, date_sec=date)
    if kind == "hidden_user":
        return ForwardInfo(from_name=origin.str_("sender_user_name"), date_sec=date)
    if kind in ("chat", "channel"):
        chat = origin.obj("sender_chat" if kind == "chat" else "chat")
        return ForwardInfo(
            from_name=origin.opt_str("author_signature"),
            from_chat_id=str(chat.int_("id")),
            from_chat_title=chat.opt_str("title"),
            date_sec=date,
        )
    raise MalformedUpdate(f"{origin.path}.type", "unknown message origin type")
