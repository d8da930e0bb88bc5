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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError

from larkbot.canonical.content import Attachment, Content
from larkbot.canonical.events import (
    BotAdded,
    BotRemoved,
    CanonicalEvent,
    ChatPhotoChanged,
    ChatRenamed,
    ChatType,
    EditEvent,
    MemberLeft,
    MembersJoined,
    MessageEvent,
    MessagePinned,
    ReactionEvent,
    Sender,
    ServiceAction,
    ServiceEvent,
)
from larkbot.canonical.names import Platform
from larkbot.canonical.text import replace_lone_surrogates

from .errors import MalformedUpdate, UnsupportedUpdate
from .message import (
    UNSUPPORTED_CONTENT,
    attachments,
    chat_sender,
    forward_info,
    message_content,
    message_sender,
    reply_quote,
    reply_target,
    user_sender,
)
from .payload import Obj

#: Update kinds the adapter consumes; the service asks for exactly these in ``allowed_updates``.
ALLOWED_UPDATES: Final = ("message", "edited_message", "message_reaction", "chat_member", "my_chat_member")

_CHAT_TYPES: Final = frozenset({"private", "group", "supergroup", "channel"})
_PRESENT: Final = frozenset({"creator", "administrator", "member"})
_GONE: Final = frozenset({"left", "kicked"})


@dataclass(frozen=True, slots=True)
class Adapted:
    """The outcome of one update: its events, or (when there are none) why it was dropped."""

    update_id: int
    events: tuple[CanonicalEvent, ...]
    dropped: str | None = None


class TelegramAdapter:
    """Stateful only for phantom-edit detection (a bounded LRU); otherwise a pure function of its input.

    ``bot_id``: the bot's user id (``None`` in replay without an identity); messages the bot itself sent
    are marked ``is_self_sent``. ``configured_chats``: the residency whitelist (``None`` accepts every
    chat). ``utc_offset_min``: stamped on every event.
    """

    def __init__(
        self,
        bot_id: str | None,
        configured_chats: frozenset[str] | None,
        utc_offset_min: int,
        *,
        fingerprint_capacity: int = 50_000,
    ) -> None:
        self.bot_id = bot_id
        self.configured_chats = configured_chats
        self.utc_offset_min = utc_offset_min
        self._capacity = fingerprint_capacity
        self._fingerprints: OrderedDict[tuple[str, str], int] = OrderedDict()

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
        chat_id = str(chat.int_("id"))
        if self.configured_chats is not None and chat_id not in self.configured_chats:
            return Adapted(update_id, (), "chat_not_configured")
        ctx = _Ctx(chat_id, _chat_type(chat), received_at_ms, self.utc_offset_min, str(update_id))
        if kind == "message":
            return Adapted(update_id, (self._message(ctx, body),))
        if kind == "edited_message":
            return self._edit(update_id, ctx, body)
        if kind == "message_reaction":
            events = _reactions(ctx, body)
            return Adapted(update_id, events, None if events else "reaction_unchanged")
        event = _member_change(ctx, body, is_bot=kind == "my_chat_member")
        if event is None:
            return Adapted(update_id, (), "membership_unchanged")
        return Adapted(update_id, (event,))

    def adapt_message(self, message: Mapping[str, Any], received_at_ms: int) -> MessageEvent:
        """A ``Message`` on its own (the result of ``sendMessage``), for the synthetic self-sent event."""
        body = Obj(message, "message")
        chat = body.obj("chat")
        ctx = _Ctx(str(chat.int_("id")), _chat_type(chat), received_at_ms, self.utc_offset_min, None)
        event = self._message(ctx, body)
        if not isinstance(event, MessageEvent):
            raise UnsupportedUpdate("a sent message that is a service message")
        return event

    def _message(self, ctx: _Ctx, msg: Obj) -> MessageEvent | ServiceEvent:
        message_id = str(msg.int_("message_id"))
        date = float(msg.int_("date"))
        action = _service_action(msg)
        if action is not None:
            return ServiceEvent(
                **ctx.fields(_member_key(ctx, msg, action) or f"{ctx.chat_id}:{message_id}", date),
                action=action,
            )
        for kind in UNSUPPORTED_CONTENT:
            if msg.has(kind):
                raise UnsupportedUpdate(f"message content {kind!r}")
        content, media = message_content(msg), attachments(msg)
        if not content.nodes and not media:
            keys = sorted(k[:32] for k in msg.raw if k not in _ENVELOPE)[:8]
            raise UnsupportedUpdate(f"message without text or media (fields {keys})")
        sender = message_sender(msg)
        self._remember(ctx.chat_id, message_id, content, media)
        return MessageEvent(
            **ctx.fields(f"{ctx.chat_id}:{message_id}", date),
            message_id=message_id,
            sender=sender,
            content=content,
            attachments=media,
            reply_to_message_id=reply_target(msg),
            reply_quote=reply_quote(msg),
            forward_info=forward_info(msg),
            is_self_sent=self.bot_id is not None and sender.id == self.bot_id,
        )

    def _edit(self, update_id: int, ctx: _Ctx, msg: Obj) -> Adapted:
        message_id = str(msg.int_("message_id"))
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


_ENVELOPE: Final = frozenset(
    {"message_id", "message_thread_id", "from", "sender_chat", "date", "chat", "is_topic_message",
     "reply_to_message", "quote", "forward_origin", "has_protected_content", "edit_date",
     "author_signature", "via_bot", "link_preview_options", "reply_markup", "entities", "caption_entities"}
)  # fmt: skip


def _state_digest(content: Content, media: tuple[Attachment, ...]) -> str:
    state = [content.model_dump(mode="json"), [m.model_dump(mode="json") for m in media]]
    data = json.dumps(state, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(data.encode()).hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class _Ctx:
    chat_id: str
    chat_type: ChatType | None
    received_at_ms: int
    utc_offset_min: int
    event_id: str | None

    def fields(self, dedup_key: str, timestamp_sec: float) -> dict[str, Any]:
        return {
            "platform": Platform.TELEGRAM,
            "chat_id": self.chat_id,
            "chat_type": self.chat_type,
            "dedup_key": dedup_key,
            "event_id": self.event_id,
            "received_at_ms": self.received_at_ms,
            "timestamp_sec": timestamp_sec,
            "utc_offset_min": self.utc_offset_min,
        }


def _chat_type(chat: Obj) -> ChatType | None:
    kind = chat.str_("type")
    if kind not in _CHAT_TYPES:
        raise MalformedUpdate(f"{chat.path}.type", "unknown chat type")
    return kind  # type: ignore[return-value]


def _actor(msg: Obj) -> Sender | None:
    return message_sender(msg) if msg.has("from") or msg.has("sender_chat") else None


def _service_action(msg: Obj) -> ServiceAction | None:
    if msg.has("new_chat_members"):
        members = tuple(user_sender(u) for u in msg.objs("new_chat_members"))
        if not members:
            raise MalformedUpdate(f"{msg.path}.new_chat_members", "empty array")
        actor = _actor(msg)
        self_join = actor is not None and [m.id for m in members] == [actor.id]
        return MembersJoined(actor=None if self_join else actor, members=members)
    if msg.has("left_chat_member"):
        member = user_sender(msg.obj("left_chat_member"))
        actor = _actor(msg)
        return MemberLeft(actor=None if actor is None or actor.id == member.id else actor, members=(member,))
    if msg.has("new_chat_title"):
        return ChatRenamed(actor=_actor(msg), to_title=msg.str_("new_chat_title"))
    if msg.has("new_chat_photo") or msg.bool_("delete_chat_photo"):
        return ChatPhotoChanged(actor=_actor(msg))
    if msg.has("pinned_message"):
        pinned = msg.obj("pinned_message")
        return MessagePinned(actor=_actor(msg), message_id=str(pinned.int_("message_id")))
    return None


def _member_key(ctx: _Ctx, msg: Obj, action: ServiceAction) -> str | None:
    if isinstance(action, MembersJoined | MemberLeft) and len(action.members) == 1:
        verb = "join" if isinstance(action, MembersJoined) else "leave"
        return f"{ctx.chat_id}:{verb}:{action.members[0].id}:{msg.int_('date')}"
    return None


def _reaction_emoji(reaction: Obj) -> str:
    kind = reaction.str_("type")
    if kind == "emoji":
        return reaction.str_("emoji")
    if kind == "custom_emoji":
        return f"custom_emoji:{reaction.str_('custom_emoji_id')}"
    if kind == "paid":
        return "paid"
    raise MalformedUpdate(f"{reaction.path}.type", "unknown reaction type")


def _reactions(ctx: _Ctx, body: Obj) -> tuple[CanonicalEvent, ...]:
    message_id = str(body.int_("message_id"))
    date = body.int_("date")
    user, actor_chat = body.opt_obj("user"), body.opt_obj("actor_chat")
    if user is not None:
        actor = user_sender(user)
    elif actor_chat is not None:
        actor = chat_sender(actor_chat)
    else:
        raise MalformedUpdate(body.path, "neither user nor actor_chat")
    old = [_reaction_emoji(r) for r in body.objs("old_reaction")]
    new = [_reaction_emoji(r) for r in body.objs("new_reaction")]
    changes = [(e, True) for e in old if e not in new] + [(e, False) for e in new if e not in old]
    return tuple(
        ReactionEvent(
            **ctx.fields(
                f"{ctx.chat_id}:{message_id}:reaction:{actor.id}:{date}:{'-' if removed else '+'}{emoji}",
                float(date),
            ),
            message_id=message_id,
            actor=actor,
            emoji=emoji,
            removed=removed,
        )
        for emoji, removed in changes
    )


def _is_member(member: Obj) -> bool:
    status = member.str_("status")
    if status == "restricted":
        return member.bool_("is_member")
    return status in _PRESENT


def _member_change(ctx: _Ctx, body: Obj, *, is_bot: bool) -> ServiceEvent | None:
    date = body.int_("date")
    old, new = body.obj("old_chat_member"), body.obj("new_chat_member")
    was, now = _is_member(old), _is_member(new)
    if was == now:
        return None
    actor = user_sender(body.obj("from"))
    if is_bot:
        action: ServiceAction = BotAdded(actor=actor) if now else BotRemoved(actor=actor)
        key = f"{ctx.chat_id}:bot:{date}:{old.str_('status')}>{new.str_('status')}"
        return ServiceEvent(**ctx.fields(key, float(date)), action=action)
    member = user_sender(new.obj("user"))
    by = None if actor.id == member.id else actor
    action = MembersJoined(actor=by, members=(member,)) if now else MemberLeft(actor=by, members=(member,))
    verb = "join" if now else "leave"
    return ServiceEvent(**ctx.fields(f"{ctx.chat_id}:{verb}:{member.id}:{date}", float(date)), action=action)
