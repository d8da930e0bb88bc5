"""Raw Bot API ``Update`` → canonical events: the pure entry point shared by the service and replay.

One update gives zero or more events (a reaction update may add one emoji and remove another) or a
drop reason; a payload that cannot be adapted raises :class:`MalformedUpdate` or
:class:`UnsupportedUpdate` (dead-lettered by the caller).

Dedup keys (stable across redeliveries, never the ``update_id``; each starts with the chat id because
Telegram message ids are per chat while the ``Nats-Msg-Id`` window spans the stream):

================================  ===========================================================
message (and service message)     ``<chat>:<message_id>``
edit                              ``<chat>:<message_id>:edit:<edit_date>:<state digest>``
reaction                          ``<chat>:<message_id>:reaction:<actor>:<date>:<+|-><emoji>``
one member joined / left          ``<chat>:join:<user>:<date>`` / ``<chat>:leave:<user>:<date>``
bot added / removed               ``<chat>:bot:<date>:<old status>><new status>``
================================  ===========================================================

``edit_date`` has a resolution of one second and a bot streaming its answer edits several times a second:
the digest of the new state (content and attachments, 12 hex digits of SHA-256) tells those edits apart,
while a redelivered edit carries the same state, hence the same key.

A forum-topic message records its topic (``thread_id``; the name when the update carries the topic's
creation message). Service messages are decided in :mod:`.service`, message kinds without text in
:mod:`.placeholders`; a group upgraded to a supergroup continues under its own id (:mod:`.memory`), and
updates the old group still sends after the upgrade are dropped.

A single member joining or leaving is reported twice by Telegram in groups where the bot is an admin:
as a service message and as a ``chat_member`` update, at the same ``date``. Both produce the same
member key, so the pipeline's unique key keeps one. (Several members added by one service message keep
the message key and are not collapsed.)

Phantom edits — ``edited_message`` updates whose text and media equal what the adapter last saw for
that message (Telegram sends them when a link preview is attached, for instance) — are dropped. That
needs memory of the last state, so the adapter holds a bounded LRU of content fingerprints; updates of a
chat must be adapted in order, which both the service and replay do. An edit without ``edit_date`` is not
a user edit and is dropped too.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError

from larkbot.canonical.content import Attachment, Content
from larkbot.canonical.events import (
    CanonicalEvent,
    EditEvent,
    MemberLeft,
    MembersJoined,
    MessageEvent,
    ServiceAction,
    ServiceEvent,
)
from larkbot.canonical.text import replace_lone_surrogates

from .changes import member_change, reactions
from .context import UpdateContext, chat_type
from .errors import MalformedUpdate, UnsupportedUpdate
from .memory import Migrations, Threads
from .message import (
    attachments,
    forward_info,
    message_content,
    quoted,
    reply_quote,
    reply_to,
    topic,
)
from .payload import Obj
from .senders import message_sender
from .service import service_outcome

#: Update kinds the adapter consumes; the service asks for exactly these in ``allowed_updates``.
ALLOWED_UPDATES: Final = ("message", "edited_message", "message_reaction", "chat_member", "my_chat_member")


@dataclass(frozen=True, slots=True)
class Adapted:
    """The outcome of one update: its events, or (when there are none) why it was dropped.
    ``migration`` is a group → supergroup upgrade this update taught the adapter (to be stored)."""

    update_id: int
    events: tuple[CanonicalEvent, ...]
    dropped: str | None = None
    migration: tuple[str, str] | None = None


class TelegramAdapter:
    """Stateful for phantom-edit detection, upgrades and recent topics (:mod:`.memory`); otherwise a pure
    function of its input.

    ``bot_id``: the bot's user id (``None`` in replay without an identity); messages the bot itself sent
    are marked ``is_self_sent``. ``configured_chats``: the residency whitelist (``None`` accepts every
    chat). ``utc_offset_min``: stamped on every event. ``migrations``: upgrades known from earlier runs
    (group id, supergroup id).
    """

    def __init__(
        self,
        bot_id: str | None,
        configured_chats: frozenset[str] | None,
        utc_offset_min: int,
        *,
        fingerprint_capacity: int = 50_000,
        migrations: Iterable[tuple[str, str]] = (),
    ) -> None:
        self.bot_id = bot_id
        self.configured_chats = configured_chats
        self.utc_offset_min = utc_offset_min
        self._capacity = fingerprint_capacity
        self._fingerprints: OrderedDict[tuple[str, str], int] = OrderedDict()
        self.migrations = Migrations(migrations)
        self.threads = Threads(fingerprint_capacity)

    def adapt(self, update: Mapping[str, Any], received_at_ms: int) -> Adapted:
        try:
            return self._adapt(replace_lone_surrogates(update), received_at_ms)
        except ValidationError as exc:
            # A value the Bot API schema allows but the canonical contract does not (an empty emoji, a
            # negative size): the update cannot be represented, which is a malformed payload for us.
            err = exc.errors(include_url=False, include_input=False)[0]
            where = ".".join(str(p) for p in err["loc"]) or type(exc).__name__
            raise MalformedUpdate(f"canonical {exc.title}.{where}", err["msg"]) from None

    def _adapt(self, update: Mapping[str, Any], received_at_ms: int) -> Adapted:
        root = Obj(update, "")
        update_id = root.int_("update_id")
        kinds = [k for k in update if k != "update_id" and update[k] is not None]
        if len(kinds) != 1:
            if not kinds:
                raise MalformedUpdate("update", "no update kind present")
            raise MalformedUpdate("update", f"{len(kinds)} update kinds in one update")
        kind = kinds[0]
        if kind not in ALLOWED_UPDATES:
            raise UnsupportedUpdate(f"update kind {kind[:64]!r}")
        body = root.obj(kind)
        chat = body.obj("chat")
        platform_chat = str(chat.int_("id"))
        learnt = self._learn(platform_chat, body) if kind == "message" else None
        if platform_chat in self.migrations.supergroup_of and not body.has("migrate_to_chat_id"):
            return Adapted(update_id, (), "chat_migrated", learnt)  # the group lives on as the supergroup
        ctx = self._context(chat, received_at_ms, str(update_id))
        if self.configured_chats is not None and ctx.chat_id not in self.configured_chats:
            return Adapted(update_id, (), "chat_not_configured", learnt)
        if kind == "message":
            event = self._message(ctx, body, chat)
            if isinstance(event, str):
                return Adapted(update_id, (), event, learnt)
            return Adapted(update_id, (event,), None, learnt)
        if kind == "edited_message":
            return self._edit(update_id, ctx, body)
        if kind == "message_reaction":
            events = reactions(ctx, body)
            return Adapted(update_id, events, None if events else "reaction_unchanged")
        change = member_change(ctx, body, is_bot=kind == "my_chat_member")
        if change is None:
            return Adapted(update_id, (), "membership_unchanged")
        return Adapted(update_id, (change,))

    def _learn(self, platform_chat: str, msg: Obj) -> tuple[str, str] | None:
        """The upgrade a ``migrate_to_chat_id`` / ``migrate_from_chat_id`` message announces, when new."""
        if msg.has("migrate_to_chat_id"):
            pair = (platform_chat, str(msg.int_("migrate_to_chat_id")))
        elif msg.has("migrate_from_chat_id"):
            pair = (str(msg.int_("migrate_from_chat_id")), platform_chat)
        else:
            return None
        return pair if self.migrations.learn(*pair) else None

    def _context(self, chat: Obj, received_at_ms: int, event_id: str | None) -> UpdateContext:
        platform_chat = str(chat.int_("id"))
        group = self.migrations.recorded_as(platform_chat, self.configured_chats)
        return UpdateContext(
            chat_id=group or platform_chat,
            chat_type=chat_type(chat),
            received_at_ms=received_at_ms,
            utc_offset_min=self.utc_offset_min,
            event_id=event_id,
            id_prefix="s" if group is not None else "",
        )

    def adapt_message(self, message: Mapping[str, Any], received_at_ms: int) -> MessageEvent:
        """A ``Message`` on its own (the result of ``sendMessage``), for the synthetic self-sent event."""
        body = Obj(message, "message")
        chat = body.obj("chat")
        event = self._message(self._context(chat, received_at_ms, None), body, chat)
        if not isinstance(event, MessageEvent):
            raise UnsupportedUpdate("a sent message that is a service message")
        return event

    def _message(self, ctx: UpdateContext, msg: Obj, chat: Obj) -> MessageEvent | ServiceEvent | str:
        message_id = ctx.message_id(msg.int_("message_id"))
        date = float(msg.int_("date"))
        outcome = service_outcome(msg, self.bot_id, ctx.message_id)
        if isinstance(outcome, str):
            return outcome
        if outcome is not None:
            key = _member_key(ctx, msg, outcome) or f"{ctx.chat_id}:{message_id}"
            return ServiceEvent(**ctx.fields(key, date), action=outcome)
        content, media = message_content(msg), attachments(msg)
        if not content.nodes and not media:
            keys = sorted(k[:32] for k in msg.raw if k not in _ENVELOPE)[:8]
            raise UnsupportedUpdate(f"message without text or media (fields {keys})")
        sender = message_sender(msg)
        is_self = self.bot_id is not None and sender.id == self.bot_id
        self._remember(ctx.chat_id, message_id, content, media)
        thread, thread_name = topic(msg)
        if chat.bool_("is_forum"):
            self.threads.seen(ctx.chat_id, message_id, thread, from_others=not is_self)
        target = reply_to(msg)
        return MessageEvent(
            **ctx.fields(f"{ctx.chat_id}:{message_id}", date),
            message_id=message_id,
            sender=sender,
            content=content,
            attachments=media,
            reply_to_message_id=ctx.message_id(target.int_("message_id")) if target is not None else None,
            reply_quote=reply_quote(msg),
            reply_target=quoted(target) if target is not None else None,
            forward_info=forward_info(msg),
            thread_id=thread,
            thread_name=thread_name,
            is_self_sent=is_self,
        )

    def _edit(self, update_id: int, ctx: UpdateContext, msg: Obj) -> Adapted:
        message_id = ctx.message_id(msg.int_("message_id"))
        edit_date = msg.opt_int("edit_date")
        if edit_date is None:
            return Adapted(update_id, (), "edit_without_date")
        content, media = message_content(msg), attachments(msg)
        if self._remember(ctx.chat_id, message_id, content, media):
            return Adapted(update_id, (), "phantom_edit")
        key = f"{ctx.chat_id}:{message_id}:edit:{edit_date}:{_state_digest(content, media)}"
        event = EditEvent(
            **ctx.fields(key, float(edit_date)),
            message_id=message_id,
            sender=message_sender(msg),
            content=content,
            attachments=media,
            edited_at_sec=float(edit_date),
            sent_at_sec=float(msg.int_("date")),
        )
        return Adapted(update_id, (event,))

    def _remember(self, chat_id: str, message_id: str, content: object, media: object) -> bool:
        """Record the message's state; true when it equals the state seen last."""
        key = (chat_id, message_id)
        fingerprint = hash((content, media))
        same = self._fingerprints.get(key) == fingerprint
        self._fingerprints[key] = fingerprint
        self._fingerprints.move_to_end(key)
        while len(self._fingerprints) > self._capacity:
            self._fingerprints.popitem(last=False)
        return same


#: Fields of a message that are neither its content nor a service kind (named in a refusal otherwise).
_ENVELOPE: Final = frozenset(
    {"message_id", "message_thread_id", "from", "sender_chat", "date", "chat", "is_topic_message",
     "reply_to_message", "quote", "forward_origin", "has_protected_content", "edit_date",
     "author_signature", "via_bot", "link_preview_options", "reply_markup", "entities", "caption_entities",
     "direct_messages_topic", "sender_boost_count", "sender_business_bot", "sender_tag", "guest_query_id",
     "business_connection_id", "is_automatic_forward", "external_reply", "reply_to_story",
     "reply_to_checklist_task_id", "reply_to_poll_option_id", "guest_bot_caller_user",
     "guest_bot_caller_chat", "is_from_offline", "is_paid_post", "media_group_id", "paid_star_count",
     "suggested_post_info", "effect_id", "show_caption_above_media", "has_media_spoiler", "receiver_user",
     "ephemeral_message_id", "forward_date", "forward_from", "forward_from_chat", "forward_from_message_id",
     "forward_sender_name", "forward_signature"}
)  # fmt: skip


def _state_digest(content: Content, media: tuple[Attachment, ...]) -> str:
    state = [content.model_dump(mode="json"), [m.model_dump(mode="json") for m in media]]
    data = json.dumps(state, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(data.encode()).hexdigest()[:12]


def _member_key(ctx: UpdateContext, msg: Obj, action: ServiceAction) -> str | None:
    if isinstance(action, MembersJoined | MemberLeft) and len(action.members) == 1:
        verb = "join" if isinstance(action, MembersJoined) else "leave"
        return f"{ctx.chat_id}:{verb}:{action.members[0].id}:{msg.int_('date')}"
    return None
