"""Sender names from the contact API, fetched in the background and cached with a TTL.

The event path never waits for a name: :meth:`Contacts.want` schedules lookups for stale ids and returns;
the adapter reads :meth:`Contacts.names` (a live read-only view). Names disclosed by payloads (mentions,
member lists) and the bot's own name seed the table without an API call. A failed lookup is remembered as
a miss for the TTL (``NameTable``) and logged once per id and TTL.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from functools import partial

from larkbot.canonical.errors import LarkbotError

from .. import metrics
from ..core.names import NameTable
from .api import FeishuApi

log = logging.getLogger(__name__)


class Contacts:
    def __init__(
        self,
        api: FeishuApi | None,
        ttl_s: float,
        *,
        concurrency: int = 4,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.table = NameTable(ttl_s)
        self._clock = clock
        self._limit = asyncio.Semaphore(concurrency)
        self._inflight: dict[str, asyncio.Task[None]] = {}

    def names(self) -> Mapping[str, str]:
        return self.table.names()

    def seed(self, pairs: Iterable[tuple[str, str]]) -> None:
        """Names a payload disclosed; they never replace a name the contact API gave."""
        now = self._clock()
        for open_id, name in pairs:
            if self.table.get(open_id) is None:
                self.table.put(open_id, name, now)

    def want(self, open_ids: Iterable[str]) -> None:
        """Schedule lookups for the ids that are unknown or stale; never waits."""
        if self.api is None:
            return
        for open_id in self.table.stale((i for i in open_ids if i.startswith("ou_")), self._clock()):
            if open_id not in self._inflight:
                task = asyncio.create_task(self._lookup(open_id), name=f"contact-{open_id}")
                self._inflight[open_id] = task
                task.add_done_callback(partial(self._done, open_id))

    def _done(self, open_id: str, _task: asyncio.Task[None]) -> None:
        self._inflight.pop(open_id, None)

    async def _lookup(self, open_id: str) -> None:
        assert self.api is not None
        async with self._limit:
            try:
                name = await self.api.user_name(open_id)
            except LarkbotError as exc:
                # The contact API is best effort (the app may lack the scope); the open_id stays the name.
                log.warning("contact lookup failed: %s", exc)
                metrics.NAME_LOOKUPS.labels("error").inc()
                name = None
            else:
                metrics.NAME_LOOKUPS.labels("found" if name else "not_found").inc()
        self.table.put(open_id, name, self._clock())

    async def settle(self) -> None:
        """Wait for the lookups in flight (tests, shutdown)."""
        while self._inflight:
            await asyncio.gather(*list(self._inflight.values()), return_exceptions=True)

    async def close(self) -> None:
        for task in list(self._inflight.values()):
            task.cancel()
        await asyncio.gather(*list(self._inflight.values()), return_exceptions=True)
