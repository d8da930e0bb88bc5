"""Partition ownership and in-order reading of ``EVENTS`` from the resume point the database records.

``EVENTS`` stores ``events.<platform>.<chat>`` as ``events.<p>.<platform>.<chat>`` with ``p`` =
``names.partition_of(platform, chat)``. Replicas share the partitions through
:class:`larkbot.runtime.partitions.PartitionLeases` (group ``pipeline``). Each acquired partition is read
by the runtime's offset-in-database reader (:class:`larkbot.runtime.reader.PartitionReader`): it loads the
partition's resident chats, reads its resume point from the intake (the database) and reads from there,
handing each batch to :meth:`Intake.feed`. On release the reader is cancelled and the partition's
uncommitted messages are abandoned after any commit in progress; the next owner resumes from the
database. Any unexpected failure (NATS, the database, a gap in the consumer sequence, a dead-letter record
that cannot be written) restarts the partition from its resume point with backoff — never skipping ahead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import nats
from nats.js.kv import KeyValue

from larkbot.canonical.names import (
    CONSUMER_PIPELINE,
    KV_LEASES,
    PARTITIONS,
    STREAM_EVENTS,
    partition_consumer,
    partition_filter,
)
from larkbot.runtime.backoff import Backoff
from larkbot.runtime.bus import Bus
from larkbot.runtime.partitions import TAKEOVER_RETRY, PartitionLeases
from larkbot.runtime.reader import PartitionReader, ReaderState

from .. import metrics
from .intake import Intake

log = logging.getLogger(__name__)

#: How often each partition's lag gauge is refreshed.
LAG_S = 5.0

#: Lease group in the ``leases`` bucket (keys ``pipeline.p<NNN>``, ``pipeline.members.<replica>``).
GROUP = "pipeline"


def lease_key(partition: int) -> str:
    """The lease of ``partition`` (the key format of ``PartitionLeases``)."""
    return f"{GROUP}.p{partition:03d}"


class _Partitions:
    """The pipeline's side of its partition readers: the intake takes the batches and holds the offsets
    (:class:`larkbot.runtime.reader.PartitionHandler` and ``OffsetStore``)."""

    def __init__(self, intake: Intake, load: Callable[[int], Awaitable[int]]) -> None:
        self.intake = intake
        self.load = load
        self.room = intake.room
        self.feed = intake.feed

    async def prepare(self, partition: int) -> None:
        await self.load(partition)

    async def open(self, partition: int) -> int:
        return await self.intake.open_partition(partition)

    async def abandon(self, partition: int) -> None:
        await self.intake.close_partition(partition)


@dataclass(frozen=True, slots=True)
class Progress:
    """Where this replica's share of the partitions stands (readiness)."""

    #: The assignment is settled: this replica holds exactly the partitions it should.
    assignment_settled: bool
    #: partition → its reader's state
    states: dict[int, ReaderState]

    @property
    def serving(self) -> bool:
        consuming = all(state is ReaderState.CONSUMING for state in self.states.values())
        return self.assignment_settled and consuming


class Ownership:
    """This replica's share of the partitions: leases in, readers out."""

    def __init__(
        self,
        bus: Bus,
        kv: KeyValue,
        intake: Intake,
        load: Callable[[int], Awaitable[int]],
        evict: Callable[[int], None],
        replica: str,
        *,
        heartbeat_s: float,
        fetch_timeout_s: float = 1.0,
        takeover_retry: Backoff = TAKEOVER_RETRY,
    ) -> None:
        self.bus = bus
        self.kv = kv
        self.intake = intake
        self.load = load
        self.evict = evict
        self.replica = replica
        self.fetch_timeout_s = fetch_timeout_s
        self.readers: dict[int, tuple[PartitionReader, asyncio.Task[None]]] = {}
        self._partitions = _Partitions(intake, load)
        self.leases = PartitionLeases(
            kv,
            GROUP,
            replica,
            PARTITIONS,
            on_acquire=self._acquire,
            on_release=self._release,
            heartbeat_s=heartbeat_s,
            backoff=takeover_retry,
        )
        #: Set while the assignment is settled and every owned partition is being consumed.
        self.serving_all = asyncio.Event()

    @classmethod
    async def open(
        cls,
        bus: Bus,
        intake: Intake,
        load: Callable[[int], Awaitable[int]],
        evict: Callable[[int], None],
        *,
        replica: str,
        bucket: str = KV_LEASES,
        fetch_timeout_s: float = 1.0,
        takeover_retry: Backoff = TAKEOVER_RETRY,
    ) -> Ownership:
        kv = await bus.js.key_value(bucket)
        ttl = (await kv.status()).ttl or 15.0
        # Renew well within the bucket's TTL: a lease lives for one TTL after its last renewal.
        heartbeat = min(5.0, ttl / 3)
        return cls(
            bus,
            kv,
            intake,
            load,
            evict,
            replica,
            heartbeat_s=heartbeat,
            fetch_timeout_s=fetch_timeout_s,
            takeover_retry=takeover_retry,
        )

    def owned(self) -> list[int]:
        return sorted(self.readers)

    def serving(self, partition: int) -> bool:
        entry = self.readers.get(partition)
        return entry is not None and entry[0].state is ReaderState.CONSUMING

    def progress(self) -> Progress:
        readers = [reader for reader, _ in self.readers.values()]
        return Progress(
            assignment_settled=self.leases.settled.is_set(),
            states={reader.partition: reader.state for reader in readers},
        )

    def _update(self, _reader: PartitionReader | None = None) -> None:
        _toggle(self.serving_all, self.progress().serving)

    async def _acquire(self, partition: int) -> None:
        reader = PartitionReader(
            self.bus.js,
            STREAM_EVENTS,
            partition,
            partition_filter("events", partition),
            f"{partition_consumer(CONSUMER_PIPELINE, partition)}-{self.replica}",
            self._partitions,
            self._partitions,
            name=CONSUMER_PIPELINE,
            observer=self._update,
            on_restart=lambda _exc: metrics.PARTITION_RESTARTS.inc(),
            fetch_timeout_s=self.fetch_timeout_s,
        )
        task = asyncio.create_task(reader.run(), name=f"pipeline-p{partition:02d}")
        self.readers[partition] = (reader, task)
        metrics.PARTITIONS_OWNED.set(len(self.readers))

    async def _release(self, partition: int) -> None:
        """Stop reading, then abandon what is uncommitted (after a commit in progress) and forget the
        partition's chats: another replica owns them now."""
        entry = self.readers.pop(partition, None)
        metrics.PARTITIONS_OWNED.set(len(self.readers))
        metrics.PARTITION_LAG.labels(str(partition)).set(0)
        if entry is None:
            return
        _reader, task = entry
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await self.intake.close_partition(partition, flush=True)
        self.evict(partition)
        self._update()

    async def heartbeat(self) -> None:
        """One round: heartbeat, renew and rebalance (every ``leases.heartbeat_s``). A round that fails on
        NATS is retried on the next heartbeat: leases outlive one missed round."""
        try:
            await self.leases.tick()
        except (nats.errors.Error, nats.js.errors.Error, TimeoutError) as exc:
            log.warning("partition lease round failed: %s", type(exc).__name__)
        self._update()

    async def report_lag(self) -> None:
        """Set each consuming partition's lag gauge (periodically)."""
        for partition, (reader, _task) in list(self.readers.items()):
            if reader.state is not ReaderState.CONSUMING:
                continue
            with contextlib.suppress(nats.errors.Error, nats.js.errors.Error, TimeoutError):
                # Not yet delivered, plus delivered and waiting to commit.
                lag = await reader.lag() + self.intake.waiting_in(partition)
                metrics.PARTITION_LAG.labels(str(partition)).set(lag)
        self._update()

    async def stop(self) -> None:
        """Hand every partition back at once, so the others need not wait for the leases' TTL."""
        await self.leases.release_all()


def _toggle(event: asyncio.Event, on: bool) -> None:
    if on:
        event.set()
    else:
        event.clear()
