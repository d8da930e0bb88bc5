"""The KV watch: a mirror of a bucket's entries (the bot identities, contact names, chat migrations).

Built through the middleware chain (:mod:`.chain`)::

    log context → trace → metrics → log-and-count policy → handler

:meth:`KvWatch.start` delivers every entry stored when it is called and returns once the last one was
handled (a service starts with a complete mirror); :meth:`KvWatch.run` then follows every later write
until :meth:`KvWatch.stop`. A deleted or purged key arrives with ``value=None``. The handler is given the
entry's revision, so a mirror that also writes the bucket can ignore an echo older than its own write.

Nothing is acknowledged: the policy logs and counts (:func:`.subscribe.log_policy` — an entry that does
not decode is a WARNING and counted ``undecodable``; the watch goes on). :meth:`KvWatch.synced` is a
read-your-writes barrier: it returns once the mirror holds everything written before the call (by any
replica).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import nats
from nats.js.kv import KV_DEL, KV_PURGE, KeyValue

from . import metrics, tracing
from .bus import Bus
from .chain import build
from .logs import log_context
from .subscribe import log_policy

__all__ = ["LOAD_TIMEOUT_S", "KvUpdate", "KvWatch"]

log = logging.getLogger(__name__)

#: How long :meth:`KvWatch.start` waits for the next stored entry before it calls the load incomplete.
LOAD_TIMEOUT_S = 30.0


@dataclass(slots=True)
class KvUpdate:
    """One entry of the bucket as the watch delivers it; ``value`` is ``None`` for a deleted key."""

    bucket: str
    key: str
    value: bytes | None
    revision: int
    outcome: str = "ok"

    def context(self) -> AbstractContextManager[None]:
        return log_context(bucket=self.bucket, key=self.key)

    def span(self) -> AbstractContextManager[Any]:
        return tracing.NO_SPAN

    def observe(self, seconds: float) -> None:
        del seconds  # counted, not timed
        metrics.WATCH_UPDATES.labels(self.bucket, self.outcome).inc()


class KvWatch:
    def __init__(
        self,
        bus: Bus,
        bucket: str,
        handler: Callable[[KvUpdate], Awaitable[None]],
        *,
        keys: str = ">",
    ) -> None:
        self.bus = bus
        self.bucket = bucket
        self.keys = keys
        self.handler = handler
        self.handle = build(handler, log_policy)
        #: The bucket revision of the last entry handled.
        self.revision = 0
        self._watcher: KeyValue.KeyWatcher | None = None
        self._seen = asyncio.Condition()

    async def start(self) -> None:
        """Watch, and handle every entry stored now; returns when the last of them was handled."""
        kv = await self.bus.js.key_value(self.bucket)
        self._watcher = await kv.watch(self.keys)
        while (entry := await self._watcher.updates(timeout=LOAD_TIMEOUT_S)) is not None:  # type: ignore[no-untyped-call]
            await self._take(entry)

    async def run(self) -> None:
        """Follow every later write until :meth:`stop`."""
        if self._watcher is None:
            raise RuntimeError(f"watch of {self.bucket} not started")
        async for entry in self._watcher:
            if entry is not None:
                await self._take(entry)

    async def stop(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            with contextlib.suppress(nats.errors.Error):
                await watcher.stop()  # type: ignore[no-untyped-call]

    async def synced(self, timeout_s: float = 30.0) -> None:
        """Return once every write made to the bucket before the call has been handled."""
        if self.keys != ">":
            raise ValueError("synced() needs a watch of the whole bucket")
        info = await self.bus.js.stream_info(f"KV_{self.bucket}")
        last = info.state.last_seq
        async with self._seen:
            await asyncio.wait_for(self._seen.wait_for(lambda: self.revision >= last), timeout_s)

    async def _take(self, entry: KeyValue.Entry) -> None:
        deleted = entry.operation in (KV_DEL, KV_PURGE)
        revision = int(entry.revision or 0)
        await self.handle(KvUpdate(self.bucket, entry.key, None if deleted else entry.value, revision))
        async with self._seen:
            self.revision = max(self.revision, revision)
            self._seen.notify_all()
