"""Reading the memories of a wake-up's late binding ahead of time (:class:`RecallAhead`).

When the probe activates a wake-up, the primary's late binding asks for the high-importance memories of
the people in the shown messages (``core.wake._plan_with_memories``). The wake-up's ports start that read
when the probe leaves (``wake.ports``), so it runs while the probe is away instead of after it. The
read is taken only by a request for exactly the same people and bound (a trimmed history shows fewer
people: then the memories are read as before); a probe that suppresses the wake-up wasted one indexed
read.
"""

from __future__ import annotations

import asyncio

from .core.memory import Memory, Visibility
from .memories import MemoryStore

__all__ = ["RecallAhead"]


class RecallAhead:
    __slots__ = ("_ahead", "_store")

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._ahead: tuple[tuple[str, ...], Visibility, int, asyncio.Task[list[Memory]]] | None = None

    def start(self, persons: tuple[str, ...], visibility: Visibility, limit: int) -> None:
        """Start the read (once a wake-up: the first probe's view is the one the primary is built on)."""
        if self._ahead is None and persons and limit > 0:
            read = self._store.high_importance(persons, visibility, limit=limit)
            self._ahead = (persons, visibility, limit, asyncio.create_task(read, name="memories-ahead"))

    async def load(self, persons: tuple[str, ...], visibility: Visibility, limit: int) -> list[Memory]:
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            if ahead[:3] == (persons, visibility, limit):
                return await ahead[3]
            await _drop(ahead[3])
        return await self._store.high_importance(persons, visibility, limit=limit)

    async def drop(self) -> None:
        """The wake-up ends: a read nobody took is cancelled."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            await _drop(ahead[3])


async def _drop(read: asyncio.Task[list[Memory]]) -> None:
    # What a read nobody took found, or failed with, decides nothing.
    read.cancel()
    await asyncio.gather(read, return_exceptions=True)
