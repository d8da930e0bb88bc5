"""The chats this replica drives: the context partitions it holds the lease of (DESIGN §3).

:class:`larkbot.runtime.partitions.PartitionLeases` (group ``driver``) calls :meth:`ChatHost.acquire` and
:meth:`ChatHost.release`. Per held partition there is one context consumer and one loop per configured
chat of that partition.

Acquire:
1. make sure the partition's durable consumer exists (``driver-pNN``, filter ``context.<p>.>``; declared
   through ``runtime.bootstrap.declare_partition_consumer`` with ``deliver=new`` the first time: context
   updates are derived data);
2. open the partition's chats from the database: marks (``processed_until``, ``last_action``) and
   whether a chain is open;
3. start consuming, then fetch ``pipeline.snapshot`` for each chat and only then start its loop. The
   consumer existed before the snapshot was asked for, so every update is either in the snapshot or
   delivered afterwards (older ones are stale and skipped). Input newer than ``processed_until`` wakes the
   chat as usual; an open chain resumes without the probe. A snapshot the pipeline cannot give now is
   asked again (``runtime.retry``, ``retry.takeover_snapshot``: 0.5 s doubling to 10 s, jittered, without
   end), each cause logged once for all the chats meeting it (:class:`Trouble`).

Steps 1 and 2 may fail (NATS, the identity bucket, the database); nothing is registered before both are
done, so a failed take-over leaves nothing behind and ``PartitionLeases`` gives the lease back and tries
it again whole after a backoff (``retry.background``). The leases never run this partition's acquire and
release at once: a partition is taken over again only after its previous release has returned.

Release: stop consuming, stop every chat loop after the step in progress is persisted (the runner's
interrupt check sees ``stopping``; the chain stays open for the next owner), and return only then, so
the lease is handed over after the marks are saved.

An update of a chat this replica does not hold (a fetch still in flight when a partition was handed
over) is not acknowledged but nak'ed, so that JetStream redelivers it to the owner.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from nats.js import JetStreamContext

from larkbot.canonical.codec import decode
from larkbot.canonical.context import ContextSnapshot, ContextUpdate
from larkbot.canonical.errors import ContractError, RetryableError
from larkbot.canonical.names import (
    CONSUMER_DRIVER,
    STREAM_CONTEXT,
    partition_consumer,
    partition_filter,
    partition_of,
)
from larkbot.runtime import tracing
from larkbot.runtime.bootstrap import declare_partition_consumer
from larkbot.runtime.bus import ServiceRefused, ServiceUnavailable
from larkbot.runtime.config import ChatSettings, LarkbotConfig
from larkbot.runtime.consume import Delivery, PullConsumer
from larkbot.runtime.logs import log_context
from larkbot.runtime.retry import Backoff, Failure, RetryPolicy, retrying

from .. import metrics
from ..errors import Gap
from ..observer import DriverObserver
from .chatstate import ChatState, Persona
from .clients import BusClients
from .clock import Clock
from .core.context import apply_update, from_snapshot, is_stale
from .repository import DriverRepository
from .runner import WakeRunner

log = logging.getLogger(__name__)

DEFAULT_NAME = "LarkBot"

Spawn = Callable[[Coroutine[Any, Any, Any], str], "asyncio.Task[Any]"]


class Trouble:
    """Failures of one kind of request shared by many tasks (every chat of every partition taken over),
    logged once per cause while any task still meets it: a pipeline restart is one warning and one
    recovery line, not one warning per chat and retry."""

    def __init__(self, what: str) -> None:
        self.what = what
        #: cause → tasks currently failing with it
        self._failing: dict[str, int] = {}

    def failed(self, previous: str | None, exc: BaseException, delay_s: float) -> str:
        """A task failed with ``exc`` (its previous cause ``previous``); returns its cause now."""
        cause = _cause(exc)
        if cause != previous:
            self.ended(previous)
            self._failing[cause] = self._failing.get(cause, 0) + 1
            if self._failing[cause] == 1:
                log.warning("%s fail (%s); asking again in %.1f s, then backing off", self.what, exc, delay_s)
                return cause
        log.debug("%s: still failing (%s); asking again in %.1f s", self.what, exc, delay_s)
        return cause

    def ended(self, cause: str | None) -> None:
        """A task that failed with ``cause`` stopped failing (it succeeded or was cancelled)."""
        if cause is None:
            return
        left = self._failing.get(cause, 0) - 1
        if left > 0:
            self._failing[cause] = left
            return
        self._failing.pop(cause, None)
        log.info("%s: no longer failing with %s", self.what, cause)


def _cause(exc: BaseException) -> str:
    """What a failure is, for telling failures apart (not the message: it names chats and partitions)."""
    if isinstance(exc, ServiceUnavailable | ServiceRefused):
        return exc.error.code
    return type(exc).__name__


def _snapshot_failure(exc: BaseException) -> Failure | None:
    """A take-over's snapshot is asked again whenever the pipeline cannot answer now (a partition changing
    hands, a replica killed and its lease not yet expired, the bus down) or refused: a take-over that
    gave up would leave the chat without a loop. Anything else (a bug) fails the take-over."""
    return Failure.TRANSIENT if isinstance(exc, RetryableError | ContractError | ServiceRefused) else None


class NotHeld(RetryableError):
    """An update of a chat whose partition this replica no longer holds: redelivered to the owner."""


@dataclass(slots=True)
class _Partition:
    consumer: PullConsumer
    chats: list[ChatState] = field(default_factory=list)
    loops: list[asyncio.Task[Any]] = field(default_factory=list)
    takeover: asyncio.Task[Any] | None = None
    #: Every chat has its snapshot and a running loop.
    ready: bool = False


class ChatHost:
    def __init__(
        self,
        config: LarkbotConfig,
        *,
        js: JetStreamContext,
        repo: DriverRepository,
        clients: BusClients,
        runner: WakeRunner,
        clock: Clock,
        personas: dict[str, str],
        spawn: Spawn,
        observer: DriverObserver,
        group: str = CONSUMER_DRIVER,
        fetch_timeout_s: float = 1.0,
    ) -> None:
        self.config = config
        self.js = js
        self.repo = repo
        self.clients = clients
        self.runner = runner
        self.clock = clock
        self.personas = personas
        self.spawn = spawn
        self.observer = observer
        self.group = group
        self.fetch_timeout_s = fetch_timeout_s
        #: Take-over snapshots that fail (pipeline unreachable) are asked again (``retry.takeover_snapshot``).
        self.snapshot_retry = RetryPolicy.of(config.retry.takeover_snapshot)
        #: A wake-up or a save of marks the database refused is tried again (``retry.background``).
        self.database_retry = Backoff.of(config.retry.background)
        self.held: dict[str, ChatState] = {}
        self.partitions: dict[int, _Partition] = {}
        self._snapshot_trouble = Trouble("snapshots for the take-over")
        self.by_partition: dict[int, list[tuple[str, str, ChatSettings]]] = {}
        for key, settings in config.chats.items():
            if key == "default":
                continue
            platform, _, chat_id = key.partition(":")
            self.by_partition.setdefault(partition_of(platform, chat_id), []).append(
                (platform, chat_id, settings)
            )

    @property
    def ready(self) -> bool:
        return all(p.ready for p in self.partitions.values())

    # -- lease hooks ----------------------------------------------------------------------------------
    async def acquire(self, partition: int) -> None:
        # Everything that can fail (the bus, the identity bucket, the database) comes before anything
        # is registered: a take-over that raises leaves nothing behind and is tried again whole.
        durable = await self._ensure_consumer(partition)
        chats = [
            await self._open(platform, chat_id, settings)
            for platform, chat_id, settings in self.by_partition.get(partition, ())
        ]
        consumer = PullConsumer(
            self.js, STREAM_CONTEXT, durable, self.on_context, fetch_timeout_s=self.fetch_timeout_s
        )
        held = _Partition(consumer, chats)
        self.partitions[partition] = held
        self.held.update((state.key, state) for state in chats)
        self.spawn(held.consumer.run(), f"context-p{partition:02d}")
        held.takeover = self.spawn(self._take_over(held), f"take-over-p{partition:02d}")
        metrics.HANDOVERS.labels("acquired").inc()
        self._gauges()
        self._report_partitions()
        log.info("took partition %d over (%d chats)", partition, len(held.chats))

    async def release(self, partition: int) -> None:
        held = self.partitions.pop(partition, None)
        if held is None:
            return
        # The consumer task ends with its fetch in flight; what it still receives is nak'ed (NotHeld).
        held.consumer.stop()
        if held.takeover is not None:
            held.takeover.cancel()
            await asyncio.gather(held.takeover, return_exceptions=True)
        for state in held.chats:
            state.stop()
        if held.loops:
            # The step in progress is persisted and the marks saved before the lease is handed over.
            await asyncio.wait(held.loops)
        for state in held.chats:
            self.held.pop(state.key, None)
        metrics.HANDOVERS.labels("released").inc()
        self._gauges()
        self._report_partitions()
        log.info("handed partition %d back", partition)

    def stop_all(self) -> None:
        """Stop taking work at once (shutdown): consumers stop fetching, chats stop after their step.
        The lease hooks then find everything already stopping, so releasing is not one wait per
        partition."""
        for held in self.partitions.values():
            held.consumer.stop()
            for state in held.chats:
                state.stop()

    def _gauges(self) -> None:
        metrics.PARTITIONS.set(len(self.partitions))
        metrics.CHATS.set(len(self.held))

    def _report_partitions(self) -> None:
        self.observer.partitions_changed(tuple(sorted(self.partitions)), self.ready)

    async def _ensure_consumer(self, partition: int) -> str:
        durable = partition_consumer(self.group, partition)
        await declare_partition_consumer(
            self.js,
            STREAM_CONTEXT,
            durable,
            partition_filter("context", partition),
            deliver_new=True,
            ack_wait_s=30.0,
            max_ack_pending=10_000,
        )
        return durable

    # -- chats ----------------------------------------------------------------------------------------
    async def _open(self, platform: str, chat_id: str, settings: ChatSettings) -> ChatState:
        name = settings.display_name
        if name is None:
            identity = await self.clients.identity(platform)
            name = identity.name if identity else None
        persona = Persona(name or DEFAULT_NAME, tuple(self.personas[p] for p in settings.persona_files))
        state = ChatState(
            platform,
            chat_id,
            settings,
            persona,
            self.clock,
            self.observer,
            database_retry=self.database_retry,
        )
        latest = await self.repo.latest_turn(platform, chat_id)
        if latest is None:
            state.history.none_stored()
        resume = latest is not None and (latest.requires_follow_up or latest.pending)
        marks = await self.repo.marks(platform, chat_id)
        state.load(marks, resume, await self.repo.latest_summary(platform, chat_id))
        return state

    async def _take_over(self, held: _Partition) -> None:
        for state in held.chats:
            with log_context(chat=state.key):
                snapshot = await self._snapshot(state)
                state.adopt(from_snapshot(snapshot, state.settings.max_segment_est_tokens))
            self.observer.context_applied(state)
            held.loops.append(self.spawn(state.loop(self.runner.run, self.repo), f"chat-{state.key}"))
        held.ready = True
        self._report_partitions()

    async def _snapshot(self, state: ChatState) -> ContextSnapshot:
        cause: str | None = None

        def retried(_failure: Failure, _attempts: int, wait_s: float, exc: BaseException | None) -> None:
            nonlocal cause
            metrics.TAKEOVER_SNAPSHOTS.labels("retried").inc()
            if exc is not None:  # None only when an answer is retried, which a snapshot never is
                cause = self._snapshot_trouble.failed(cause, exc, wait_s)

        try:
            async for attempt in retrying(self.snapshot_retry, _snapshot_failure, on_retry=retried):
                with attempt:
                    snapshot = await self.clients.snapshot(state.platform, state.chat_id)
        finally:
            self._snapshot_trouble.ended(cause)
        metrics.TAKEOVER_SNAPSHOTS.labels("ok").inc()
        return snapshot

    # -- context updates ------------------------------------------------------------------------------
    async def on_context(self, delivery: Delivery) -> None:
        update = decode(delivery.data, ContextUpdate, delivery.headers)
        platform = update.platform.value
        key = f"{platform}:{update.chat_id}"
        with log_context(chat=key):
            state = self.held.get(key)
            if state is None:
                if self.config.chat(platform, update.chat_id) is None:
                    metrics.CONTEXT_UPDATES.labels("unconfigured").inc()
                    return
                metrics.CONTEXT_UPDATES.labels("not_held").inc()
                raise NotHeld(f"chat {key} is not held by this replica", delay_s=0.5)
            if is_stale(state.context, update):
                metrics.CONTEXT_UPDATES.labels("stale").inc()
                return
            try:
                context = apply_update(state.context, update, state.settings.max_segment_est_tokens)
                metrics.CONTEXT_UPDATES.labels("applied").inc()
            except Gap as gap:
                log.info("context gap (%s); fetching a snapshot", gap)
                try:
                    snapshot = await self.clients.snapshot(platform, update.chat_id)
                except (ContractError, ServiceRefused) as exc:
                    # The pipeline refused (its contract or its own error): the update is fine, ask
                    # again later instead of dead-lettering it. (Retryable failures propagate as such.)
                    raise RetryableError(f"snapshot for the gap failed: {exc}", delay_s=0.5) from exc
                context = from_snapshot(snapshot, state.settings.max_segment_est_tokens)
                metrics.CONTEXT_UPDATES.labels("gap").inc()
            state.adopt(context, tracing.traceparent())
        self.observer.context_applied(state)
