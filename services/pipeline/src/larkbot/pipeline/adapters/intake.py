"""From delivered ``EVENTS`` messages to committed events: admission (media) → commit → apply → publish.

Partition readers (:mod:`.partitions`) hand over each partition's messages in stream order with
:meth:`Intake.feed`: it decodes them (an undecodable message gets a dead-letter record), drops Feishu events
of chats that are not configured, queues the rest per chat and submits their media jobs. The *commit* loop
takes every chat's contiguous ready prefix and commits it in one transaction together with each
partition's resume point (:func:`..core.offsets.resume_points`), then applies the committed events to the
resident projections and publishes one ``ContextUpdate`` per changed chat. Nothing is acknowledged: the
database's resume point is the only consumption state. The *tick* loop re-submits media jobs whose backoff
ran out or which got no answer, and refreshes gauges. Media results arrive on a core subscription
(:class:`larkbot.runtime.subscribe.Subscription`: one that does not decode is logged and counted there).

A database failure is retried in-process by the runtime's retry policy (``retry.background``: exponential
with jitter, never giving up — a commit cannot be skipped); the partition readers keep reading until the
admission queue is full.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import Counter
from collections.abc import Callable, Sequence

from larkbot.canonical.codec import decode, decode_as
from larkbot.canonical.errors import ContractError
from larkbot.canonical.events import EVENT_ADAPTER, CanonicalEvent, EditEvent, MessageEvent
from larkbot.canonical.media import MediaJob, MediaResult
from larkbot.canonical.names import Platform, media_job_subject
from larkbot.runtime import tracing
from larkbot.runtime.backoff import Failure, RetryPolicy
from larkbot.runtime.bus import Bus, BusUnavailable
from larkbot.runtime.deadletter import DeadLetterFailed, DeadLetters
from larkbot.runtime.reader import Record
from larkbot.runtime.retry import retrying
from larkbot.runtime.subscribe import Subscription

from .. import metrics
from ..core.admission import NO_POLICY, Admission, MediaPolicy, Pending
from ..core.offsets import Ticket, resume_points
from ..core.repeats import classify
from ..errors import DatabaseUnavailable, PartitionNotOpen
from ..observer import UNOBSERVED, PipelineObserver
from . import deadletters
from .chats import ResidentChats
from .repository import EventRepository
from .traces import CommitTraces
from .writes import NewEvent, Stored

log = logging.getLogger(__name__)

#: Results of media workers (core NATS for now: see docs/pipeline.md, "media results").
MEDIA_RESULTS = "media.results.>"
#: How often due media jobs are re-submitted and the gauges refreshed.
TICK_S = 0.5


class Intake:
    def __init__(
        self,
        bus: Bus,
        chats: ResidentChats,
        repo: EventRepository,
        *,
        commit_retry: RetryPolicy,
        media_enabled: bool = True,
        max_waiting: int = 5000,
        retry_base_s: float = 2.0,
        job_timeout_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        observer: PipelineObserver = UNOBSERVED,
        media_policy: Callable[[str, str], MediaPolicy] = lambda _platform, _chat_id: NO_POLICY,
    ) -> None:
        self.bus = bus
        #: The chat's media settings and routed endpoints, carried by its media jobs.
        self.media_policy = media_policy
        self.dead_letters = DeadLetters(bus.js)
        self.chats = chats
        self.repo = repo
        self.commit_retry = commit_retry
        self.media_enabled = media_enabled
        self.max_waiting = max_waiting
        self.clock = clock
        self.admission: Admission[Ticket] = Admission(retry_base_s=retry_base_s, job_timeout_s=job_timeout_s)
        self.stopping = asyncio.Event()
        self._wake = asyncio.Event()
        self._room = asyncio.Event()
        self.results = Subscription(bus, MEDIA_RESULTS, _decode_result, self._on_result)
        self.database_ok = True
        #: partition → highest stream sequence handed over (open partitions only)
        self.read: dict[int, int] = {}
        #: partition → the resume point the database holds
        self.persisted: dict[int, int] = {}
        self._submissions: dict[str, int] = {}
        # Submissions are deduplicated per process only: after a restart or a hand-over the same job must
        # reach the workers again, within the MEDIA stream's duplicate window too.
        self._instance = secrets.token_hex(4)
        #: Messages fully handled: committed, duplicate, archived, dropped or dead-lettered.
        self.handled = 0
        #: Told whenever ``handled`` grows.
        self.observer = observer

    # -- partitions ------------------------------------------------------------------------------------
    async def open_partition(self, partition: int) -> int:
        """Start taking ``partition``'s messages; returns the stream sequence to read from."""
        async with self.chats.lock:
            self._forget(partition)
            resume = await self.repo.resume_seq(partition) or 1
            self.read[partition] = resume - 1
            self.persisted[partition] = resume
        return resume

    async def close_partition(self, partition: int, *, flush: bool = False) -> None:
        """Abandon ``partition``'s uncommitted messages. Returns after a commit in progress (which may hold
        some of its events) has finished, so nothing of the partition is committed afterwards. With
        ``flush`` (a clean hand-over, its reader already stopped) what is ready is committed first, so the
        next owner need not read it again."""
        if flush:
            await self.flush()
        async with self.chats.lock:
            self._forget(partition)

    def _forget(self, partition: int) -> None:
        self.admission.drop(lambda ticket: ticket.partition == partition)
        self.read.pop(partition, None)
        self.persisted.pop(partition, None)
        self._room.set()

    async def room(self) -> None:
        """Wait while the admission queue is full (back-pressure on every reader)."""
        while len(self.admission) >= self.max_waiting and not self.stopping.is_set():
            self._room.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._room.wait(), timeout=1.0)

    async def feed(self, partition: int, messages: Sequence[Record]) -> None:
        """Take a batch of ``partition``'s messages, in stream order."""
        if partition not in self.read:
            raise PartitionNotOpen(f"partition {partition} is not open")
        jobs: list[tuple[MediaJob, str | None]] = []
        counts: Counter[tuple[str, str]] = Counter()
        now = self.clock()
        read_ns = time.time_ns() if tracing.enabled() else 0
        for message in messages:
            try:
                event = decode_as(message.data, EVENT_ADAPTER, message.headers)
            except ContractError as exc:
                await deadletters.undecodable(
                    self.dead_letters, message.data, message.headers, message.subject, message.stream_seq, exc
                )
                counts["unknown", "dead_lettered"] += 1
                self.read[partition] = message.stream_seq
                continue
            chat = (event.platform.value, event.chat_id)
            resident = self.chats.is_resident(*chat)
            if not resident and event.platform is Platform.FEISHU:
                # Feishu: private chats and unconfigured groups are dropped without archiving.
                counts[event.kind, "dropped"] += 1
            elif (waiting := self.admission.find(chat, event.dedup_key)) is not None:
                # The key of an event still waiting: the waiting copy stays the one to commit.
                repeat = classify(waiting.event, event)
                if repeat == "conflict":
                    await deadletters.conflict(
                        self.dead_letters, message.data, message.headers, message.stream_seq, event, None
                    )
                counts[event.kind, repeat] += 1
            else:
                trace = tracing.trace_of(message.headers)
                ticket = Ticket(partition, message.stream_seq, message.data, trace, read_ns)
                admitted = self.admission.admit(
                    chat,
                    event,
                    ticket,
                    now,
                    transforms=resident and self.media_enabled,
                    # Routes are matched only for events that may need a transform.
                    policy=self.media_policy(*chat) if _has_attachments(event) else NO_POLICY,
                )
                jobs += ((job, trace) for job in admitted)
            self.read[partition] = message.stream_seq
        for (kind, outcome), n in counts.items():
            metrics.EVENTS.labels(kind, outcome).inc(n)
            self.handled += n
        if counts:
            self.observer.events_handled(self.handled)
        for job, trace in jobs:
            # The job continues the trace of the event it is for (the media worker's span is in it).
            with tracing.within(trace):
                await self._submit(job)
        self._wake.set()

    # -- loops -----------------------------------------------------------------------------------------
    async def start_results(self) -> None:
        await self.results.start()

    async def run_commit(self) -> None:
        """Flush whenever something arrives. Batches grow by themselves under load: what is fed while a
        commit is in progress goes into the next one. Before flushing the loop yields once, so that
        readers woken at the same moment feed theirs into the same batch. (It used to wait 5 ms first when
        the previous flush was recent: with the readers streaming their messages that bought no throughput
        — 50k events over 200 chats, ~9,000 events/s with and without — and it cost a message arriving
        soon after another those 5 ms.)"""
        while True:
            await self._wake.wait()
            await asyncio.sleep(0)
            self._wake.clear()
            await self.flush()
            if self.stopping.is_set():
                return

    async def tick(self) -> None:
        """Re-submit the media jobs that are due and refresh the gauges (every :data:`TICK_S`)."""
        for job in self.admission.due(self.clock()):
            await self._submit(job, resubmit=True)
        metrics.BLOCKED_CHATS.set(len(self.admission.blocked()))
        metrics.MEDIA_WAITING.set(len(self.admission))

    async def stop(self) -> None:
        self.stopping.set()
        self._wake.set()
        self._room.set()
        await self.results.stop()

    def waiting_in(self, partition: int) -> int:
        return sum(1 for pending in self.admission.waiting() if pending.token.partition == partition)

    # -- media -----------------------------------------------------------------------------------------
    async def _submit(self, job: MediaJob, *, resubmit: bool = False) -> None:
        count = self._submissions.get(job.job_id, 0) + 1
        self._submissions[job.job_id] = count
        try:
            await self.bus.publish(
                media_job_subject(job.transform), job, msg_id=f"{job.job_id}:{self._instance}:{count}"
            )
        except BusUnavailable as exc:
            # The job times out in the admission queue and is submitted again.
            log.warning("media job not submitted: %s", exc)
            return
        metrics.MEDIA_JOBS.labels(job.transform, "resubmitted" if resubmit else "submitted").inc()

    async def _on_result(self, result: MediaResult) -> None:
        outcome = "ok" if result.ok else ("failed" if result.error and result.error.retryable else "rejected")
        metrics.MEDIA_JOBS.labels(result.transform, outcome).inc()
        if self.admission.result(result, self.clock()):
            self._wake.set()

    # -- commit ----------------------------------------------------------------------------------------
    async def flush(self) -> None:
        async with self.chats.lock:
            ready = self.admission.take_ready()
            # Computed before any await: what is read from now on lies beyond these points.
            points = resume_points(self.read, (p.token for p in self.admission.waiting()))
            offsets = {p: seq for p, seq in points.items() if self.persisted.get(p) != seq}
            if not ready and not offsets:
                return
            self._room.set()
            batch: list[NewEvent] = []
            alts: list[tuple[str, str]] = []
            for pending in ready:
                event, pairs = pending.completed()
                ticket = pending.token
                verbatim = ticket.data if event is pending.event else None
                batch.append(NewEvent(event, ticket.stream_seq, verbatim))
                alts += pairs
            # An evicted chat is rebuilt before its events are committed: the database then holds what
            # its projection had, and the batch is applied on top.
            await self.chats.wake((item.event.platform.value, item.event.chat_id) for item in batch)
            started = time.perf_counter()
            started_ns = time.time_ns()
            ids = await self._commit(batch, alts, offsets)
            committed_ns = time.time_ns()
            self.persisted.update((p, seq) for p, seq in offsets.items() if p in self.read)
            if not batch:
                return
            metrics.COMMIT_SECONDS.observe(time.perf_counter() - started)
            metrics.BATCH_EVENTS.observe(len(batch))
            self.chats.alt_texts.update(alts)
            committed: list[tuple[int, CanonicalEvent]] = []
            last_id: dict[tuple[str, str], int] = {}
            counts: Counter[tuple[str, str]] = Counter()
            conflicts: list[tuple[Ticket, CanonicalEvent, int]] = []
            traces = CommitTraces(len(batch))
            for pending, item, event_id in zip(ready, batch, ids, strict=True):
                event = item.event
                if isinstance(event_id, Stored):
                    # The key is taken: a redelivery, the platform's echo of a self-sent copy, or a
                    # conflict (core.repeats). Read and compared only when a key was taken.
                    repeat = classify(event_id.event, event)
                    counts[event.kind, repeat] += 1
                    if repeat == "conflict":
                        conflicts.append((pending.token, event, event_id.event_id))
                    continue
                if self.chats.ensure(event.platform, event.chat_id) is None:
                    counts[event.kind, "archived"] += 1
                    continue
                counts[event.kind, "committed"] += 1
                committed.append((event_id, event))
                key = (event.platform.value, event.chat_id)
                last_id[key] = event_id
                traces.add(key, pending.token)
            for (kind, outcome), n in counts.items():
                metrics.EVENTS.labels(kind, outcome).inc(n)
            self.handled += len(batch)
            self.observer.events_handled(self.handled)
            changed = self.chats.apply(committed)
            updates = [
                self.chats.next_update(self.chats.chats[key], ops, last_id.get(key, 0))
                for key, ops in changed.items()
            ]
            carried = traces.spans(changed, (started_ns, committed_ns), (committed_ns, time.time_ns()))
            await self.chats.publish(updates, carried)
            self.chats.segments_changed()
            self.chats.fit(keep=changed)
        for ticket, event, holder in conflicts:
            try:
                await deadletters.conflict(
                    self.dead_letters, ticket.data, None, ticket.stream_seq, event, holder
                )
            except DeadLetterFailed as exc:
                # Committed past it already: the warning above (and the metric) remain its trace.
                log.error("conflict at stream sequence %d not recorded: %s", ticket.stream_seq, exc)
        for pending in ready:
            await self._report_rejections(pending)

    async def _commit(
        self, batch: list[NewEvent], alts: list[tuple[str, str]], offsets: dict[int, int]
    ) -> list[int | Stored]:
        def retried(_failure: Failure, _attempts: int, wait: float, exc: BaseException | None) -> None:
            self.database_ok = False
            log.warning("commit failed, retrying in %.2f s: %s", wait, exc)

        ids: list[int | Stored] = []
        async for attempt in retrying(self.commit_retry, _database_failure, on_retry=retried):
            with attempt:
                ids = await self.repo.commit(batch, alts, offsets, at_ms=int(time.time() * 1000))
        self.database_ok = True
        return ids

    async def _report_rejections(self, pending: Pending[Ticket]) -> None:
        """A non-retryable media failure let the event commit without that transform: record it."""
        for result in pending.results.values():
            if result.ok or result.error is None:
                continue
            try:
                await deadletters.media_rejection(
                    self.dead_letters, pending.token.data, result.job_id, result.error
                )
            except DeadLetterFailed as exc:
                log.error("media rejection not recorded: %s", exc)


def _decode_result(data: bytes, headers: dict[str, str]) -> MediaResult:
    return decode(data, MediaResult, headers)


def _database_failure(exc: BaseException) -> Failure | None:
    """A commit is retried while the database is unavailable; anything else is final."""
    return Failure.TRANSIENT if isinstance(exc, DatabaseUnavailable) else None


def _has_attachments(event: CanonicalEvent) -> bool:
    return isinstance(event, MessageEvent | EditEvent) and bool(event.attachments)
