"""The Feishu event envelope (schema 2.0) and what adapting one yields; the adapter's shared base.

Event types, the results of :meth:`AdapterBase.adapt` (:class:`Adapted`, :class:`Dropped`,
:class:`NeedsChat`), the message → chat memory, and the helpers every event kind uses (residency gate,
common event fields, people). The per-type handlers are in :mod:`.adapter`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError

from larkbot.canonical.events import DeleteEvent, MessageEvent, ReactionEvent, Sender, ServiceEvent
from larkbot.canonical.names import Platform
from larkbot.canonical.text import replace_lone_surrogates

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
    #: chat ids whose names the events would show (a shared group card).
    chat_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Dropped:
    event_type: str
    event_id: str
    #: ``private_chat`` (a direct chat the configuration does not name) | ``unconfigured_chat`` (a group it
    #: does not name) | ``not_direct`` (a chat configured with ``direct_with`` that is not a direct chat
    #: with that person) | ``no_canonical_form`` | ``budget_spent`` (the lookup it needs was refused by
    #: the API-call budget)
    reason: str
    chat_id: str | None = None
    #: The sender of a dropped message, when the payload names one (the person of a direct chat).
    person: str | None = None


@dataclass(frozen=True, slots=True)
class NeedsChat:
    event_type: str
    event_id: str
    message_id: str


AdaptResult = Adapted | Dropped | NeedsChat


@dataclass(frozen=True, slots=True)
class Envelope:
    event_type: str
    event_id: str
    create_ms: int
    event: Fields
    received_at_ms: int
    names: Mapping[str, str]


class AdapterBase:
    """What every event kind needs: the message → chat memory, the entry point and the shared helpers;
    :class:`~.adapter.FeishuAdapter` adds a handler per event type."""

    def __init__(
        self,
        bot_open_id: str | None,
        configured_chats: frozenset[str] | None,
        utc_offset_min: int,
        *,
        bot_app_id: str | None = None,
        direct_chats: Mapping[str, str] | None = None,
        memory_size: int = 100_000,
    ) -> None:
        """``configured_chats``: the chats served, groups and direct chats alike; ``None`` accepts every
        group and no direct chat (replay of an archive). ``direct_chats``: chat id → the open_id of the
        person a configured chat is a direct chat with (its ``direct_with``)."""
        self.bot_open_id = bot_open_id
        self.bot_app_id = bot_app_id
        self.configured_chats = configured_chats
        self.direct_chats: Mapping[str, str] = direct_chats or {}
        self.utc_offset_min = utc_offset_min
        self.memory_size = memory_size
        # message_id → (chat_id, is_private)
        self._chats: OrderedDict[str, tuple[str, bool]] = OrderedDict()
        self._handlers = self.handlers()

    def handlers(self) -> dict[str, Callable[[Envelope], AdaptResult]]:
        """The handler of each event type (the subclass's)."""
        return {}

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
        envelope = Envelope(
            event_type=event_type,
            event_id=header.req("event_id"),
            create_ms=header.millis("create_time"),
            event=Fields(env.data.get("event"), "$.event", event_type),
            received_at_ms=received_at_ms,
            names=names or {},
        )
        return handler(envelope)

    # -- helpers ---------------------------------------------------------------------------------------
    def gate(self, env: Envelope, chat_id: str, private: bool, person: str | None = None) -> Dropped | None:
        """Residency: a chat the configuration names is served, a group or a direct (``p2p``) chat alike;
        any other is dropped, the reason telling which kind it was. Without a whitelist (replay of an
        archive) every group is served and no direct chat: which direct chats to serve is configuration."""
        whitelist = self.configured_chats
        if (not private) if whitelist is None else chat_id in whitelist:
            return None
        reason = "private_chat" if private else "unconfigured_chat"
        return Dropped(env.event_type, env.event_id, reason, chat_id, person if private else None)

    def direct_gate(self, env: Envelope, chat_id: str, private: bool, sender: str | None) -> Dropped | None:
        """A chat configured with ``direct_with`` has that person's private memories in its prompts, so
        its messages are served only while it is what the configuration says: a direct chat, written in
        by that person (or the bot). Anything else is a configuration naming the wrong chat or person:
        its messages are dropped (``not_direct``) rather than shown a private memory in the wrong chat."""
        person = self.direct_chats.get(chat_id)
        if person is None:
            return None
        if private and sender in (None, person, self.bot_open_id):
            return None
        return Dropped(env.event_type, env.event_id, "not_direct", chat_id, sender)

    def common(
        self, env: Envelope, chat_id: str, dedup_key: str, at_ms: int, *, private: bool = False
    ) -> dict[str, Any]:
        return {
            "platform": Platform.FEISHU,
            "chat_id": chat_id,
            "dedup_key": dedup_key,
            "event_id": env.event_id,
            "chat_type": "private" if private else "group",
            "received_at_ms": env.received_at_ms,
            "timestamp_sec": at_ms / 1000,
            "utc_offset_min": self.utc_offset_min,
        }

    def person(self, env: Envelope, open_id: str, name: str | None = None) -> Sender:
        known = env.names.get(open_id) or name or open_id
        return Sender(id=open_id, display_name=known, is_bot=open_id == self.bot_open_id)

    def operator(self, env: Envelope) -> Sender | None:
        operator = env.event.opt_obj("operator_id")
        open_id = operator.opt("open_id") if operator else None
        return self.person(env, open_id) if open_id else None


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
