"""Consumption of ``EVENTS``: fetch → admission (media) → commit → apply → publish → ack.

Three loops share one admission queue:

- *fetch* pulls batches from the durable ``pipeline`` consumer, decodes them (an undecodable message goes
  through the runtime's error policy: dead-letter record, then ``term``), drops Feishu events of chats that
  are not configured, queues the rest per chat and submits their media jobs;
- *commit* takes every chat's contiguous ready prefix, commits it in one transaction, applies the committed
  events to the resident projections, publishes one ``ContextUpdate`` per changed chat, and only then acks;
- *tick* re-submits media jobs whose backoff ran out or which got no answer, keeps waiting messages alive
  (``in_progress``, so ``ack_wait`` does not redeliver them) and reports consumer lag.

A database failure is retried in-process with backoff, never nak'ed: JetStream would redeliver the nak'ed
message after later messages of the same chat and break per-chat order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

import nats
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from larkbot.canonical.codec import decode, decode_as
from larkbot.canonical.errors import ContractError
from larkbot.canonical.events import EVENT_ADAPTER, CanonicalEvent
from larkbot.canonical.media import MediaJob, MediaResult
from larkbot.canonical.names import (
    CONSUMER_PIPELINE,
    HEADER_DL_ERROR,
    HEADER_DL_REASON,
    HEADER_MSG_ID,
    STREAM_EVENTS,
    STREAM_MEDIA,
    Platform,
    dead_letter_subject,
    media_job_subject,
)
from larkbot.runtime import metrics as runtime_metrics
from larkbot.runtime.bus import Bus, BusUnavailable
from larkbot.runtime.consume import Delivery, ErrorPolicy

from .. import metrics
from ..core.admission import Admission, Pending
from .chats import ResidentChats
from .repository import DatabaseUnavailable, EventRepository, NewEvent

log = logging.getLogger(__name__)

#: Results of media workers (core NATS for now: see docs/pipeline.md, "media results").
MEDIA_RESULTS = "media.results.>"


def _raiser(exc: Exception) -> Callable[[Delivery], Awaitable[None]]:
    async def handler(_delivery: Delivery) -> None:
        raise exc

    return handler


class Intake:
    def __init__(
        self,
        bus: Bus,
        chats: ResidentChats,
        repo: EventRepository,
        *,
        media_enabled: bool = True,
        batch: int = 200,
        fetch_timeout_s: float = 1.0,
        max_waiting: int = 5000,
        retry_base_s: float = 2.0,
        job_timeout_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.bus = bus
        self.chats = chats
        self.repo = repo
        self.media_enabled = media_enabled
        self.batch = batch
        self.fetch_timeout_s = fetch_timeout_s
        self.max_waiting = max_waiting
        self.clock = clock
        self.admission: Admission[Delivery] = Admission(
            retry_base_s=retry_base_s, job_timeout_s=job_timeout_s
        )
        self.policy = ErrorPolicy(bus.js)
        self.stopping = asyncio.Event()
        self._wake = asyncio.Event()
        self._room = asyncio.Event()
        self._results: Subscription | None = None
        self.database_ok = True
        #: Set when a fetch came back empty with nothing waiting: everything in the stream is processed.
        self.caught_up = asyncio.Event()
        self._submissions: dict[str, int] = {}

    # -- loops -----------------------------------------------------------------------------------------
    async def start_results(self) -> None:
        self._results = await self.bus.nc.subscribe(MEDIA_RESULTS, cb=self._on_result)
        await self.bus.nc.flush()

    async def run_fetch(self) -> None:
        sub = await self.bus.js.pull_subscribe_bind(CONSUMER_PIPELINE, stream=STREAM_EVENTS)
        try:
            while not self.stopping.is_set():
                if len(self.admission) >= self.max_waiting:
                    self._room.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._room.wait(), timeout=1.0)
                    continue
                try:
                    msgs = await sub.fetch(self.batch, timeout=self.fetch_timeout_s)
                except (nats.errors.TimeoutError, TimeoutError):
                    if len(self.admission) == 0:
                        self.caught_up.set()
                    continue
                except (nats.errors.ConnectionClosedError, nats.errors.ConnectionDrainingError):
                    break
                self.caught_up.clear()
                for msg in msgs:
                    await self._intake(Delivery.of(msg))
                self._wake.set()
        finally:
            with contextlib.suppress(nats.errors.Error):
                await sub.unsubscribe()
            self._wake.set()

    async def run_commit(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self.flush()
            if self.stopping.is_set():
                return

    async def run_tick(self, interval_s: float = 0.5, keepalive_s: float = 10.0) -> None:
        last_keepalive = last_lag = self.clock()
        while not self.stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), timeout=interval_s)
            now = self.clock()
            for job in self.admission.due(now):
                await self._submit(job, resubmit=True)
            blocked = self.admission.blocked()
            metrics.BLOCKED_CHATS.set(len(blocked))
            metrics.MEDIA_WAITING.set(len(self.admission))
            if now - last_keepalive >= keepalive_s:
                last_keepalive = now
                for pending in self.admission.waiting():
                    with contextlib.suppress(nats.errors.Error):
                        await pending.token.msg.in_progress()
            if now - last_lag >= 5.0:
                last_lag = now
                with contextlib.suppress(nats.errors.Error, TimeoutError):
                    info = await self.bus.js.consumer_info(STREAM_EVENTS, CONSUMER_PIPELINE)
                    runtime_metrics.CONSUMER_PENDING.labels(CONSUMER_PIPELINE).set(info.num_pending or 0)
                    runtime_metrics.CONSUMER_ACK_PENDING.labels(CONSUMER_PIPELINE).set(
                        info.num_ack_pending or 0
                    )

    async def stop(self) -> None:
        self.stopping.set()
        self._wake.set()
        self._room.set()
        if self._results is not None:
            with contextlib.suppress(nats.errors.Error):
                await self._results.unsubscribe()
            self._results = None

    # -- intake ----------------------------------------------------------------------------------------
    async def _intake(self, delivery: Delivery) -> None:
        try:
            event = decode_as(delivery.data, EVENT_ADAPTER, delivery.headers)
        except ContractError as exc:
            metrics.EVENTS.labels("unknown", "dead_lettered").inc()
            await self.policy(_raiser(exc), delivery)
            return
        chat = (event.platform.value, event.chat_id)
        resident = self.chats.is_resident(*chat)
        if not resident and event.platform is Platform.FEISHU:
            # Feishu: private chats and unconfigured groups are dropped without archiving.
            metrics.EVENTS.labels(event.kind, "dropped").inc()
            await delivery.msg.ack()
            return
        waiting = self.admission.find(chat, event.dedup_key)
        if waiting is not None:
            waiting.token = delivery  # a redelivery of an event still waiting: ack the newest delivery
            return
        jobs = self.admission.admit(
            chat, event, delivery, self.clock(), transforms=resident and self.media_enabled
        )
        for job in jobs:
            await self._submit(job)

    async def _submit(self, job: MediaJob, *, resubmit: bool = False) -> None:
        count = self._submissions.get(job.job_id, 0) + 1
        self._submissions[job.job_id] = count
        try:
            await self.bus.publish(media_job_subject(job.transform), job, msg_id=f"{job.job_id}:{count}")
        except BusUnavailable as exc:
            # The job times out in the admission queue and is submitted again.
            log.warning("media job not submitted: %s", exc)
            return
        metrics.MEDIA_JOBS.labels(job.transform, "resubmitted" if resubmit else "submitted").inc()

    async def _on_result(self, msg: Msg) -> None:
        try:
            result = decode(msg.data, MediaResult, dict(msg.headers or {}))
        except ContractError as exc:
            log.warning("undecodable media result ignored: %s", exc)
            return
        outcome = "ok" if result.ok else ("failed" if result.error and result.error.retryable else "rejected")
        metrics.MEDIA_JOBS.labels(result.transform, outcome).inc()
        if self.admission.result(result, self.clock()):
            self._wake.set()

    # -- commit ----------------------------------------------------------------------------------------
    async def flush(self) -> None:
        ready = self.admission.take_ready()
        if not ready:
            return
        self._room.set()
        completed = [pending.completed() for pending in ready]
        batch = [NewEvent(event, p.token.stream_seq) for (event, _), p in zip(completed, ready, strict=True)]
        alts = [pair for _, pairs in completed for pair in pairs]
        async with self.chats.lock:
            started = time.perf_counter()
            ids = await self._commit(batch, alts, ready)
            metrics.COMMIT_SECONDS.observe(time.perf_counter() - started)
            metrics.BATCH_EVENTS.observe(len(batch))
            self.chats.alt_texts.update(alts)
            committed: list[tuple[int, CanonicalEvent]] = []
            last_id: dict[tuple[str, str], int] = {}
            for item, event_id in zip(batch, ids, strict=True):
                event = item.event
                if event_id is None:
                    metrics.EVENTS.labels(event.kind, "duplicate").inc()
                    continue
                if self.chats.ensure(event.platform, event.chat_id) is None:
                    metrics.EVENTS.labels(event.kind, "archived").inc()
                    continue
                metrics.EVENTS.labels(event.kind, "committed").inc()
                committed.append((event_id, event))
                last_id[(event.platform.value, event.chat_id)] = event_id
            changed = self.chats.apply(committed)
            updates = [
                self.chats.next_update(self.chats.chats[key], ops, last_id.get(key, 0))
                for key, ops in changed.items()
            ]
            await self.chats.publish(updates)
            self.chats.segments_changed()
        for pending in ready:
            await self._report_rejections(pending)
            with contextlib.suppress(nats.errors.Error):
                await pending.token.msg.ack()

    async def _commit(
        self, batch: list[NewEvent], alts: list[tuple[str, str]], ready: list[Pending[Delivery]]
    ) -> list[int | None]:
        delay = 0.25
        while True:
            try:
                ids = await self.repo.commit(batch, alts)
            except DatabaseUnavailable as exc:
                self.database_ok = False
                log.warning("commit failed, retrying in %.2f s: %s", delay, exc)
                for pending in ready:
                    with contextlib.suppress(nats.errors.Error):
                        await pending.token.msg.in_progress()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
                continue
            self.database_ok = True
            return ids

    async def _report_rejections(self, pending: Pending[Delivery]) -> None:
        """A non-retryable media failure let the event commit without that transform: record it."""
        for result in pending.results.values():
            if result.ok or result.error is None:
                continue
            delivery = pending.token
            headers = {
                HEADER_MSG_ID: f"dl:media:{result.job_id}",
                HEADER_DL_REASON: f"media:{result.error.code}",
                HEADER_DL_ERROR: result.error.message[:500].replace("\n", " "),
            }
            try:
                await self.bus.js.publish(
                    dead_letter_subject(STREAM_MEDIA, CONSUMER_PIPELINE), delivery.data, headers=headers
                )
            except (nats.errors.Error, TimeoutError) as exc:
                log.error("media rejection not recorded: %s", type(exc).__name__)
