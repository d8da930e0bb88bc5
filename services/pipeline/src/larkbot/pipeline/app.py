"""Composition root of the pipeline.

Start-up: migrate → read the bot identities → serve ``pipeline.snapshot`` / ``pipeline.history`` /
``pipeline.cursor`` (forwarded to the owner of the chat's partition when that is another replica) and
``pipeline.member`` (answered from the database by any replica) → join the partition leases. Each acquired
partition is cold-started (its configured chats replayed from their compaction cursors) and then consumed
from the resume point the database records.
"""

from __future__ import annotations

import asyncio
import gc
import logging
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
from larkbot.runtime.config import LarkbotConfig
from larkbot.runtime.db import create_engine, migrate
from larkbot.runtime.http import Check
from larkbot.runtime.process import deployment_offset_min, replica_id
from larkbot.runtime.reader import ReaderState
from larkbot.runtime.serve import Endpoint, model_decoder, service_error_reply
from larkbot.runtime.service import ServiceContext, run

from .adapters.chats import ResidentChats
from .adapters.identity import Identities
from .adapters.intake import Intake
from .adapters.partitions import Ownership
from .adapters.repository import EventRepository
from .adapters.routing import NotServedHere, OwnerUnavailable, Router, direct_subject
from .core import RenderParams
from .observer import UNOBSERVED, PipelineObserver
from .settings import render_params

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


class PipelineService:
    def __init__(
        self,
        config: LarkbotConfig,
        *,
        media_enabled: bool = True,
        lease_bucket: str = KV_LEASES,
        replica: str | None = None,
        intake_options: dict[str, Any] | None = None,
        reader_options: dict[str, Any] | None = None,
        observer: PipelineObserver = UNOBSERVED,
    ) -> None:
        self.config = config
        self.media_enabled = media_enabled
        self.lease_bucket = lease_bucket
        self.replica = replica or replica_id()
        self.intake_options = intake_options or {}
        self.reader_options = reader_options or {}
        #: Told of the intake's progress (``larkbot.pipeline.observer``).
        self.observer = observer
        self.deployment_offset_min = deployment_offset_min(config.utc_offset_min)
        #: Set once the partition assignment first settled with every owned partition consuming.
        self.ready = asyncio.Event()
        self.repo: EventRepository | None = None
        self.chats: ResidentChats | None = None
        self.intake: Intake | None = None
        self.identities: Identities | None = None
        self.ownership: Ownership | None = None
        self.router: Router | None = None
        self._endpoints: list[Endpoint[Any]] = []

    @property
    def replayed_events(self) -> int:
        return self.chats.replayed_total if self.chats is not None else 0

    def params_for(self, platform: Platform, chat_id: str) -> RenderParams | None:
        chat = self.config.chat(platform.value, chat_id)
        if chat is None:
            return None
        identity = self.identities.current.get(platform) if self.identities is not None else None
        return render_params(self.config, chat, platform, chat_id, identity, self.deployment_offset_min)

    def resident_keys(self) -> list[tuple[str, str]]:
        return [
            (platform.value, chat_id)
            for platform in Platform
            for chat_id in sorted(self.config.chat_ids(platform.value))
        ]

    async def start(self, ctx: ServiceContext) -> None:
        # The pipeline keeps a large, growing heap of long-lived objects (every resident chat's nodes and
        # segments) and allocates thousands per batch. With CPython's default thresholds (700, 10, 10)
        # the cyclic collector's passes took ~35 % of the service's time; (50 000, 20, 20) measured
        # 3.5k → 5.2k events/s (docs/pipeline.md, Benchmark). Process-wide: one service per process.
        gc.set_threshold(*GC_THRESHOLDS)
        engine = create_engine(ctx.database_url())
        ctx.stack.push_async_callback(engine.dispose)
        await migrate(engine, MIGRATIONS)
        self.repo = EventRepository(engine)
        self.identities = Identities(ctx.bus)
        chats = self.chats = ResidentChats(ctx.bus, self.repo, self.params_for, {})
        self.intake = Intake(
            ctx.bus,
            self.chats,
            self.repo,
            media_enabled=self.media_enabled,
            observer=self.observer,
            **self.intake_options,
        )
        self.ownership = await Ownership.open(
            ctx.bus,
            self.intake,
            lambda p: chats.load_partition(p, self.resident_keys()),
            chats.evict_partition,
            bucket=self.lease_bucket,
            replica=self.replica,
            reader_options=self.reader_options,
        )
        self.router = Router(ctx.bus, self.ownership)
        ctx.add_check("database", self._database_ready)
        ctx.add_check("partitions", self._partitions_ready)
        ctx.add_check("media", self._media_ready)
        ctx.spawn(self._main(ctx), "pipeline-main")

    async def _main(self, ctx: ServiceContext) -> None:
        assert self.identities is not None
        assert self.chats is not None
        assert self.intake is not None
        assert self.ownership is not None
        await self.identities.load()
        for platform in Platform:
            ctx.spawn(self.identities.watch(platform, self.chats.rerender_platform), f"identity-{platform}")
        await self._serve(ctx)
        await self.intake.start_results()
        ctx.spawn(self.intake.run_commit(), "pipeline-commit")
        ctx.spawn(self.intake.run_tick(), "pipeline-tick")
        ctx.spawn(self.ownership.run(ctx.stopping), "pipeline-partitions")
        ctx.spawn(self.ownership.report_lag(ctx.stopping), "pipeline-lag")
        await self.ownership.serving_all.wait()
        log.info(
            "serving partitions %s: %d chats, %d events replayed",
            self.ownership.owned(),
            len(self.chats.chats),
            self.replayed_events,
        )
        self.ready.set()

    async def _serve(self, ctx: ServiceContext) -> None:
        chats, router = self.chats, self.router
        assert chats is not None
        assert router is not None

        async def snapshot(request: SnapshotRequest) -> ContextSnapshot:
            router.check_local(request.platform, request.chat_id)
            return chats.snapshot(request.platform, request.chat_id)

        async def history(request: HistoryRequest) -> HistoryResponse:
            router.check_local(request.platform, request.chat_id)
            return await chats.history(request)

        async def cursor(request: CursorMove) -> ContextSnapshot:
            router.check_local(request.platform, request.chat_id)
            return await chats.move_cursor(request.platform, request.chat_id, request.cursor, request.reason)

        async def routed_snapshot(request: SnapshotRequest) -> ContextSnapshot:
            return await router.route(
                request.platform,
                request.chat_id,
                "snapshot",
                request,
                ContextSnapshot,
                lambda: snapshot(request),
            )

        async def routed_history(request: HistoryRequest) -> HistoryResponse:
            return await router.route(
                request.platform,
                request.chat_id,
                "history",
                request,
                HistoryResponse,
                lambda: history(request),
            )

        async def routed_cursor(request: CursorMove) -> ContextSnapshot:
            return await router.route(
                request.platform, request.chat_id, "cursor", request, ContextSnapshot, lambda: cursor(request)
            )

        bus, queue, replica = ctx.bus, QUEUE_PIPELINE, self.replica
        snap, hist, move, member = (
            model_decoder(SnapshotRequest),
            model_decoder(HistoryRequest),
            model_decoder(CursorMove),
            model_decoder(MemberRequest),
        )
        self._endpoints = [
            Endpoint(bus, SUBJECT_PIPELINE_SNAPSHOT, queue, snap, routed_snapshot, _error_reply),
            Endpoint(bus, SUBJECT_PIPELINE_HISTORY, queue, hist, routed_history, _error_reply),
            Endpoint(bus, SUBJECT_PIPELINE_CURSOR, queue, move, routed_cursor, _error_reply),
            Endpoint(bus, SUBJECT_PIPELINE_MEMBER, queue, member, chats.member, _error_reply),
            # Forwarded by other replicas: answered only for partitions served here (no queue group).
            Endpoint(bus, direct_subject(replica, "snapshot"), "", snap, snapshot, _error_reply),
            Endpoint(bus, direct_subject(replica, "history"), "", hist, history, _error_reply),
            Endpoint(bus, direct_subject(replica, "cursor"), "", move, cursor, _error_reply),
        ]
        for endpoint in self._endpoints:
            await endpoint.start()
        # Subscriptions reach the server asynchronously; be reachable before reporting ready.
        await bus.nc.flush()

    async def _database_ready(self) -> Check:
        assert self.repo is not None
        await self.repo.ping()
        ok = self.intake is None or self.intake.database_ok
        return Check(ok, self.repo.engine.dialect.name if ok else "commits failing")

    async def _partitions_ready(self) -> Check:
        ownership = self.ownership
        if ownership is None:
            return Check(False, "starting")
        owned = ownership.owned()
        shown = ",".join(map(str, owned)) or "none"
        resident = len(self.chats.chats) if self.chats else 0
        progress = ownership.progress()
        if not progress.settled:
            return Check(False, f"rebalancing; owns partitions {shown}")
        behind = [
            (p, state) for p, state in sorted(progress.states.items()) if state is not ReaderState.CONSUMING
        ]
        if behind:
            states = ", ".join(f"{p} {state}" for p, state in behind[:8])
            return Check(False, f"owns partitions {shown}; not consuming: {states}")
        return Check(True, f"owns partitions {shown}; {resident} resident chats")

    async def _media_ready(self) -> Check:
        if self.intake is None:
            return Check(True, "idle")
        blocked = self.intake.admission.blocked()
        waiting = len(self.intake.admission)
        if blocked:
            shown = ", ".join(f"{p}:{c}" for p, c in blocked[:5])
            return Check(False, f"{len(blocked)} chat(s) blocked by failing media transforms: {shown}")
        return Check(True, f"{waiting} event(s) waiting for media")

    async def stop(self) -> None:
        """Stop taking requests, hand the partitions back (each after its in-flight commit), stop."""
        for endpoint in self._endpoints:
            await endpoint.stop()
        if self.ownership is not None:
            await self.ownership.stop()
        if self.intake is not None:
            await self.intake.stop()
        if self.identities is not None:
            await self.identities.stop()


def main() -> int:
    return run(Service.PIPELINE, PipelineService)
