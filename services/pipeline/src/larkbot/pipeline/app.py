"""Composition root of the pipeline.

:class:`PipelineService` is the recipe (the configuration and :class:`PipelineOptions`); its ``build``
wires the components and returns them, frozen, as :class:`Pipeline`. Start-up: migrate → read the bot
identities → serve ``pipeline.snapshot`` / ``pipeline.history`` / ``pipeline.cursor`` (forwarded to the
owner of the chat's partition when that is another replica) and ``pipeline.member`` (answered from the
database by any replica) → join the partition leases. Each acquired partition is cold-started (its
configured chats replayed from their compaction cursors) and then consumed from the resume point the
database records. :attr:`Pipeline.ready` is set once every owned partition is consuming.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from larkbot.canonical.context import (
    ContextSnapshot,
    CursorMove,
    HistoryRequest,
    HistoryResponse,
    MemberRequest,
    SnapshotRequest,
)
from larkbot.canonical.events import BotIdentity
from larkbot.canonical.names import (
    KV_LEASES,
    QUEUE_PIPELINE,
    SUBJECT_PIPELINE_CURSOR,
    SUBJECT_PIPELINE_HISTORY,
    SUBJECT_PIPELINE_MEMBER,
    SUBJECT_PIPELINE_SNAPSHOT,
    Platform,
    Service,
)
from larkbot.canonical.replies import ServiceError
from larkbot.runtime.backoff import Backoff, forever
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LarkbotConfig
from larkbot.runtime.db import create_engine, migrate
from larkbot.runtime.http import Check
from larkbot.runtime.process import deployment_offset_min, replica_id
from larkbot.runtime.reader import ReaderState
from larkbot.runtime.serve import Endpoint, model_decoder, service_error_reply
from larkbot.runtime.service import ServiceContext, run

from .adapters import lookups
from .adapters.chats import ResidentChats
from .adapters.identity import Identities
from .adapters.intake import TICK_S, Intake
from .adapters.partitions import LAG_S, Ownership
from .adapters.repository import EventRepository
from .adapters.routing import Router, direct_subject
from .errors import NotServedHere, OwnerUnavailable
from .observer import UNOBSERVED, PipelineObserver
from .settings import ChatParams, media_policy, resident_keys

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"
GC_THRESHOLDS = (50_000, 20, 20)


def _error_reply(data: bytes, exc: BaseException) -> ServiceError:
    """The reply to a ``pipeline.*`` request that failed: a :class:`ServiceError`, which a requester's
    ``Bus.request`` raises as the typed error it is (codes in :mod:`larkbot.canonical.replies`)."""
    if isinstance(exc, NotServedHere | OwnerUnavailable):
        code = "not_served" if isinstance(exc, NotServedHere) else "owner_unavailable"
        return ServiceError(code=code, message=str(exc)[:500], retryable=True)
    return service_error_reply(data, exc)


@dataclass(frozen=True, slots=True)
class PipelineOptions:
    """How one pipeline process runs, beyond the configuration (tests and benchmarks vary these)."""

    #: Submit media jobs for the events of configured chats (off: every event commits as it came).
    media_enabled: bool = True
    #: The KV bucket of the partition leases.
    lease_bucket: str = KV_LEASES
    #: This process's replica id (leases, reader consumers, forwarded requests).
    replica: str = field(default_factory=replica_id)
    #: First wait before a failed media job is submitted again (doubling, see ``core.admission``).
    media_retry_base_s: float = 2.0
    #: How long a partition reader's fetch waits for messages before it asks again.
    fetch_timeout_s: float = 1.0
    #: Told of the intake's progress (``larkbot.pipeline.observer``).
    observer: PipelineObserver = UNOBSERVED


@dataclass(frozen=True, slots=True)
class Pipeline:
    """The pipeline's wired components."""

    repo: EventRepository
    identities: Identities
    params_for: ChatParams
    chats: ResidentChats
    intake: Intake
    ownership: Ownership
    router: Router
    endpoints: tuple[Endpoint[Any], ...]
    #: Set once the partition assignment first settled with every owned partition consuming.
    ready: asyncio.Event

    @property
    def replayed_events(self) -> int:
        return self.chats.replayed_total

    async def start(self, ctx: ServiceContext) -> None:
        """Spawned by ``build``: load the identities, serve the requests, take media results, start the
        commit loop and the periodic work, join the partition leases; :attr:`ready` once all are served."""
        await self.identities.start()
        ctx.spawn(self.identities.run(), "identity-watch")
        for endpoint in self.endpoints:
            await endpoint.start()
        # Subscriptions reach the server asynchronously; be reachable before reporting ready.
        await ctx.bus.flush()
        await self.intake.start_results()
        ctx.spawn(self.intake.run_commit(), "pipeline-commit")
        ctx.every(TICK_S, self.intake.tick, "pipeline-tick")
        ctx.every(self.ownership.leases.heartbeat_s, self.ownership.heartbeat, "pipeline-partitions")
        ctx.every(LAG_S, self.ownership.report_lag, "pipeline-lag")
        await self.ownership.serving_all.wait()
        log.info(
            "serving partitions %s: %d chats, %d events replayed",
            self.ownership.owned(),
            len(self.chats.chats),
            self.replayed_events,
        )
        self.ready.set()

    async def database_ready(self) -> Check:
        await self.repo.ping()
        ok = self.intake.database_ok
        return Check(ok, self.repo.engine.dialect.name if ok else "commits failing")

    async def partitions_ready(self) -> Check:
        owned = self.ownership.owned()
        shown = ",".join(map(str, owned)) or "none"
        progress = self.ownership.progress()
        if not progress.assignment_settled:
            failing = self.ownership.leases.failing_detail()
            return Check(False, f"rebalancing; owns partitions {shown}" + (f"; {failing}" if failing else ""))
        behind = [
            (p, state) for p, state in sorted(progress.states.items()) if state is not ReaderState.CONSUMING
        ]
        if behind:
            states = ", ".join(f"{p} {state}" for p, state in behind[:8])
            return Check(False, f"owns partitions {shown}; not consuming: {states}")
        return Check(True, f"owns partitions {shown}; {len(self.chats.chats)} resident chats")

    async def media_ready(self) -> Check:
        blocked = self.intake.admission.blocked()
        waiting = len(self.intake.admission)
        if blocked:
            shown = ", ".join(f"{p}:{c}" for p, c in blocked[:5])
            return Check(False, f"{len(blocked)} chat(s) blocked by failing media transforms: {shown}")
        return Check(True, f"{waiting} event(s) waiting for media")

    async def stop(self) -> None:
        """Stop taking requests, hand the partitions back (each after its in-flight commit), stop."""
        for endpoint in self.endpoints:
            await endpoint.stop()
        await self.ownership.stop()
        await self.intake.stop()
        await self.identities.stop()


def endpoints(bus: Bus, replica: str, chats: ResidentChats, router: Router) -> tuple[Endpoint[Any], ...]:
    """The ``pipeline.*`` request endpoints (queue group), and the direct subjects other replicas forward
    requests to (answered only for partitions served here: no queue group)."""

    async def snapshot(request: SnapshotRequest) -> ContextSnapshot:
        router.check_local(request.platform, request.chat_id)
        return await chats.snapshot(request.platform, request.chat_id)

    async def history(request: HistoryRequest) -> HistoryResponse:
        router.check_local(request.platform, request.chat_id)
        return await lookups.history(chats, request)

    async def cursor(request: CursorMove) -> ContextSnapshot:
        router.check_local(request.platform, request.chat_id)
        return await chats.move_cursor(request.platform, request.chat_id, request.cursor, request.reason)

    async def routed_snapshot(request: SnapshotRequest) -> ContextSnapshot:
        return await router.route(
            request.platform, request.chat_id, "snapshot", request, ContextSnapshot, lambda: snapshot(request)
        )

    async def routed_history(request: HistoryRequest) -> HistoryResponse:
        return await router.route(
            request.platform, request.chat_id, "history", request, HistoryResponse, lambda: history(request)
        )

    async def routed_cursor(request: CursorMove) -> ContextSnapshot:
        return await router.route(
            request.platform, request.chat_id, "cursor", request, ContextSnapshot, lambda: cursor(request)
        )

    queue = QUEUE_PIPELINE
    snap, hist, move, member = (
        model_decoder(SnapshotRequest),
        model_decoder(HistoryRequest),
        model_decoder(CursorMove),
        model_decoder(MemberRequest),
    )
    return (
        Endpoint(bus, SUBJECT_PIPELINE_SNAPSHOT, queue, snap, routed_snapshot, _error_reply),
        Endpoint(bus, SUBJECT_PIPELINE_HISTORY, queue, hist, routed_history, _error_reply),
        Endpoint(bus, SUBJECT_PIPELINE_CURSOR, queue, move, routed_cursor, _error_reply),
        Endpoint(bus, SUBJECT_PIPELINE_MEMBER, queue, member, partial(lookups.member, chats), _error_reply),
        Endpoint(bus, direct_subject(replica, "snapshot"), "", snap, snapshot, _error_reply),
        Endpoint(bus, direct_subject(replica, "history"), "", hist, history, _error_reply),
        Endpoint(bus, direct_subject(replica, "cursor"), "", move, cursor, _error_reply),
    )


@dataclass(frozen=True, slots=True)
class PipelineService:
    """The recipe of a pipeline process (:class:`larkbot.runtime.service.Buildable`)."""

    config: LarkbotConfig
    options: PipelineOptions = field(default_factory=PipelineOptions)

    async def build(self, ctx: ServiceContext) -> Pipeline:
        # The pipeline keeps a large, growing heap of long-lived objects (every resident chat's nodes and
        # segments) and allocates thousands per batch. With CPython's default thresholds (700, 10, 10)
        # the cyclic collector's passes took ~35 % of the service's time; (50 000, 20, 20) measured
        # 3.5k → 5.2k events/s (docs/pipeline.md, Benchmark). Process-wide: one service per process.
        gc.set_threshold(*GC_THRESHOLDS)
        config, options = self.config, self.options
        engine = create_engine(ctx.database_url())
        ctx.stack.push_async_callback(engine.dispose)
        await migrate(engine, MIGRATIONS)
        repo = EventRepository(engine)
        current: dict[Platform, BotIdentity] = {}
        params_for = ChatParams(config, current, deployment_offset_min(config.utc_offset_min))
        chats = ResidentChats(
            ctx.bus,
            repo,
            params_for,
            {},
            forever(Backoff.of(config.retry.background)),
            budget_bytes=config.services.pipeline.resident_budget_mb * 1024 * 1024,
        )
        identities = Identities(ctx.bus, current, chats.rerender_platform)
        intake = Intake(
            ctx.bus,
            chats,
            repo,
            commit_retry=forever(Backoff.of(config.retry.background)),
            media_enabled=options.media_enabled,
            retry_base_s=options.media_retry_base_s,
            observer=options.observer,
            media_policy=lambda platform, chat_id: media_policy(config, platform, chat_id),
        )
        keys = resident_keys(config)
        ownership = await Ownership.open(
            ctx.bus,
            intake,
            lambda p: chats.load_partition(p, keys),
            chats.evict_partition,
            replica=options.replica,
            bucket=options.lease_bucket,
            fetch_timeout_s=options.fetch_timeout_s,
            takeover_retry=Backoff.of(config.retry.background),
        )
        router = Router(ctx.bus, ownership)
        pipeline = Pipeline(
            repo=repo,
            identities=identities,
            params_for=params_for,
            chats=chats,
            intake=intake,
            ownership=ownership,
            router=router,
            endpoints=endpoints(ctx.bus, options.replica, chats, router),
            ready=asyncio.Event(),
        )
        ctx.add_check("database", pipeline.database_ready)
        ctx.add_check("partitions", pipeline.partitions_ready)
        ctx.add_check("media", pipeline.media_ready)
        ctx.spawn(pipeline.start(ctx), "pipeline-main")
        return pipeline


def main() -> int:
    return run(Service.PIPELINE, PipelineService)
