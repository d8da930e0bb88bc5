"""Composition root of the pipeline.

Start-up: migrate → wait for the lease → read the bot identities → cold replay of every configured chat
from its compaction cursor → serve ``pipeline.snapshot`` / ``pipeline.history`` / ``pipeline.cursor`` →
consume ``EVENTS``. Only the lease owner serves and consumes, so requests always reach the replica that
holds the projections.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from larkbot.canonical._base import WireModel
from larkbot.canonical.context import (
    ContextSnapshot,
    CursorMove,
    HistoryRequest,
    HistoryResponse,
    SnapshotRequest,
)
from larkbot.canonical.names import (
    QUEUE_PIPELINE,
    SUBJECT_PIPELINE_CURSOR,
    SUBJECT_PIPELINE_HISTORY,
    SUBJECT_PIPELINE_SNAPSHOT,
    Platform,
    Service,
)
from larkbot.runtime.config import LarkbotConfig
from larkbot.runtime.db import create_engine, migrate
from larkbot.runtime.http import Check
from larkbot.runtime.serve import Endpoint, model_decoder
from larkbot.runtime.service import ServiceContext, run

from .adapters.chats import ResidentChats
from .adapters.identity import Identities
from .adapters.intake import Intake
from .adapters.lease import Lease
from .adapters.repository import EventRepository
from .core import RenderParams
from .settings import render_params

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"
LEASE_KEY = "pipeline"


class PipelineError(WireModel):
    """Reply to a ``pipeline.*`` request that failed. Its ``Larkbot-Type`` header makes a caller's
    typed decode fail loudly instead of reading an empty snapshot as a real one."""

    kind: Literal["pipeline_error"] = "pipeline_error"
    message: str


def _error_reply(_data: bytes, exc: BaseException) -> BaseModel:
    return PipelineError(message=f"{type(exc).__name__}: {exc}"[:500])


def local_offset_min() -> int:
    """The deployment's UTC offset, read once at start-up and frozen for the life of the process."""
    return (time.localtime().tm_gmtoff or 0) // 60


class PipelineService:
    def __init__(
        self,
        config: LarkbotConfig,
        *,
        media_enabled: bool = True,
        lease_key: str = LEASE_KEY,
        intake_options: dict[str, Any] | None = None,
    ) -> None:
        self.config = config
        self.media_enabled = media_enabled
        self.lease_key = lease_key
        self.intake_options = intake_options or {}
        self.deployment_offset_min = (
            config.utc_offset_min if config.utc_offset_min is not None else local_offset_min()
        )
        self.ready = asyncio.Event()
        self.repo: EventRepository | None = None
        self.chats: ResidentChats | None = None
        self.intake: Intake | None = None
        self.identities: Identities | None = None
        self.lease: Lease | None = None
        self.replayed_events = 0
        self._endpoints: list[Endpoint[Any]] = []

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
        engine = create_engine(ctx.database_url())
        ctx.stack.push_async_callback(engine.dispose)
        await migrate(engine, MIGRATIONS)
        self.repo = EventRepository(engine)
        self.identities = Identities(ctx.bus)
        self.chats = ResidentChats(ctx.bus, self.repo, self.params_for, {})
        self.intake = Intake(
            ctx.bus, self.chats, self.repo, media_enabled=self.media_enabled, **self.intake_options
        )
        self.lease = await Lease.open(ctx.bus.js, self.lease_key)
        ctx.add_check("database", self._database_ready)
        ctx.add_check("owner", self._owner_ready)
        ctx.add_check("media", self._media_ready)
        ctx.spawn(self._main(ctx), "pipeline-main")

    async def _main(self, ctx: ServiceContext) -> None:
        assert self.lease is not None
        assert self.identities is not None
        assert self.chats is not None
        assert self.intake is not None
        if not await self.lease.acquire(ctx.stopping):
            return
        ctx.spawn(self.lease.keep(ctx.stopping), "pipeline-lease")
        await self.identities.load()
        for platform in Platform:
            ctx.spawn(self.identities.watch(platform, self.chats.rerender_platform), f"identity-{platform}")
        self.replayed_events = await self.chats.cold_start(self.resident_keys())
        log.info("cold start: %d chats, %d events replayed", len(self.chats.chats), self.replayed_events)
        await self._serve(ctx)
        await self.intake.start_results()
        ctx.spawn(self.intake.run_commit(), "pipeline-commit")
        ctx.spawn(self.intake.run_tick(), "pipeline-tick")
        ctx.spawn(self.intake.run_fetch(), "pipeline-fetch")
        self.ready.set()

    async def _serve(self, ctx: ServiceContext) -> None:
        chats = self.chats
        assert chats is not None

        async def snapshot(request: SnapshotRequest) -> ContextSnapshot:
            return chats.snapshot(request.platform, request.chat_id)

        async def history(request: HistoryRequest) -> HistoryResponse:
            return await chats.history(request)

        async def cursor(request: CursorMove) -> ContextSnapshot:
            return await chats.move_cursor(request.platform, request.chat_id, request.cursor, request.reason)

        bus, queue = ctx.bus, QUEUE_PIPELINE
        self._endpoints = [
            Endpoint(
                bus, SUBJECT_PIPELINE_SNAPSHOT, queue, model_decoder(SnapshotRequest), snapshot, _error_reply
            ),
            Endpoint(
                bus, SUBJECT_PIPELINE_HISTORY, queue, model_decoder(HistoryRequest), history, _error_reply
            ),
            Endpoint(bus, SUBJECT_PIPELINE_CURSOR, queue, model_decoder(CursorMove), cursor, _error_reply),
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

    async def _owner_ready(self) -> Check:
        if not self.ready.is_set():
            waiting = not (self.lease and self.lease.held)
            return Check(False, "standby: waiting for the pipeline lease" if waiting else "replaying")
        return Check(True, f"owner; {len(self.chats.chats) if self.chats else 0} resident chats")

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
        if self.intake is not None:
            await self.intake.stop()
        for endpoint in self._endpoints:
            await endpoint.stop()
        if self.identities is not None:
            await self.identities.stop()
        if self.lease is not None:
            with contextlib.suppress(Exception):
                await self.lease.release()


def main() -> int:
    return run(Service.PIPELINE, PipelineService)
