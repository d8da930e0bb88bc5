"""Time at the edge. The scheduler reads ``now_ms`` and waits with ``wait_until``; tests and the benchmark
use :class:`ManualClock`, so debounce, typing extension and retry delays are driven without sleeping."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...

    async def wait_until(self, until_ms: int | None, changed: asyncio.Event) -> None:
        """Return when ``until_ms`` is reached or ``changed`` is set (``None``: only ``changed``); it may
        return earlier, the caller re-reads the time."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    async def wait_until(self, until_ms: int | None, changed: asyncio.Event) -> None:
        timeout = None if until_ms is None else max(0.0, (until_ms - self.now_ms()) / 1000)
        # Reaching the time is the normal way out of this wait, not an error.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), timeout)


class ManualClock:
    """A clock that moves only when told to (``advance``)."""

    def __init__(self, start_ms: int) -> None:
        self._now = start_ms
        self._tick = asyncio.Event()

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> None:
        self._now += ms
        tick, self._tick = self._tick, asyncio.Event()
        tick.set()

    async def wait_until(self, until_ms: int | None, changed: asyncio.Event) -> None:
        # Returns on every tick as well, so the caller re-reads the time (and can report that it did).
        if changed.is_set() or (until_ms is not None and self._now >= until_ms):
            return
        waiters = {asyncio.ensure_future(changed.wait()), asyncio.ensure_future(self._tick.wait())}
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
            await asyncio.gather(*waiters, return_exceptions=True)
