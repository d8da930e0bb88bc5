"""Raw Feishu event envelope (schema 2.0) → canonical events: the pure adapter, live and in replay.

``FeishuAdapter.adapt(payload, received_at_ms, names)`` returns one of:

- :class:`Adapted` — the canonical events to publish (usually one; a chat update that both renames the
  chat and changes its photo gives two);
- :class:`Dropped` — a well-formed event that is not projected (a chat the configuration does not name —
  a direct chat or a group —, a chat configured as a direct chat that is not one, or an event with no
  canonical form); it is acknowledged and not archived;
- :class:`NeedsChat` — a reaction on a message this adapter has not seen: reaction events carry no chat
  id, so the caller looks the message up (message GET API), calls :meth:`FeishuAdapter.remember` and adapts
  the same payload again.

A payload that is not a schema-2.0 envelope or misses a field raises :class:`MalformedPayload`; an event
type we do not adapt raises :class:`UnknownEventType` — both are dead-lettered by the caller.

Decisions:

- Dedup keys per action (stable across Feishu's re-pushes, which repeat the payload): the message id;
  ``recall:<message_id>``; ``reaction:<message_id>:<emoji_type>:<open_id>:<created|deleted>`` (the raw
  Feishu emoji type, so the key does not depend on our emoji table); the envelope's ``event_id`` for
  member, bot and chat-update events (``<event_id>:<change>`` for every change of a chat update after the
  first, :mod:`.chatchanges`); a system message's own message id.
  Consequence: adding, removing and re-adding the same reaction makes the second add a duplicate.
- ``timestamp_sec`` is Feishu's time of the action (message ``create_time``, ``recall_time``,
  ``action_time``; the envelope's ``create_time`` for member and chat events), in seconds;
  ``received_at_ms`` is the caller's arrival time, captured before any await.
- A direct chat (Feishu ``chat_type`` ``p2p``: the bot and one person, under an ``oc_`` chat id like a
  group's) is served when the configuration names it, like a group; its events carry ``chat_type``
  ``private`` (a recall or reaction: when its message was seen in a direct chat, or the chat is
  configured with ``direct_with``). A chat configured with ``direct_with`` must be a direct chat with that
  person: a message showing otherwise is dropped (``not_direct``), never shown that person's private
  memories.
- The message → chat memory is filled from every message seen (also dropped ones, so a reaction in an
  unconfigured chat is dropped without an API call) and from the bot's own sends (:meth:`remember`). It
  keeps the last ``memory_size`` messages.
- Sender names come from ``names`` (the contact-name cache); without one the open_id is the name. A
  shared contact card adds its user to ``user_ids`` (so the cache learns the name), a shared group card
  its chat to ``chat_ids``; ``names`` holds chat names too, and the caller adapts again once it knows them.
- A ``system`` message (a line the chat itself writes, e.g. who invited whom) is a notice ``system``
  whose text is its filled template (:mod:`.cards`), not a message of the person named as its sender.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from larkbot.canonical.events import (
    BotAdded,
    BotRemoved,
    ChatNotice,
    DeleteEvent,
    MemberLeft,
    MembersJoined,
    MessageEvent,
    ReactionEvent,
    Sender,
    ServiceAction,
    ServiceEvent,
)

from . import emoji
from .cards import system_text
from .chatchanges import chat_update_actions
from .content import MentionRef, parse_content
from .envelope import (
    BOT_ADDED,
    BOT_DELETED,
    CHAT_DISBANDED,
    CHAT_UPDATED,
    EVENT_TYPES,
    MESSAGE_RECALLED,
    MESSAGE_RECEIVE,
    REACTION_CREATED,
    REACTION_DELETED,
    USER_ADDED,
    USER_DELETED,
    USER_WITHDRAWN,
    Adapted,
    AdapterBase,
    AdaptResult,
    Dropped,
    Envelope,
    FeishuEvent,
    NeedsChat,
)
from .errors import MalformedPayload
from .fields import Fields

__all__ = ["EVENT_TYPES", "AdaptResult", "Adapted", "Dropped", "FeishuAdapter", "FeishuEvent", "NeedsChat"]


class FeishuAdapter(AdapterBase):
    """The pure adapter; one instance per process (it holds the message → chat memory).

    ``FeishuAdapter(bot_open_id, configured_chats, utc_offset_min, *, bot_app_id=None, direct_chats=None,
    memory_size=100_000)``: ``configured_chats`` are served, groups and direct chats alike (``None``: every
    group and no direct chat, for the replay of an archive); ``direct_chats`` maps a configured chat to
    the person it is a direct chat with (:meth:`~.envelope.AdapterBase.direct_gate`)."""

    def handlers(self) -> dict[str, Callable[[Envelope], AdaptResult]]:
        return {
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

    # -- event kinds -----------------------------------------------------------------------------------
    def _message(self, env: Envelope) -> AdaptResult:
        message = env.event.obj("message")
        message_id = message.req("message_id")
        chat_id = message.req("chat_id")
        private = message.req("chat_type") == "p2p"
        self.remember(message_id, chat_id, private=private)
        sender = env.event.opt_obj("sender")
        sender_ids = sender.opt_obj("sender_id") if sender is not None else None
        open_id = sender_ids.opt("open_id") if sender_ids is not None else None
        if dropped := self.gate(env, chat_id, private, open_id) or self.direct_gate(
            env, chat_id, private, open_id
        ):
            return dropped
        sender = env.event.obj("sender")
        message_type = message.req("message_type")
        if message_type == "system":
            return self._system(env, chat_id, message_id, message, open_id, private)
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
        content, attachments = parse_content(
            message_type,
            message.req("content"),
            mentions,
            "$.event.message.content",
            env.event_type,
            env.names,
        )
        author = self.person(env, open_id)
        if sender.opt("sender_type") == "app":
            author = author.model_copy(update={"is_bot": True})
        event = MessageEvent(
            **self.common(env, chat_id, message_id, message.millis("create_time"), private=private),
            message_id=message_id,
            sender=author,
            content=content,
            attachments=attachments,
            reply_to_message_id=message.opt("parent_id"),
        )
        shared = _shared(message_type, message.req("content"))
        users = (open_id, shared) if shared and message_type == "share_user" else (open_id,)
        chats = (shared,) if shared and message_type == "share_chat" else ()
        return Adapted(env.event_type, env.event_id, (event,), users, tuple(seen), chats)

    def _system(
        self,
        env: Envelope,
        chat_id: str,
        message_id: str,
        message: Fields,
        open_id: str | None,
        private: bool,
    ) -> Adapted:
        content = Fields(_json(message.req("content")), "$.event.message.content", env.event_type)
        actor = self.person(env, open_id) if open_id else None
        notice = ChatNotice(type="system", actor=actor, text=system_text(content.data) or None)
        at_ms = message.millis("create_time")
        event = ServiceEvent(**self.common(env, chat_id, message_id, at_ms, private=private), action=notice)
        return Adapted(env.event_type, env.event_id, (event,), (open_id,) if open_id else ())

    def _recalled(self, env: Envelope) -> AdaptResult:
        message_id = env.event.req("message_id")
        chat_id = env.event.req("chat_id")
        known = self._chats.get(message_id)
        private = bool(known and known[1])
        if dropped := self.gate(env, chat_id, private):
            return dropped
        event = DeleteEvent(
            **self.common(
                env,
                chat_id,
                f"recall:{message_id}",
                env.event.millis("recall_time"),
                private=private or chat_id in self.direct_chats,
            ),
            message_ids=(message_id,),
        )
        return Adapted(env.event_type, env.event_id, (event,))

    def _reaction(self, env: Envelope) -> AdaptResult:
        message_id = env.event.req("message_id")
        known = self._chats.get(message_id)
        if known is None:
            return NeedsChat(env.event_type, env.event_id, message_id)
        chat_id, private = known
        if dropped := self.gate(env, chat_id, private):
            return dropped
        emoji_type = env.event.obj("reaction_type").req("emoji_type")
        if env.event.opt("operator_type") == "app":
            app_id = env.event.req("app_id")
            own = self.bot_open_id is not None and app_id == self.bot_app_id
            actor_id = self.bot_open_id if own and self.bot_open_id else app_id
            actor = Sender(id=actor_id, display_name=env.names.get(actor_id, actor_id), is_bot=True)
        else:
            open_id = env.event.obj("user_id").req("open_id")
            actor = self.person(env, open_id)
        removed = env.event_type == REACTION_DELETED
        action = "deleted" if removed else "created"
        event = ReactionEvent(
            **self.common(
                env,
                chat_id,
                f"reaction:{message_id}:{emoji_type}:{actor.id}:{action}",
                env.event.millis("action_time"),
                private=private or chat_id in self.direct_chats,
            ),
            message_id=message_id,
            actor=actor,
            emoji=emoji.to_canonical(emoji_type),
            removed=removed,
        )
        return Adapted(env.event_type, env.event_id, (event,), (actor.id,))

    def _members(self, env: Envelope) -> AdaptResult:
        chat_id = env.event.req("chat_id")
        if dropped := self.gate(env, chat_id, False):
            return dropped
        members: list[Sender] = []
        seen: list[tuple[str, str]] = []
        for i, raw in enumerate(env.event.array("users")):
            user = Fields(raw, f"$.event.users.{i}", env.event_type)
            open_id = user.obj("user_id").req("open_id")
            name = user.opt("name")
            members.append(self.person(env, open_id, name))
            if name:
                seen.append((open_id, name))
        if not members:
            raise MalformedPayload("$.event.users: empty", event_type=env.event_type)
        actor = self.operator(env)
        if actor is not None and {m.id for m in members} == {actor.id}:
            actor = None  # joined or left by themselves
        action: ServiceAction
        if env.event_type == USER_ADDED:
            action = MembersJoined(actor=actor, members=tuple(members))
        else:
            action = MemberLeft(actor=actor, members=tuple(members))
        event = ServiceEvent(**self.common(env, chat_id, env.event_id, env.create_ms), action=action)
        ids = tuple(m.id for m in members) + ((actor.id,) if actor else ())
        return Adapted(env.event_type, env.event_id, (event,), ids, tuple(seen))

    def _bot(self, env: Envelope) -> AdaptResult:
        chat_id = env.event.req("chat_id")
        if dropped := self.gate(env, chat_id, False):
            return dropped
        actor = self.operator(env)
        action = BotAdded(actor=actor) if env.event_type == BOT_ADDED else BotRemoved(actor=actor)
        event = ServiceEvent(**self.common(env, chat_id, env.event_id, env.create_ms), action=action)
        return Adapted(env.event_type, env.event_id, (event,), (actor.id,) if actor else ())

    def _chat_updated(self, env: Envelope) -> AdaptResult:
        chat_id = env.event.req("chat_id")
        if dropped := self.gate(env, chat_id, False):
            return dropped
        actor = self.operator(env)
        changes = chat_update_actions(env.event, actor, lambda open_id: self.person(env, open_id))
        if not changes:
            return Dropped(env.event_type, env.event_id, "no_canonical_form", chat_id)
        events = tuple(
            ServiceEvent(
                **self.common(
                    env,
                    chat_id,
                    env.event_id if i == 0 else f"{env.event_id}:{suffix or 'name'}",
                    env.create_ms,
                ),
                action=action,
            )
            for i, (suffix, action) in enumerate(changes)
        )
        people = [a.id for _, action in changes for a in (action.actor, *getattr(action, "members", ())) if a]
        return Adapted(env.event_type, env.event_id, events, tuple(dict.fromkeys(people)))

    def _no_form(self, env: Envelope) -> AdaptResult:
        chat = env.event.opt("chat_id")
        return Dropped(env.event_type, env.event_id, "no_canonical_form", chat)


def _json(raw: str) -> object:
    try:
        return json.loads(raw)
    except ValueError:
        raise MalformedPayload("$.event.message.content: not JSON") from None


def _shared(message_type: str, raw: str) -> str | None:
    """The user or chat a shared card names (the caller looks its name up)."""
    if message_type not in ("share_user", "share_chat"):
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    value = (
        data.get("user_id" if message_type == "share_user" else "chat_id") if isinstance(data, dict) else None
    )
    return value if isinstance(value, str) and value else None
