"""Partition ownership and in-order reading of ``EVENTS`` from the resume point the database records.

``EVENTS`` stores ``events.<platform>.<chat>`` as ``events.<p>.<platform>.<chat>`` with ``p`` =
``names.partition_of(platform, chat)``. Replicas share the partitions through
:class:`larkbot.runtime.partitions.PartitionLeases` (group ``pipeline``): on acquiring a partition a
:class:`PartitionReader` loads the partition's resident chats, reads its resume point and creates an
ephemeral consumer starting there (``DeliverPolicy.BY_START_SEQUENCE``, ``AckPolicy.NONE``: acks would
duplicate what the database already records). On release the reader is cancelled and the partition's
uncommitted messages are abandoned after any commit in progress; the next owner resumes from the
database. Any unexpected failure (NATS, the database, a gap in the consumer sequence, a dead-letter record
that cannot be written) restarts the partition from its resume point with backoff — never skipping ahead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import nats
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.kv import KeyValue

from larkbot.canonical.names import (
    CONSUMER_PIPELINE,
    KV_LEASES,
    PARTITIONS,
    STREAM_EVENTS,
    partition_consumer,
    partition_filter,
)
from larkbot.runtime.bus import Bus
from larkbot.runtime.partitions import PartitionLeases
from larkbot.runtime.pull import PullStream

from .. import metrics
from .intake import Delivered, Intake

log = logging.getLogger(__name__)

#: Lease group in the ``leases`` bucket (keys ``pipeline.p<NNN>``, ``pipeline.members.<replica>``).
GROUP = "pipeline"


def replica_id() -> str:
    """Unique per process; usable as a KV key token, a subject token and a consumer name."""
    host = re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname())[:40] or "host"
    return f"{host}-{os.getpid()}-{secrets.token_hex(3)}"


def lease_key(partition: int) -> str:
    """The lease of ``partition`` (the key format of ``PartitionLeases``)."""
    return f"{GROUP}.p{partition:03d}"


class SequenceGap(Exception):
    """The consumer skipped a delivery: reading on would apply a later event before an earlier one."""


def _sequences(msg: Msg) -> tuple[int, int]:
    """Stream and consumer sequence from the reply subject (``$JS.ACK.<stream>.<consumer>.<delivered>.
    <stream seq>.<consumer seq>.<ts>.<pending>``), without building nats-py's metadata objects."""
    tokens = msg.reply.split(".")
    if len(tokens) == 9:
        return int(tokens[5]), int(tokens[6])
    meta = msg.metadata
    return meta.sequence.stream, meta.sequence.consumer


class PartitionReader:
    def __init__(
        self,
        bus: Bus,
        intake: Intake,
        load: Callable[[int], Awaitable[int]],
        partition: int,
        replica: str,
        *,
        batch: int = 500,
        fetch_timeout_s: float = 1.0,
        restart_base_s: float = 0.5,
        restart_max_s: float = 30.0,
        on_state: Callable[[], None] = lambda: None,
    ) -> None:
        self.bus = bus
        self.intake = intake
        self.load = load
        self.partition = partition
        self.consumer = f"{partition_consumer(CONSUMER_PIPELINE, partition)}-{replica}"
        self.batch = batch
        self.fetch_timeout_s = fetch_timeout_s
        self.restart_base_s = restart_base_s
        self.restart_max_s = restart_max_s
        self.on_state = on_state
        self.state = "loading"
        #: The last fetch came back empty: everything stored in the partition has been handed over.
        self.idle = False
        self.restarts = 0
        self._progressed = False

    def _set(self, state: str) -> None:
        self.state = state
        self.on_state()

    async def run(self) -> None:
        delay = self.restart_base_s
        loaded = False
        try:
            while True:
                try:
                    if not loaded:
                        await self.load(self.partition)
                        loaded = True
                    self._progressed = False
                    resume = await self.intake.open_partition(self.partition)
                    await self._consume(resume)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self.restarts += 1
                    metrics.PARTITION_RESTARTS.inc()
                    if self._progressed:
                        delay = self.restart_base_s
                    self.idle = False
                    self._set("restarting")
                    log.error(
                        "partition %d failed (%s: %s); restarting from its resume point in %.1f s",
                        self.partition,
                        type(exc).__name__,
                        exc,
                        delay,
                        exc_info=exc,
                    )
                    await self.intake.close_partition(self.partition)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, self.restart_max_s)
        finally:
            with contextlib.suppress(nats.errors.Error, nats.js.errors.Error, TimeoutError):
                await self.bus.js.delete_consumer(STREAM_EVENTS, self.consumer)

    async def _consume(self, resume: int) -> None:
        js = self.bus.js
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await js.delete_consumer(STREAM_EVENTS, self.consumer)
        await js.add_consumer(
            STREAM_EVENTS,
            ConsumerConfig(
                name=self.consumer,
                deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                opt_start_seq=resume,
                ack_policy=AckPolicy.NONE,
                filter_subject=partition_filter("events", self.partition),
                # A replica that dies leaves its consumers behind; the server removes them.
                inactive_threshold=120.0,
            ),
        )
        pull = PullStream(js, STREAM_EVENTS, self.consumer, batch=self.batch, expires_s=self.fetch_timeout_s)
        await pull.start()
        self._set("consuming")
        expected = 1
        try:
            while True:
                await self.intake.room()
                # Hands over what arrived as soon as anything did (nats-py's fetch could hold a message
                # until its batch filled or expired: larkbot.runtime.pull). A deleted consumer raises.
                msgs = await pull.next_batch(self.fetch_timeout_s)
                if not msgs:
                    if not self.idle:
                        self.idle = True
                        self.on_state()
                    continue
                self.idle = False
                delivered: list[Delivered] = []
                for msg in msgs:
                    stream_seq, consumer_seq = _sequences(msg)
                    if consumer_seq != expected:
                        raise SequenceGap(f"expected delivery {expected}, got {consumer_seq}")
                    expected += 1
                    delivered.append(Delivered(stream_seq, msg.subject, msg.data, msg.headers))
                await self.intake.feed(self.partition, delivered)
                self._progressed = True
        finally:
            await pull.close()

    async def lag(self) -> int:
        """Messages of the partition not yet committed: not yet delivered, plus delivered and waiting."""
        info = await self.bus.js.consumer_info(STREAM_EVENTS, self.consumer)
        return int(info.num_pending or 0) + self.intake.waiting_in(self.partition)


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
        reader_options: dict[str, Any] | None = None,
    ) -> None:
        self.bus = bus
        self.kv = kv
        self.intake = intake
        self.load = load
        self.evict = evict
        self.replica = replica
        self.reader_options = reader_options or {}
        self.readers: dict[int, tuple[PartitionReader, asyncio.Task[None]]] = {}
        self.leases = PartitionLeases(
            kv,
            GROUP,
            replica,
            PARTITIONS,
            on_acquire=self._acquire,
            on_release=self._release,
            heartbeat_s=heartbeat_s,
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
        bucket: str = KV_LEASES,
        replica: str | None = None,
        reader_options: dict[str, Any] | None = None,
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
            replica or replica_id(),
            heartbeat_s=heartbeat,
            reader_options=reader_options,
        )

    def owned(self) -> list[int]:
        return sorted(self.readers)

    def serving(self, partition: int) -> bool:
        entry = self.readers.get(partition)
        return entry is not None and entry[0].state == "consuming"

    def _update(self) -> None:
        settled = self.leases.settled.is_set()
        serving = settled and all(reader.state == "consuming" for reader, _ in self.readers.values())
        _toggle(self.serving_all, serving)

    def caught_up(self) -> bool:
        """Every owned partition is consumed, was read to its end, and nothing waits to commit."""
        self._update()
        idle = all(reader.idle for reader, _ in self.readers.values())
        return self.serving_all.is_set() and idle and len(self.intake.admission) == 0

    async def _acquire(self, partition: int) -> None:
        reader = PartitionReader(
            self.bus,
            self.intake,
            self.load,
            partition,
            self.replica,
            on_state=self._update,
            **self.reader_options,
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

    async def run(self, stopping: asyncio.Event) -> None:
        """Heartbeat, renew and rebalance until ``stopping``. A round that fails on NATS is retried on
        the next heartbeat: leases outlive one missed round."""
        while not stopping.is_set():
            try:
                await self.leases.tick()
            except (nats.errors.Error, nats.js.errors.Error, TimeoutError) as exc:
                log.warning("partition lease round failed: %s", type(exc).__name__)
            self._update()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), self.leases.heartbeat_s)

    async def report_lag(self, stopping: asyncio.Event, interval_s: float = 5.0) -> None:
        while not stopping.is_set():
            for partition, (reader, _task) in list(self.readers.items()):
                if reader.state != "consuming":
                    continue
                with contextlib.suppress(nats.errors.Error, nats.js.errors.Error, TimeoutError):
                    metrics.PARTITION_LAG.labels(str(partition)).set(await reader.lag())
            self._update()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), interval_s)

    async def stop(self) -> None:
        """Hand every partition back at once, so the others need not wait for the leases' TTL."""
        await self.leases.release_all()


def _toggle(event: asyncio.Event, on: bool) -> None:
    if on:
        event.set()
    else:
        event.clear()
