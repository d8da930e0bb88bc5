"""The chat's turn responses as this replica last read or stored them (:class:`TurnHistory`), so that a
wake-up does not read back from the database what the process wrote itself.

Every wake-up starts by loading the chat's turn responses after the summary's boundary
(``core.wake.LoadTurns``); the replica that holds the chat is their only writer (the partition's lease;
a second writer of a step is a ``StepConflict``), so after one read, or none when the take-over found
the chat without any, it knows them: it keeps each record it stores, as the database gives it back
(``DriverRepository.add_turn``), in storage order — a complete step replaces its pending version in place,
as its row keeps its id. A write that fails leaves the history unknown, and the next wake-up reads it.
It lives as long as the chat's state: a hand-over drops it with the chat.
"""

from __future__ import annotations

from .core.records import TurnRecord

__all__ = ["TurnHistory"]


class TurnHistory:
    __slots__ = ("_since_ms", "_turns")

    def __init__(self) -> None:
        #: Every turn response requested at or after this is in ``_turns`` (``None``: not known).
        self._since_ms: int | None = None
        self._turns: tuple[TurnRecord, ...] = ()

    def since(self, since_ms: int) -> tuple[TurnRecord, ...] | None:
        """What ``DriverRepository.turns(since_ms=since_ms)`` would read; ``None`` when not known."""
        if self._since_ms is None or since_ms < self._since_ms:
            return None
        if since_ms > self._since_ms:
            # The summary's boundary moved on: what lies before it is never asked for again.
            self._turns = tuple(t for t in self._turns if t.requested_at_ms >= since_ms)
            self._since_ms = since_ms
        return self._turns

    def loaded(self, since_ms: int, turns: tuple[TurnRecord, ...]) -> None:
        self._since_ms, self._turns = since_ms, turns

    def none_stored(self) -> None:
        """The chat has no turn response at all (the take-over looked)."""
        self.loaded(0, ())

    def stored(self, record: TurnRecord) -> None:
        """``record`` was written (as the database gives it back)."""
        if self._since_ms is None:
            return
        for index, kept in enumerate(self._turns):
            if (kept.chain_id, kept.step) == (record.chain_id, record.step):
                self._turns = (*self._turns[:index], record, *self._turns[index + 1 :])
                return
        if record.requested_at_ms >= self._since_ms:
            self._turns = (*self._turns, record)

    def forget(self) -> None:
        """A write whose outcome is not known: the next wake-up reads the history."""
        self._since_ms, self._turns = None, ()
