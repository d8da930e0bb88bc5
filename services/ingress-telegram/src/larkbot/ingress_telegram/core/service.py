"""Telegram service messages → service actions, or a reason to drop them on purpose.

Every service field of the Bot API's ``Message`` is decided here (the table in docs/ingress-telegram.md
lists them): what a group member sees in the chat becomes an action — members, title, photo, pins and
forum topics have kinds of their own, the rest a :class:`ChatNotice` named after the field — and what
only exists in a private chat with the bot (shared users, web-app data, passport data…) is dropped: it
answers bot features LarkBot does not use (request buttons, web apps, Passport, login). The bot's own
arrival and departure are the ``my_chat_member`` update's to report (one ``bot_added``), so the service
message drops the bot from its member list.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

from larkbot.canonical.events import (
    ChatNotice,
    ChatPhotoChanged,
    ChatRenamed,
    MemberLeft,
    MembersJoined,
    MessagePinned,
    Sender,
    ServiceAction,
    TopicChanged,
)

from .errors import MalformedUpdate
from .message import quoted
from .payload import Obj
from .senders import message_sender, user_sender

#: Service fields that only occur in a private chat with the bot: dropped on purpose.
PRIVATE_ONLY: Final = frozenset(
    {"users_shared", "chat_shared", "user_shared", "write_access_allowed", "connected_website",
     "passport_data", "web_app_data", "managed_bot_created"}
)  # fmt: skip
#: Service fields that become a notice with nothing to say but that it happened (type = the field name,
#: or the name given here).
_BARE: Final = {
    "video_chat_started": "video_chat_started",
    "group_chat_created": "chat_created",
    "supergroup_chat_created": "chat_created",
    "channel_chat_created": "chat_created",
    "general_forum_topic_hidden": "general_topic_hidden",
    "general_forum_topic_unhidden": "general_topic_unhidden",
    "chat_background_set": "chat_background_changed",
    "community_chat_removed": "community_chat_removed",
    "suggested_post_approved": "suggested_post_approved",
    "suggested_post_approval_failed": "suggested_post_approval_failed",
    "suggested_post_declined": "suggested_post_declined",
    "suggested_post_paid": "suggested_post_paid",
    "suggested_post_refunded": "suggested_post_refunded",
}
_TOPIC: Final = {
    "forum_topic_created": "created",
    "forum_topic_edited": "edited",
    "forum_topic_closed": "closed",
    "forum_topic_reopened": "reopened",
}
#: The outcome of a service field: an action, or the reason it is dropped.
Outcome = ServiceAction | str


def _actor(msg: Obj) -> Sender | None:
    return message_sender(msg) if msg.has("from") or msg.has("sender_chat") else None


def service_outcome(msg: Obj, bot_id: str | None, message_id: Callable[[int], str]) -> Outcome | None:
    """The action (or drop reason) of a service message; ``None`` when ``msg`` is not one.
    ``message_id`` turns a Bot API message id of this chat into the canonical one."""
    if msg.has("new_chat_members"):
        return _joined(msg, bot_id)
    if msg.has("left_chat_member"):
        member = user_sender(msg.obj("left_chat_member"))
        if member.id == bot_id:
            return "bot_membership_from_my_chat_member"
        actor = _actor(msg)
        return MemberLeft(actor=None if actor is None or actor.id == member.id else actor, members=(member,))
    if msg.has("new_chat_title"):
        return ChatRenamed(actor=_actor(msg), to_title=msg.str_("new_chat_title"))
    if msg.has("new_chat_photo") or msg.bool_("delete_chat_photo"):
        return ChatPhotoChanged(actor=_actor(msg))
    if msg.has("pinned_message"):
        pinned = msg.obj("pinned_message")
        embedded = quoted(pinned) if pinned.opt_int("date") else None  # date 0: inaccessible
        return MessagePinned(
            actor=_actor(msg), message_id=message_id(pinned.int_("message_id")), pinned=embedded
        )
    for field, change in _TOPIC.items():
        if msg.has(field):
            topic = msg.obj(field)
            thread = msg.opt_int("message_thread_id") or msg.int_("message_id")
            return TopicChanged(
                change=change,
                actor=_actor(msg),
                thread_id=str(thread),
                name=topic.opt_str("name"),
            )
    if msg.has("migrate_from_chat_id"):
        return "migrated_from_group"  # the old group's migrate_to message tells it once
    for field in PRIVATE_ONLY:
        if msg.has(field):
            return f"private_chat_only:{field}"
    for field in _NOTICES:
        if msg.has(field):
            return _built(msg, field).model_copy(update={"actor": _actor(msg)})
    for field, kind in _BARE.items():
        if msg.has(field) and msg.raw[field] is not False:
            return ChatNotice(type=kind, actor=_actor(msg))
    return None


def _joined(msg: Obj, bot_id: str | None) -> Outcome:
    everyone = tuple(user_sender(u) for u in msg.objs("new_chat_members"))
    if not everyone:
        raise MalformedUpdate(f"{msg.path}.new_chat_members", "empty array")
    members = tuple(m for m in everyone if m.id != bot_id)
    if not members:
        return "bot_membership_from_my_chat_member"
    actor = _actor(msg)
    self_join = actor is not None and [m.id for m in members] == [actor.id]
    return MembersJoined(actor=None if self_join else actor, members=members)


def _duration(seconds: int) -> str:
    hours, rest = divmod(max(seconds, 0), 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h"] if hours else []
    if minutes:
        parts.append(f"{minutes}m")
    if secs or not parts:
        parts.append(f"{secs}s")
    return " ".join(parts)


def _utc(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _name(user: Obj) -> str:
    return user_sender(user).display_name


def _notice(type_: str, *attributes: tuple[str, str], **fields: object) -> ChatNotice:
    return ChatNotice.model_validate({"type": type_, "attributes": attributes, **fields})


def _checklist_tasks(body: Obj, field: str) -> ChatNotice:
    if field == "checklist_tasks_added":
        return _notice(field, ("tasks", "; ".join(task.str_("text") for task in body.objs("tasks"))))
    checklist = body.opt_obj("checklist_message")
    known: dict[int, str] = {}
    if checklist is not None and checklist.has("checklist"):
        known = {t.int_("id"): t.str_("text") for t in checklist.obj("checklist").objs("tasks")}
    attributes: list[tuple[str, str]] = []
    for key, name in (("marked_as_done_task_ids", "done"), ("marked_as_not_done_task_ids", "not_done")):
        ids = [i for i in body.raw.get(key) or () if isinstance(i, int)]
        if ids:
            attributes.append((name, "; ".join(known.get(i, f"#{i}") for i in ids)))
    return _notice(field, *attributes)


def _built(msg: Obj, field: str) -> ChatNotice:
    if field == "migrate_to_chat_id":
        return _notice("migrated_to_supergroup")
    body = msg.obj(field)
    if field == "video_chat_scheduled":
        return _notice(field, ("start", _utc(body.int_("start_date"))))
    if field == "video_chat_ended":
        return _notice(field, ("duration", _duration(body.int_("duration"))))
    if field == "video_chat_participants_invited":
        return _notice(field, members=tuple(user_sender(u) for u in body.objs("users")))
    if field == "message_auto_delete_timer_changed":
        seconds = body.int_("message_auto_delete_time")
        return _notice("auto_delete_timer_changed", ("after", _duration(seconds) if seconds else "off"))
    if field == "boost_added":
        return _notice("chat_boosted", ("boosts", str(body.int_("boost_count"))))
    if field in ("chat_owner_left", "chat_owner_changed"):
        owner = body.opt_obj("new_owner")
        kind = "owner_left" if field == "chat_owner_left" else "owner_changed"
        return _notice(kind, *((("new_owner", _name(owner)),) if owner is not None else ()))
    if field == "proximity_alert_triggered":
        return _notice(
            "proximity_alert",
            ("traveler", _name(body.obj("traveler"))),
            ("watcher", _name(body.obj("watcher"))),
            ("distance", f"{body.int_('distance')} m"),
        )
    if field in ("poll_option_added", "poll_option_deleted"):
        return _notice(field, ("option", body.str_("option_text")))
    if field == "paid_message_price_changed":
        return _notice(field, ("stars", str(body.int_("paid_message_star_count"))))
    if field == "direct_message_price_changed":
        enabled = body.bool_("are_direct_messages_enabled")
        return _notice(
            field, ("stars", str(body.opt_int("direct_message_star_count") or 0) if enabled else "off")
        )
    if field == "giveaway_created":
        stars = body.opt_int("prize_star_count")
        return _notice(field, *((("stars", str(stars)),) if stars else ()))
    if field == "giveaway_completed":
        return _notice(field, ("winners", str(body.int_("winner_count"))))
    if field in ("community_chat_added", "community_chat_joined"):
        return _notice(field, ("community", body.obj("community").str_("name")))
    if field in ("gift", "gift_upgrade_sent"):
        stars = body.obj("gift").int_("star_count")
        return _notice(field, ("stars", str(stars)), text=body.opt_str("text"))
    if field == "unique_gift":
        gift = body.obj("gift")
        return _notice(field, ("gift", f"{gift.str_('base_name')} #{gift.int_('number')}"))
    if field in ("successful_payment", "refunded_payment"):
        amount = f"{body.int_('total_amount')} {body.opt_str('currency') or 'XTR'}"
        return _notice("payment" if field == "successful_payment" else "payment_refunded", ("amount", amount))
    return _checklist_tasks(body, field)


#: Service fields that become a notice saying more than that it happened (see :func:`_built`).
_NOTICES: Final = (
    "migrate_to_chat_id",
    "video_chat_scheduled",
    "video_chat_ended",
    "video_chat_participants_invited",
    "message_auto_delete_timer_changed",
    "boost_added",
    "chat_owner_left",
    "chat_owner_changed",
    "proximity_alert_triggered",
    "poll_option_added",
    "poll_option_deleted",
    "paid_message_price_changed",
    "direct_message_price_changed",
    "giveaway_created",
    "giveaway_completed",
    "community_chat_added",
    "community_chat_joined",
    "gift",
    "gift_upgrade_sent",
    "unique_gift",
    "successful_payment",
    "refunded_payment",
    "checklist_tasks_done",
    "checklist_tasks_added",
)
