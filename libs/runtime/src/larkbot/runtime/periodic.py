"""Periodic work that ends with the service: "run this every N seconds while the service runs".

:func:`every` runs ``work`` at once and then every ``interval_s`` (measured from the end of a run, so
runs never overlap) until ``stopping`` is set. The wait between runs ends the moment ``stopping`` is set;
a run in progress is finished, not cancelled (its work is the caller's to make short). So a stop never
waits for the interval — a loop that slept through it would hold every stop up until the service's
join timeout cancels it.

Failures: an exception of a type in ``tolerate`` (the transient failures of that work: NATS timeouts, a
database that is away) is logged once per run at WARNING and the next run comes at its time; any other
exception ends the loop and propagates — spawned with ``ServiceContext.every`` (or ``spawn``), that stops
the service with exit status 1, loudly, rather than leaving a silent broken loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

__all__ = ["Work", "every"]

log = logging.getLogger(__name__)

Work = Callable[[], Awaitable[None]]


async def every(
    interval_s: float,
    work: Work,
    stopping: asyncio.Event,
    *,
    name: str,
    tolerate: tuple[type[BaseException], ...] = (),
    immediately: bool = True,
) -> None:
    """Run ``work`` every ``interval_s`` until ``stopping`` (see the module docstring). With
    ``immediately=False`` the first run comes after one interval."""
    if interval_s <= 0:
        raise ValueError(f"{name}: the interval must be positive, not {interval_s}")
    if not immediately and await _wait(stopping, interval_s):
        return
    while not stopping.is_set():
        try:
            await work()
        except tolerate as exc:
            log.warning("%s failed (%s: %s); next run in %.0f s", name, type(exc).__name__, exc, interval_s)
        if await _wait(stopping, interval_s):
            return


async def _wait(stopping: asyncio.Event, seconds: float) -> bool:
    """Wait ``seconds`` or until ``stopping``; true when stopping."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stopping.wait(), seconds)
    return stopping.is_set()
