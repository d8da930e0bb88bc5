"""What a driver replica reports as its state changes, to the observer it was given.

The replica calls these synchronously, right after the change, from the task that made it: a partition
taken over or handed back, a chat's copy of the context moved, a typing signal taken in, a chat's loop
gone idle (it looked at the time and found nothing to do) or woken, a chat told to stop. Nothing in
production observes a replica (the default is :data:`UNOBSERVED`); the testkit's harness passes an
observer that turns these reports into conditions to wait on, so the service itself offers no
wait-for-condition API. An observer must return at once and must not raise: it runs inside the
replica's own loops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .wake.chatstate import ChatState


class DriverObserver(Protocol):
    def partitions_changed(self, partitions: tuple[int, ...], ready: bool) -> None:
        """The partitions held now, in order; ``ready``: each has its chats taken over (snapshot
        adopted, loop running)."""

    def context_applied(self, chat: ChatState) -> None:
        """``chat.context`` moved: an update applied, or a snapshot adopted (take-over, gap)."""

    def typing_applied(self, chat: ChatState) -> None:
        """A typing signal of a member of ``chat`` entered its schedule."""

    def chat_idle(self, chat: ChatState, at_ms: int) -> None:
        """The chat's loop looked at the clock's ``at_ms`` and its state, found nothing to do, and waits
        for a change or for its next deadline."""

    def chat_woke(self, chat: ChatState) -> None:
        """The chat's loop stopped waiting (a change, or its deadline came)."""

    def chat_stopping(self, chat: ChatState) -> None:
        """The chat was told to stop (its partition handed over, or the replica stopping)."""


class Unobserved:
    """The observer of a replica nobody watches."""

    def partitions_changed(self, partitions: tuple[int, ...], ready: bool) -> None:
        return None

    def context_applied(self, chat: ChatState) -> None:
        return None

    def typing_applied(self, chat: ChatState) -> None:
        return None

    def chat_idle(self, chat: ChatState, at_ms: int) -> None:
        return None

    def chat_woke(self, chat: ChatState) -> None:
        return None

    def chat_stopping(self, chat: ChatState) -> None:
        return None


UNOBSERVED: DriverObserver = Unobserved()
