"""Waiting on a condition of a system that reports its changes.

A service tells the observer it was given of its changes synchronously, from its own tasks
(``larkbot.driver.observer``, ``larkbot.pipeline.observer``, the Feishu contact-name table's
``ContactsObserver``). The testkit's observers record what they are told and call
:meth:`Conditions.changed`; every waiter then re-checks its predicate — asyncio.Condition's semantics
without a lock the reporting code would have to take. Waits are bounded (generous timeouts, raising
``TimeoutError``), never sleeps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

#: Generous: a loaded 2-core machine runs several suites at once.
DEFAULT_TIMEOUT_S = 30.0


class Conditions:
    def __init__(self) -> None:
        self._waiters: set[asyncio.Future[None]] = set()

    def changed(self) -> None:
        """Something the predicates read may have changed: wake every waiter to look again."""
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def until(self, predicate: Callable[[], bool], timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """Return once ``predicate()`` holds, looked at now and after every :meth:`changed`."""
        async with asyncio.timeout(timeout_s):
            while not predicate():
                waiter = asyncio.get_running_loop().create_future()
                self._waiters.add(waiter)
                try:
                    await waiter
                finally:
                    self._waiters.discard(waiter)
