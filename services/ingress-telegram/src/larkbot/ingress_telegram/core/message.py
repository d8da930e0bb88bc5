"""Pieces of a Telegram ``Message``: senders, content, attachments, replies, forwards and topics."""

from __future__ import annotations

from typing import Final

from larkbot.canonical.actions import CustomEmojiSticker
from larkbot.canonical.content import Attachment, AttachmentType, Content, StickerFormat, Text
from larkbot.canonical.events import ForwardInfo, QuotedMessage

from .entities import to_content
from .errors import MalformedUpdate
from .payload import Obj
from .placeholders import placeholder
from .senders import message_sender, user_sender

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
    "live_photo",  # its still photo when it has one, else the clip as a video
)


def message_content(msg: Obj) -> Content:
    """Text or caption, after the line of a kind without text of its own (:mod:`.placeholders`)."""
    if msg.has("text"):
        content = to_content(msg.str_("text"), msg.objs("entities"))
    elif msg.has("caption"):
        content = to_content(msg.str_("caption"), msg.objs("caption_entities"))
    else:
        content = Content()
    line = placeholder(msg)
    if line is None:
        return content
    nodes = [Text(text=line + ("\n" if content.nodes else "")), *content.nodes]
    if len(nodes) > 1 and isinstance(nodes[1], Text):
        nodes[:2] = [Text(text=nodes[0].text + nodes[1].text)]  # type: ignore[union-attr]
    return Content(nodes=tuple(nodes))


def quoted(msg: Obj) -> QuotedMessage:
    """A message embedded in another (a reply's target, a pinned message) as the event carries it."""
    sender = message_sender(msg) if msg.has("from") or msg.has("sender_chat") else None
    return QuotedMessage(
        sender=sender,
        content=message_content(msg),
        attachments=tuple(a.type for a in attachments(msg)),
    )


def attachments(msg: Obj) -> tuple[Attachment, ...]:
    for kind in MEDIA_KINDS:
        if msg.has(kind):
            return (_attachment(kind, msg),)
    return ()


def _attachment(kind: str, msg: Obj) -> Attachment:
    if kind == "photo":
        return _photo(msg)
    media = msg.obj(kind)
    if kind == "live_photo":
        if media.objs("photo"):
            return _photo(media)
        kind = "video"
    base = {
        "file_id": media.str_("file_id"),
        "size_bytes": media.opt_int("file_size"),
        "mime": media.opt_str("mime_type"),
        "duration_s": media.opt_int("duration"),
    }
    if kind == "sticker":
        fmt = _sticker_format(media)
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


def _sticker_format(sticker: Obj) -> StickerFormat:
    if sticker.bool_("is_animated"):
        return StickerFormat.ANIMATED
    return StickerFormat.VIDEO if sticker.bool_("is_video") else StickerFormat.STATIC


def custom_emoji_stickers(stickers: list[Obj]) -> tuple[CustomEmojiSticker, ...]:
    """``getCustomEmojiStickers``' answer: the stickers that carry a ``custom_emoji_id`` (Telegram leaves
    out the ids it does not know, and so do we)."""
    out: list[CustomEmojiSticker] = []
    for sticker in stickers:
        emoji_id = sticker.opt_str("custom_emoji_id")
        if not emoji_id:
            continue
        out.append(
            CustomEmojiSticker(
                emoji_id=emoji_id,
                file_id=sticker.str_("file_id"),
                set_name=sticker.opt_str("set_name") or None,
                emoji=sticker.opt_str("emoji") or None,
                format=_sticker_format(sticker),
                width=sticker.opt_int("width"),
                height=sticker.opt_int("height"),
                size_bytes=sticker.opt_int("file_size"),
            )
        )
    return tuple(out)


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


def reply_to(msg: Obj) -> Obj | None:
    """The message replied to. In forum topics every message "replies" to the topic's creation message;
    that is not a reply."""
    reply = msg.opt_obj("reply_to_message")
    if reply is None or (msg.bool_("is_topic_message") and reply.has("forum_topic_created")):
        return None
    return reply


def topic(msg: Obj) -> tuple[str | None, str | None]:
    """The forum topic (thread id, name when the payload carries it) of a topic message. A
    ``message_thread_id`` without ``is_topic_message`` is a reply thread, not a topic."""
    if not msg.bool_("is_topic_message"):
        return None, None
    thread = msg.opt_int("message_thread_id")
    if thread is None:
        return None, None
    reply = msg.opt_obj("reply_to_message")
    created = reply.opt_obj("forum_topic_created") if reply is not None else None
    return str(thread), created.opt_str("name") if created is not None else None


def reply_quote(msg: Obj) -> Content | None:
    quote = msg.opt_obj("quote")
    if quote is None:
        return None
    return to_content(quote.str_("text"), quote.objs("entities"))


def forward_info(msg: Obj) -> ForwardInfo | None:
    origin = msg.opt_obj("forward_origin")
    if origin is None:
        return _legacy_forward(msg)
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


def _legacy_forward(msg: Obj) -> ForwardInfo | None:
    """The ``forward_*`` fields updates carried before ``forward_origin`` (Bot API 7.0)."""
    if not msg.has("forward_date"):
        return None
    date = float(msg.int_("forward_date"))
    if msg.has("forward_from_chat"):
        chat = msg.obj("forward_from_chat")
        return ForwardInfo(
            from_name=msg.opt_str("forward_signature"),
            from_chat_id=str(chat.int_("id")),
            from_chat_title=chat.opt_str("title"),
            date_sec=date,
        )
    if msg.has("forward_from"):
        user = user_sender(msg.obj("forward_from"))
        return ForwardInfo(from_name=user.display_name, from_id=user.id, date_sec=date)
    return ForwardInfo(from_name=msg.opt_str("forward_sender_name"), date_sec=date)
