"""One owner per partition (and per singleton lease) at every moment, as the lease bucket shows it.

Every write the ``leases`` bucket stores reaches a watch of its own connection (the runtime's
:class:`~larkbot.runtime.watch.KvWatch`: stored entries only — a compare-and-set the bucket refused is
published too, and a plain subscriber would take it for a write). A partition changes hands after its
holder deleted its lease or after the lease expired (the bucket's TTL since the holder's last write); a new
holder storing a lease sooner, while the old holder's process still runs, means two live replicas held it
at once.

A revision skipped between the old holder's last write and the new holder's create (the watch was reset
and resumed past entries that were overwritten meanwhile) makes that hand-over unobserved: counted, not
judged.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from larkbot.canonical.names import KV_LEASES
from larkbot.runtime.bus import Bus, connect
from larkbot.runtime.config import NatsSettings
from larkbot.runtime.watch import KvUpdate, KvWatch

#: Receipt times of two entries on one watch differ from their store times by far less than this.
SLACK_S = 1.5
_PID = re.compile(r"-(\d+)-[0-9a-f]{6}$")


def replica_pid(replica: str) -> int | None:
    """The process id inside a replica id (``<host>-<pid>-<hex>``, ``runtime.process.replica_id``)."""
    found = _PID.search(replica)
    return int(found.group(1)) if found else None


@dataclass(slots=True)
class Holding:
    holder: str
    last_write: float
    revision: int
    released: bool = False


@dataclass(slots=True)
class LeaseWatch:
    ttl_s: float
    #: Whether the process with this id still runs (the harness knows its children).
    alive: Callable[[int], bool]
    writes: int = 0
    handovers: int = 0
    unobserved: int = 0
    overlaps: list[str] = field(default_factory=list)
    _held: dict[str, Holding] = field(default_factory=dict)
    _gaps: list[tuple[int, int]] = field(default_factory=list)
    _last_revision: int = 0
    _bus: Bus | None = None
    _watch: KvWatch | None = None
    _task: asyncio.Task[None] | None = None

    async def start(self, servers: str) -> None:
        self._bus = await connect(NatsSettings(), "chaos-lease-watch", url=servers, give_up_after_s=60)
        self._watch = KvWatch(self._bus, KV_LEASES, self._on_entry)
        await self._watch.start()
        self._task = asyncio.create_task(self._watch.run())

    async def stop(self) -> None:
        if self._watch is not None:
            await self._watch.stop()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._bus is not None:
            await self._bus.close(drain_timeout_s=5)

    def _skipped_between(self, a: int, b: int) -> bool:
        return any(start < b and end > a for start, end in self._gaps)

    async def _on_entry(self, entry: KvUpdate) -> None:
        now = time.monotonic()
        if self._last_revision and entry.revision > self._last_revision + 1:
            self._gaps.append((self._last_revision, entry.revision))
        self._last_revision = max(self._last_revision, entry.revision)
        if ".members." in entry.key:
            return  # heartbeats of members, not leases
        self.writes += 1
        held = self._held.get(entry.key)
        if entry.value is None:
            if held is not None:
                held.released = True
            return
        holder = entry.value.decode()
        if held is not None and held.holder != holder:
            self.handovers += 1
            pid = replica_pid(held.holder)
            if held.released or pid is None or not self.alive(pid):
                pass
            elif self._skipped_between(held.revision, entry.revision):
                self.unobserved += 1
            elif now - held.last_write < self.ttl_s - SLACK_S:
                self.overlaps.append(
                    f"{entry.key}: {holder} took it {now - held.last_write:.1f} s after the last write of "
                    f"{held.holder}, which still runs and had not released it (lease TTL {self.ttl_s:g} s)"
                )
        if held is None or held.holder != holder or held.released:
            self._held[entry.key] = Holding(holder, now, entry.revision)
        else:
            held.last_write, held.revision = now, entry.revision
