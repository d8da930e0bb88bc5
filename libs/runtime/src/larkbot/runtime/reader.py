"""The offset-in-database partition reader: one partition of a stream, in order, from the resume point
its owner's database records — nothing is acknowledged.

A service whose consumption state is part of its own transactions (the pipeline commits events and each
partition's resume point together) reads a partition through :class:`PartitionReader`:

1. ``handler.prepare(p)`` once (load the partition's state), then ``offsets.open(p)`` — the stream
   sequence to read from;
2. the bootstrap declares the partition's reader consumer at that sequence
   (:func:`.bootstrap.declare_reader`: ``AckPolicy.NONE``, acks would duplicate what the database holds);
3. batches, as soon as anything arrives (:class:`.pull.PullStream`), each checked for a gap in the
   consumer sequence and handed to ``handler.feed(p, records)`` after ``handler.room()`` (back-pressure).

Each batch goes through the middleware chain (:mod:`.chain`): log context → (no span: a batch serves many
traces, its handler draws theirs) → metrics → restart policy → handler. The policy is the one place
outcomes become offset handling:

============================  =============================================================================
handler outcome               offset handling
============================  =============================================================================
returns                       none here: the handler commits the records' offsets with what they produced
any exception                 the partition restarts: ``offsets.abandon(p)`` forgets what was handed over
                              and not committed, and after a backoff (reset by progress) it is read again
                              from ``offsets.open(p)`` — never skipping ahead
============================  =============================================================================

The records of a batch are the handler's: one it cannot take (undecodable, poison) it dead-letters itself
(:mod:`.deadletter`) and commits past; a dead-letter write that fails raises, so the partition restarts
and the record is read — and recorded — again. NATS failures, a deleted consumer and a gap restart too.

An observer (``observer(reader)``) is told whenever :attr:`PartitionReader.state` or
:attr:`PartitionReader.drained` changes: readiness is built on it, and so is "caught up".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

import nats
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from larkbot.canonical.errors import RetryableError

from . import metrics, tracing
from .backoff import Backoff
from .bootstrap import declare_reader
from .chain import Handler, build
from .logs import log_context
from .pull import PullStream

__all__ = [
    "RESTART",
    "Batch",
    "Meter",
    "OffsetStore",
    "PartitionHandler",
    "PartitionReader",
    "ReaderState",
    "Record",
    "SequenceGap",
    "handler_of",
    "read_subject",
    "restart_policy",
]

log = logging.getLogger(__name__)


#: Restarts of a failing partition: 0.5 s doubling to 30 s, reset by progress.
RESTART = Backoff(initial_s=0.5, max_s=30.0, factor=2.0, jitter=0.25)


class ReaderState(StrEnum):
    LOADING = "loading"
    CONSUMING = "consuming"
    RESTARTING = "restarting"


class SequenceGap(RetryableError):
    """The consumer skipped a delivery: reading on would apply a later message before an earlier one."""


class Record:
    """One message of a partition as the reader hands it over."""

    __slots__ = ("data", "headers", "stream_seq", "subject")

    def __init__(self, stream_seq: int, subject: str, data: bytes, headers: dict[str, str] | None) -> None:
        self.stream_seq = stream_seq
        self.subject = subject
        self.data = data
        self.headers = headers


class OffsetStore(Protocol):
    async def open(self, partition: int) -> int:
        """The stream sequence to read ``partition`` from (1: its beginning)."""
        ...

    async def abandon(self, partition: int) -> None:
        """Forget what was handed over and not committed (the partition is read again)."""
        ...


class PartitionHandler(Protocol):
    async def prepare(self, partition: int) -> None:
        """Once, before the partition is first opened (load what it needs)."""
        ...

    async def room(self) -> None:
        """Return when another batch may be fed (back-pressure on every reader)."""
        ...

    async def feed(self, partition: int, records: Sequence[Record]) -> None:
        """Take a batch of ``partition``'s records, in stream order."""
        ...


class Meter:
    """A reader's metric series, labelled once (a batch is the hot path: ``labels()`` costs ~3 µs)."""

    __slots__ = ("name", "outcomes", "seconds")

    def __init__(self, name: str) -> None:
        self.name = name
        self.seconds = metrics.HANDLE_SECONDS.labels(name)
        self.outcomes = {outcome: metrics.MESSAGES.labels(name, outcome) for outcome in ("fed", "restart")}


@dataclass(slots=True)
class Batch:
    """One batch as the reader's chain sees it."""

    meter: Meter
    partition: int
    records: list[Record] = field(default_factory=list)
    outcome: str = "fed"

    def context(self) -> AbstractContextManager[None]:
        return log_context(consumer=self.meter.name, partition=self.partition)

    def span(self) -> AbstractContextManager[Any]:
        return tracing.NO_SPAN

    def observe(self, seconds: float) -> None:
        self.meter.seconds.observe(seconds)
        self.meter.outcomes[self.outcome].inc(len(self.records))


async def restart_policy(handler: Handler[Batch], batch: Batch) -> None:
    """Any failure restarts the partition (see the module docstring); recorded here, raised to the loop."""
    try:
        await handler(batch)
    except Exception:
        batch.outcome = "restart"
        raise


def _sequences(msg: Msg) -> tuple[int, int]:
    """Stream and consumer sequence from the reply subject (``$JS.ACK.<stream>.<consumer>.<delivered>.
    <stream seq>.<consumer seq>.<ts>.<pending>``), without building nats-py's metadata objects."""
    tokens = msg.reply.split(".")
    if len(tokens) == 9:
        return int(tokens[5]), int(tokens[6])
    meta = msg.metadata
    return meta.sequence.stream, meta.sequence.consumer


class PartitionReader:
    """Reads partition ``partition`` of ``stream`` (stored subjects ``filter_subject``) through the reader
    consumer ``consumer`` (unique to this replica)."""

    def __init__(
        self,
        js: JetStreamContext,
        stream: str,
        partition: int,
        filter_subject: str,
        consumer: str,
        handler: PartitionHandler,
        offsets: OffsetStore,
        *,
        name: str,
        observer: Callable[[PartitionReader], None] = lambda _reader: None,
        batch: int = 500,
        fetch_timeout_s: float = 1.0,
        restart: Backoff = RESTART,
        on_restart: Callable[[BaseException], None] = lambda _exc: None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.js = js
        self.stream = stream
        self.partition = partition
        self.filter_subject = filter_subject
        self.consumer = consumer
        self.handler = handler
        self.offsets = offsets
        self.name = name
        self.observer = observer
        self.batch = batch
        self.fetch_timeout_s = fetch_timeout_s
        self.restart = restart
        self.on_restart = on_restart
        self.sleep = sleep
        self.jitter = jitter
        self.handle = build(handler_of(handler), restart_policy)
        self._meter = Meter(name)
        self.state = ReaderState.LOADING
        #: The last fetch came back empty: everything stored in the partition has been handed over.
        self.drained = False
        self.restarts = 0
        self._progressed = False

    def _set(self, state: ReaderState) -> None:
        self.state = state
        self.observer(self)

    async def run(self) -> None:
        """Read until cancelled (the partition was released); restarts on any failure."""
        failures = 0
        prepared = False
        try:
            while True:
                try:
                    if not prepared:
                        await self.handler.prepare(self.partition)
                        prepared = True
                    self._progressed = False
                    await self._consume(await self.offsets.open(self.partition))
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self.restarts += 1
                    failures = 1 if self._progressed else failures + 1
                    delay = self.restart.delay(failures, self.jitter())
                    self.drained = False
                    self._set(ReaderState.RESTARTING)
                    self.on_restart(exc)
                    # A transient failure (a server of a cluster lost, the reader's consumer with it) is
                    # what restarting is for: one line. Anything else is a defect worth its traceback.
                    transient = isinstance(exc, RetryableError)
                    log.log(
                        logging.WARNING if transient else logging.ERROR,
                        "partition %d failed (%s: %s); restarting from its resume point in %.1f s",
                        self.partition,
                        type(exc).__name__,
                        exc,
                        delay,
                        exc_info=None if transient else exc,
                    )
                    await self.offsets.abandon(self.partition)
                    await self.sleep(delay)
        finally:
            with contextlib.suppress(nats.errors.Error, nats.js.errors.Error, TimeoutError):
                await self.js.delete_consumer(self.stream, self.consumer)

    async def _consume(self, resume: int) -> None:
        await declare_reader(self.js, self.stream, self.consumer, self.filter_subject, start_seq=resume)
        pull = PullStream(
            self.js, self.stream, self.consumer, batch=self.batch, expires_s=self.fetch_timeout_s
        )
        await pull.start()
        self._set(ReaderState.CONSUMING)
        expected = 1
        try:
            while True:
                await self.handler.room()
                # Hands over what arrived as soon as anything did (larkbot.runtime.pull). A deleted
                # consumer raises.
                msgs = await pull.next_batch(self.fetch_timeout_s)
                if not msgs:
                    if not self.drained:
                        self.drained = True
                        self.observer(self)
                    continue
                self.drained = False
                batch = Batch(self._meter, self.partition)
                records = batch.records
                for msg in msgs:
                    stream_seq, consumer_seq = _sequences(msg)
                    if consumer_seq != expected:
                        raise SequenceGap(f"expected delivery {expected}, got {consumer_seq}")
                    expected += 1
                    records.append(Record(stream_seq, msg.subject, msg.data, msg.headers))
                await self.handle(batch)
                self._progressed = True
        finally:
            await pull.close()

    async def lag(self) -> int:
        """Messages of the partition not yet delivered to this reader."""
        info = await self.js.consumer_info(self.stream, self.consumer)
        return int(info.num_pending or 0)


def handler_of(handler: PartitionHandler) -> Handler[Batch]:
    async def feed(batch: Batch) -> None:
        await handler.feed(batch.partition, batch.records)

    return feed


async def read_subject(
    js: JetStreamContext, stream: str, subject: str, count: int, *, timeout_s: float = 10.0
) -> list[bytes]:
    """The first ``count`` messages stored on ``subject`` of ``stream``, in order (an object's chunks):
    a reader consumer declared for this one read and deleted after it. :class:`TimeoutError` when they
    do not all arrive within ``timeout_s`` of the last one; :class:`SequenceGap` if one is skipped."""
    name = f"read-{secrets.token_hex(8)}"
    await declare_reader(js, stream, name, subject, inactive_threshold_s=max(10.0, timeout_s))
    pull = PullStream(js, stream, name, batch=min(count, 256), expires_s=timeout_s)
    await pull.start()
    out: list[bytes] = []
    try:
        while len(out) < count:
            msgs = await pull.next_batch(timeout_s)
            if not msgs:
                raise TimeoutError(f"{subject}: {len(out)} of {count} messages arrived")
            for msg in msgs:
                if _sequences(msg)[1] != len(out) + 1:
                    raise SequenceGap(f"{subject}: expected delivery {len(out) + 1}")
                out.append(msg.data)
    finally:
        await pull.close()
        with contextlib.suppress(nats.errors.Error, nats.js.errors.Error, TimeoutError):
            await js.delete_consumer(stream, name)
    return out
