"""Who a Telegram message or event is from: a user, or a chat speaking as itself."""

from __future__ import annotations

from larkbot.canonical.events import Sender

from .payload import Obj


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
