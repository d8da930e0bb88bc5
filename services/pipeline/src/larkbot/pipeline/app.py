"""Composition root of the pipeline: consume ``EVENTS`` in order, commit each event, then acknowledge."""

from __future__ import annotations

import logging
from pathlib import Path

from larkbot.canonical.codec import decode_as
from larkbot.canonical.events import EVENT_ADAPTER
from larkbot.canonical.names import CONSUMER_PIPELINE, STREAM_EVENTS, Service
from larkbot.runtime.config import LarkbotConfig
from larkbot.runtime.consume import Delivery, PullConsumer
from larkbot.runtime.db import create_engine, migrate
from larkbot.runtime.http import Check
from larkbot.runtime.logs import log_context
from larkbot.runtime.service import ServiceContext, run

from . import metrics
from .adapters.repository import EventRepository

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"


class PipelineService:
    def __init__(self, config: LarkbotConfig) -> None:
        self.config = config
        self.repo: EventRepository | None = None
        self.consumer: PullConsumer | None = None

    async def start(self, ctx: ServiceContext) -> None:
        engine = create_engine(ctx.database_url())
        ctx.stack.push_async_callback(engine.dispose)
        await migrate(engine, MIGRATIONS)
        self.repo = EventRepository(engine)
        self.consumer = PullConsumer(ctx.bus.js, STREAM_EVENTS, CONSUMER_PIPELINE, self.handle, batch=200)
        ctx.spawn(self.consumer.run(), "consume-events")
        ctx.add_check("database", self._database_ready)

    async def handle(self, delivery: Delivery) -> None:
        assert self.repo is not None
        event = decode_as(delivery.data, EVENT_ADAPTER, delivery.headers)
        with log_context(chat=f"{event.platform.value}:{event.chat_id}"):
            stored = await self.repo.add(event, delivery.stream_seq)
        metrics.EVENTS.labels(event.kind, "duplicate" if stored.duplicate else "committed").inc()

    async def _database_ready(self) -> Check:
        assert self.repo is not None
        await self.repo.ping()
        return Check(True, self.repo.engine.dialect.name)

    async def stop(self) -> None:
        if self.consumer is not None:
            self.consumer.stop()


def main() -> int:
    return run(Service.PIPELINE, PipelineService)
