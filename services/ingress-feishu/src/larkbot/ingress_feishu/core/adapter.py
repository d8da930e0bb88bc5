"""Raw Feishu event envelope (schema 2.0) → canonical events: the pure adapter, live and in replay.

``FeishuAdapter.adapt(payload, received_at_ms, names)`` returns one of:

- :class:`Adapted` — the canonical events to publish (usually one; a chat update that both renames the
  chat and changes its photo gives two);
- :class:`Dropped` — a well-formed event that is not projected (private chat, unconfigured group, or an
  event with no canonical form); it is acknowledged and not archived;
- :class:`NeedsChat` — a reaction on a message this adapter has not seen: reaction events carry no chat
  id, so the caller looks the message up (message GET API), calls :meth:`FeishuAdapter.remember` and adapts
  the same payload again.

A payload that is not a schema-2.0 envelope or misses a field raises :class:`MalformedPayload`; an event
type we do not adapt raises :class:`UnknownEventType` — both are dead-lettered by the caller.

Decisions:

- Dedup keys per action (stable across Feishu's re-pushes, which repeat the payload): the message id;
  ``recall:<message_id>``; ``reaction:<message_id>:<emoji_type>:<open_id>:<created|deleted>`` (the raw
  Feishu emoji type, so the key does not depend on our emoji table); the envelope's ``event_id`` for
  member, bot and chat-update events (``<event_id>:photo`` for the second event of a chat update).
  Consequence: adding, removing and re-adding the same reaction makes the second add a duplicate.
- ``timestamp_sec`` is Feishu's time of the action (message ``create_time``, ``recall_time``,
  ``action_time``; the envelope's ``create_time`` for member and chat events), in seconds;
  ``received_at_ms`` is the caller's arrival time, captured before any await.
- The message → chat memory is filled from every message seen (also dropped ones, so a reaction in an
  unconfigured chat is dropped without an API call) and from the bot's own sends (:meth:`remember`). It
  keeps the last ``memory_size`` messages.
- Sender names come from ``names`` (the contact-name cache); without one the open_id is the name.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError

from larkbot.canonical.events import (
    BotAdded,
    BotRemoved,
    ChatPhotoChanged,
    ChatRenamed,
    DeleteEvent,
    MemberLeft,
    MembersJoined,
    MessageEvent,
    ReactionEvent,
    Sender,
    ServiceAction,
    ServiceEvent,
)
from larkbot.canonical.names import Platform
from larkbot.canonical.text import replace_lone_surrogates

from . import emoji
from .content import MentionRef, parse_content
from .errors import MalformedPayload, UnknownEventType
from .fields import Fields

FeishuEvent = MessageEvent | DeleteEvent | ReactionEvent | ServiceEvent

MESSAGE_RECEIVE: Final = "im.message.receive_v1"
MESSAGE_RECALLED: Final = "im.message.recalled_v1"
REACTION_CREATED: Final = "im.message.reaction.created_v1"
REACTION_DELETED: Final = "im.message.reaction.deleted_v1"
USER_ADDED: Final = "im.chat.member.user.added_v1"
USER_DELETED: Final = "im.chat.member.user.deleted_v1"
USER_WITHDRAWN: Final = "im.chat.member.user.withdrawn_v1"
BOT_ADDED: Final = "im.chat.member.bot.added_v1"
BOT_DELETED: Final = "im.chat.member.bot.deleted_v1"
CHAT_UPDATED: Final = "im.chat.updated_v1"
CHAT_DISBANDED: Final = "im.chat.disbanded_v1"

#: Every event type the service subscribes to (and registers a handler for).
EVENT_TYPES: Final = (
    MESSAGE_RECEIVE,
    MESSAGE_RECALLED,
    REACTION_CREATED,
    REACTION_DELETED,
    USER_ADDED,
    USER_DELETED,
    USER_WITHDRAWN,
    BOT_ADDED,
    BOT_DELETED,
    CHAT_UPDATED,
    CHAT_DISBANDED,
)


@dataclass(frozen=True, slots=True)
class Adapted:
    event_type: str
    event_id: str
    events: tuple[FeishuEvent, ...]
    #: open_ids of the people in the events, for the name cache to look up.
    user_ids: tuple[str, ...] = ()
    #: (open_id, name) pairs the payload itself disclosed (mentions, member lists).
    seen_names: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Dropped:
    event_type: str
    event_id: str
    #: ``private_chat`` | ``unconfigured_chat`` | ``no_canonical_form``
    reason: str
    chat_id: str | None = None


@dataclass(frozen=True, slots=True)
class NeedsChat:
    event_type: str
    event_id: str
    message_id: str


AdaptResult = Adapted | Dropped | NeedsChat


@dataclass(frozen=True, slots=True)
class _Envelope:
    event_type: str
    event_id: str
    create_ms: int
    event: Fields
    received_at_ms: int
    names: Mapping[str, str]


class FeishuAdapter:
    """The pure adapter; one instance per process (it holds the message → chat memory)."""

    def __init__(
        self,
        bot_open_id: str | None,
        configured_chats: frozenset[str] | None,
        utc_offset_min: int,
        *,
        bot_app_id: str | None = None,
        memory_size: int = 100_000,
    ) -> None:
        """``configured_chats=None`` accepts every group (replay of an archive); private chats are
        always dropped."""
        self.bot_open_id = bot_open_id
        self.bot_app_id = bot_app_id
        self.configured_chats = configured_chats
        self.utc_offset_min = utc_offset_min
        self.memory_size = memory_size
        # message_id → (chat_id, is_private)
        self._chats: OrderedDict[str, tuple[str, bool]] = OrderedDict()
        self._handlers: dict[str, Callable[[_Envelope], AdaptResult]] = {
            MESSAGE_RECEIVE: self._message,
            MESSAGE_RECALLED: self._recalled,
            REACTION_CREATED: self._reaction,
            REACTION_DELETED: self._reaction,
            USER_ADDED: self._members,
            USER_DELETED: self._members,
            USER_WITHDRAWN: self._members,
            BOT_ADDED: self._bot,
            BOT_DELETED: self._bot,
            CHAT_UPDATED: self._chat_updated,
            CHAT_DISBANDED: self._no_form,
        }

    # -- memory ----------------------------------------------------------------------------------------
    def remember(self, message_id: str, chat_id: str, *, private: bool = False) -> None:
        self._chats[message_id] = (chat_id, private)
        self._chats.move_to_end(message_id)
        while len(self._chats) > self.memory_size:
            self._chats.popitem(last=False)

    def chat_of(self, message_id: str) -> str | None:
        found = self._chats.get(message_id)
        return found[0] if found else None

    # -- entry point -----------------------------------------------------------------------------------
    def adapt(
        self, payload: Mapping[str, Any], received_at_ms: int, names: Mapping[str, str] | None = None
    ) -> AdaptResult:
        try:
            result = self._adapt(replace_lone_surrogates(payload), received_at_ms, names)
        except ValidationError as exc:
            # A value the envelope allows but the canonical contract does not (a negative time, an
            # empty id): the event cannot be represented — a malformed payload, never a crash.
            err = exc.errors(include_url=False, include_input=False)[0]
            where = ".".join(str(p) for p in err["loc"]) or exc.title
            raise MalformedPayload(f"canonical {exc.title}.{where}: {err['msg']}") from None
        if isinstance(result, Adapted):
            for event in result.events:
                _check_id_lengths(event)
        return result

    def _adapt(
        self, payload: Mapping[str, Any], received_at_ms: int, names: Mapping[str, str] | None
    ) -> AdaptResult:
        env = Fields(payload, "$")
        if env.data.get("schema") != "2.0":
            raise MalformedPayload("$.schema: not a schema 2.0 event envelope")
        header = env.obj("header")
        event_type = header.req("event_type")
        handler = self._handlers.get(event_type)
        if handler is None:
            raise UnknownEventType(f"event type {event_type!r} is not adapted", event_type=event_type)
        header.event_type = event_type
        envelope = _Envelope(
            event_type=event_type,
            event_id=header.req("event_id"),
            create_ms=header.millis("create_time"),
            event=Fields(env.data.get("event"), "$.event", event_type),
            received_at_ms=received_at_ms,
            names=names or {},
        )
        return handler(envelope)

    # -- helpers ---------------------------------------------------------------------------------------
    def _gate(self, env: _Envelope, chat_id: str, private: bool) -> Dropped | None:
        if private:
            return Dropped(env.event_type, env.event_id, "private_chat", chat_id)
        if self.configured_chats is not None and chat_id not in self.configured_chats:
            return Dropped(env.event_type, env.event_id, "unconfigured_chat", chat_id)
        return None

    def _common(self, env: _Envelope, chat_id: str, dedup_key: str, at_ms: int) -> dict[str, Any]:
        return {
            "platform": Platform.FEISHU,
            "chat_id": chat_id,
            "dedup_key": dedup_key,
            "event_id": env.event_id,
            "chat_type": "group",
            "received_at_ms": env.received_at_ms,
            "timestamp_sec": at_ms / 1000,
            "utc_offset_min": self.utc_offset_min,
        }

    def _person(self, env: _Envelope, open_id: str, name: str | None = None) -> Sender:
        known = env.names.get(open_id) or name or open_id
        return Sender(id=open_id, display_name=known, is_bot=open_id == self.bot_open_id)

    def _operator(self, env: _Envelope) -> Sender | None:
        operator = env.event.opt_obj("operator_id")
        open_id = operator.opt("open_id") if operator else None
        return self._person(env, open_id) if open_id else None

    # -- event kinds -----------------------------------------------------------------------------------
    def _message(self, env: _Envelope) -> AdaptResult:
        message = env.event.obj("message")
        message_id = message.req("message_id")
        chat_id = message.req("chat_id")
        private = message.req("chat_type") == "p2p"
        self.remember(message_id, chat_id, private=private)
        if dropped := self._gate(env, chat_id, private):
            return dropped
        sender = env.event.obj("sender")
        sender_id = sender.obj("sender_id")
        open_id = sender_id.opt("open_id")
        if open_id is None:
            raise MalformedPayload("$.event.sender.sender_id.open_id: missing", event_type=env.event_type)
        mentions: dict[str, MentionRef] = {}
        seen: list[tuple[str, str]] = []
        for i, raw in enumerate(message.array("mentions")):
            item = Fields(raw, f"$.event.message.mentions.{i}", env.event_type)
            ids = item.opt_obj("id")
            mentioned = ids.opt("open_id") if ids else None
            name = item.opt("name") or mentioned or item.req("key")
            mentions[item.req("key")] = MentionRef(mentioned, name)
            if mentioned and item.opt("name"):
                seen.append((mentioned, name))
        message_type = message.req("message_type")
        content, attachments = parse_content(
            message_type, message.req("content"), mentions, "$.event.message.content", env.event_type
        )
        author = self._person(env, open_id)
        if sender.opt("sender_type") == "app":
            author = author.model_copy(update={"is_bot": True})
        event = MessageEvent(
            **self._common(env, chat_id, message_id, message.millis("create_time")),
            message_id=message_id,
            sender=author,
            content=content,
            attachments=attachments,
            reply_to_message_id=message.opt("parent_id"),
        )
        return Adapted(env.event_type, env.event_id, (event,), (open_id,), tuple(seen))

    def _recalled(self, env: _Envelope) -> AdaptResult:
        message_id = env.event.req("message_id")
        chat_id = env.event.req("chat_id")
        known = self._chats.get(message_id)
        if dropped := self._gate(env, chat_id, bool(known and known[1])):
            return dropped
        event = DeleteEvent(
            **self._common(env, chat_id, f"recall:{message_id}", env.event.millis("recall_time")),
            message_ids=(message_id,),
        )
        return Adapted(env.event_type, env.event_id, (event,))

    def _reaction(self, env: _Envelope) -> AdaptResult:
        message_id = env.event.req("message_id")
        known = self._chats.get(message_id)
        if known is None:
            return NeedsChat(env.event_type, env.event_id, message_id)
        chat_id, private = known
        if dropped := self._gate(env, chat_id, private):
            return dropped
        emoji_type = env.event.obj("reaction_type").req("emoji_type")
        if env.event.opt("operator_type") == "app":
            app_id = env.event.req("app_id")
            own = self.bot_open_id is not None and app_id == self.bot_app_id
            actor_id = self.bot_open_id if own and self.bot_open_id else app_id
            actor = Sender(id=actor_id, display_name=env.names.get(actor_id, actor_id), is_bot=True)
        else:
            open_id = env.event.obj("user_id").req("open_id")
            actor = self._person(env, open_id)
        removed = env.event_type == REACTION_DELETED
        action = "deleted" if removed else "created"
        event = ReactionEvent(
            **self._common(
                env,
                chat_id,
                f"reaction:{message_id}:{emoji_type}:{actor.id}:{action}",
                env.event.millis("action_time"),
            ),
            message_id=message_id,
            actor=actor,
            emoji=emoji.to_canonical(emoji_type),
            removed=removed,
        )
        return Adapted(env.event_type, env.event_id, (event,), (actor.id,))

    def _members(self, env: _Envelope) -> AdaptResult:
        chat_id = env.event.req("chat_id")
        if dropped := self._gate(env, chat_id, False):
            return dropped
        members: list[Sender] = []
        seen: list[tuple[str, str]] = []
        for i, raw in enumerate(env.event.array("users")):
            user = Fields(raw, f"$.event.users.{i}", env.event_type)
            open_id = user.obj("user_id").req("open_id")
            name = user.opt("name")
            members.append(self._person(env, open_id, name))
            if name:
                seen.append((open_id, name))
        if not members:
            raise MalformedPayload("$.event.users: empty", event_type=env.event_type)
        actor = self._operator(env)
        if actor is not None and {m.id for m in members} == {actor.id}:
            actor = None  # joined or left by themselves
        action: ServiceAction
        if env.event_type == USER_ADDED:
            action = MembersJoined(actor=actor, members=tuple(members))
        else:
            action = MemberLeft(actor=actor, members=tuple(members))
        event = ServiceEvent(**self._common(env, chat_id, env.event_id, env.create_ms), action=action)
        ids = tuple(m.id for m in members) + ((actor.id,) if actor else ())
        return Adapted(env.event_type, env.event_id, (event,), ids, tuple(seen))

    def _bot(self, env: _Envelope) -> AdaptResult:
        chat_id = env.event.req("chat_id")
        if dropped := self._gate(env, chat_id, False):
            return dropped
        actor = self._operator(env)
        action = BotAdded(actor=actor) if env.event_type == BOT_ADDED else BotRemoved(actor=actor)
        event = ServiceEvent(**self._common(env, chat_id, env.event_id, env.create_ms), action=action)
        return Adapted(env.event_type, env.event_id, (event,), (actor.id,) if actor else ())

    def _chat_updated(self, env: _Envelope) -> AdaptResult:
        chat_id = env.event.req("chat_id")
        if dropped := self._gate(env, chat_id, False):
            return dropped
        after = env.event.opt_obj("after_change")
        before = env.event.opt_obj("before_change")
        actor = self._operator(env)
        actions: list[ServiceAction] = []
        new_name = after.opt("name") if after else None
        if new_name is not None:
            old_name = before.opt("name") if before else None
            if old_name != new_name:
                actions.append(ChatRenamed(actor=actor, from_title=old_name, to_title=new_name))
        if after is not None and after.opt("avatar") is not None:
            actions.append(ChatPhotoChanged(actor=actor))
        if not actions:
            return Dropped(env.event_type, env.event_id, "no_canonical_form", chat_id)
        events = tuple(
            ServiceEvent(
                **self._common(
                    env, chat_id, env.event_id if i == 0 else f"{env.event_id}:photo", env.create_ms
                ),
                action=action,
            )
            for i, action in enumerate(actions)
        )
        return Adapted(env.event_type, env.event_id, events, (actor.id,) if actor else ())

    def _no_form(self, env: _Envelope) -> AdaptResult:
        chat = env.event.opt("chat_id")
        return Dropped(env.event_type, env.event_id, "no_canonical_form", chat)


#: Bounds of the ids we store (the pipeline's ``events`` columns) and send as NATS headers (64 KiB in all).
MAX_ID_CHARS: Final = 128
MAX_DEDUP_KEY_CHARS: Final = 512


def _check_id_lengths(event: FeishuEvent) -> None:
    ids = {"chat_id": event.chat_id, "message_id": getattr(event, "message_id", None) or ""}
    for name, value in ids.items():
        if len(value) > MAX_ID_CHARS:
            raise MalformedPayload(f"{name}: longer than {MAX_ID_CHARS} characters")
    if len(event.dedup_key) > MAX_DEDUP_KEY_CHARS:
        raise MalformedPayload(f"dedup key: longer than {MAX_DEDUP_KEY_CHARS} characters")
