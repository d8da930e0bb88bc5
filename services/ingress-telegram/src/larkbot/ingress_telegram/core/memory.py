"""What the adapter remembers across updates besides edit fingerprints: group → supergroup upgrades,
and the forum topic of recent messages (for sends).

**Upgrades.** A group upgraded to a supergroup gets a new chat id. The chat continues as the one the
configuration names: :class:`Migrations` maps the supergroup to the group, so events keep the group's
chat id (its history, settings, compaction and memories continue) and sends go to the supergroup. The
pairs are learnt from the group's ``migrate_to_chat_id`` service message or the supergroup's
``migrate_from_chat_id`` one, and from a send refused with ``migrate_to_chat_id``; the service stores
them (KV bucket ``telegram-chat-migrations``) so a restart keeps them. A supergroup that is itself
configured is its own chat: the operator asked for a fresh context.

**Topics.** Sends into a forum must name their topic (``message_thread_id``). :class:`Threads` keeps the
topic of the last ``capacity`` messages seen per chat and the topic of each chat's latest message from
someone else: a reply goes to its target's topic, a message that replies to nothing to the topic of the
latest message the bot read (the conversation it is answering). A target it no longer remembers is left
to Telegram, which puts a reply in its target's topic.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable


class Migrations:
    def __init__(self, pairs: Iterable[tuple[str, str]] = ()) -> None:
        #: supergroup → the group it continues, and back.
        self.group_of: dict[str, str] = {}
        self.supergroup_of: dict[str, str] = {}
        for group, supergroup in pairs:
            self.learn(group, supergroup)

    def learn(self, group: str, supergroup: str) -> bool:
        """Record an upgrade; true when it was not known yet."""
        if self.supergroup_of.get(group) == supergroup:
            return False
        self.group_of[supergroup] = group
        self.supergroup_of[group] = supergroup
        return True

    def recorded_as(self, chat_id: str, configured: frozenset[str] | None) -> str | None:
        """The group a supergroup's updates are recorded under, or ``None`` (not an upgrade, or the
        supergroup is configured as a chat of its own)."""
        group = self.group_of.get(chat_id)
        if group is None or (configured is not None and chat_id in configured):
            return None
        return group

    def platform_chat(self, chat_id: str) -> str:
        """Where a send to ``chat_id`` goes: the supergroup a group became, else the chat itself."""
        return self.supergroup_of.get(chat_id, chat_id)


class Threads:
    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._of: OrderedDict[tuple[str, str], str | None] = OrderedDict()
        self._latest: dict[str, str | None] = {}

    def seen(self, chat_id: str, message_id: str, thread: str | None, *, from_others: bool) -> None:
        key = (chat_id, message_id)
        self._of[key] = thread
        self._of.move_to_end(key)
        while len(self._of) > self._capacity:
            self._of.popitem(last=False)
        if from_others:
            self._latest[chat_id] = thread

    def for_send(self, chat_id: str, reply_to: str | None) -> str | None:
        if reply_to is not None:
            return self._of.get((chat_id, reply_to))
        return self._latest.get(chat_id)
