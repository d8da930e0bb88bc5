"""The observer the harness gives each driver replica: its reports (``larkbot.driver.observer``) kept as
the facts the harness's conditions read."""

from __future__ import annotations

import weakref
from collections.abc import Callable

from larkbot.driver.wake.chatstate import ChatState

from ..conditions import DEFAULT_TIMEOUT_S, Conditions


class DriverWatch:
    """Implements :class:`larkbot.driver.observer.DriverObserver` for one replica."""

    def __init__(self) -> None:
        self.conditions = Conditions()
        #: The partitions the replica reported holding, and whether each had its chats taken over.
        self.partitions: tuple[int, ...] = ()
        self.ready = False
        # Keyed by the chat's state object, not its key: a chat handed back and taken over again is a new
        # state whose loop has not looked at anything yet.
        self._idle_at: weakref.WeakKeyDictionary[ChatState, int] = weakref.WeakKeyDictionary()

    # -- the observer ---------------------------------------------------------------------------------
    def partitions_changed(self, partitions: tuple[int, ...], ready: bool) -> None:
        self.partitions, self.ready = partitions, ready
        self.conditions.changed()

    def context_applied(self, chat: ChatState) -> None:
        self.conditions.changed()

    def typing_applied(self, chat: ChatState) -> None:
        self.conditions.changed()

    def chat_idle(self, chat: ChatState, at_ms: int) -> None:
        self._idle_at[chat] = at_ms
        self.conditions.changed()

    def chat_woke(self, chat: ChatState) -> None:
        self._idle_at.pop(chat, None)
        self.conditions.changed()

    def chat_stopping(self, chat: ChatState) -> None:
        self.conditions.changed()

    # -- conditions -----------------------------------------------------------------------------------
    def holds(self, partitions: int) -> bool:
        """The replica holds exactly ``partitions`` partitions, each with its chats taken over."""
        return len(self.partitions) == partitions and self.ready

    def idle(self, chat: ChatState) -> bool:
        """The chat's loop has looked at the current time and state and found nothing to do."""
        at = self._idle_at.get(chat)
        return at is not None and at >= chat.clock.now_ms() and not chat.changed.is_set()

    async def until(self, predicate: Callable[[], bool], timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """Wait until ``predicate`` holds, looked at again after every report of the replica."""
        await self.conditions.until(predicate, timeout_s)

    async def settled(self, chat: ChatState, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        await self.until(lambda: self.idle(chat), timeout_s)
