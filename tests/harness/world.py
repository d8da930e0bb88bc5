"""The whole system as an operator runs it, on loopback: the six services as processes, the fake Feishu,
the fake Telegram Bot API and the fake LLM provider in the test process, one NATS server, SQLite or
PostgreSQL. Plus what the checks read: ``pipeline.snapshot``, the ``events`` table, a tap on every action
request, and the services' ``/metrics``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nats.aio.msg import Msg
from sqlalchemy import text

from larkbot.canonical.actions import ACTION_ADAPTER, ActionRequest
from larkbot.canonical.codec import decode_as
from larkbot.canonical.context import ContextSnapshot, SnapshotRequest
from larkbot.canonical.names import SUBJECT_PIPELINE_SNAPSHOT, Platform
from larkbot.ingress_feishu.fake.server import FakeFeishu
from larkbot.ingress_telegram.fake import FakeBotApi
from larkbot.llm_gateway.fake import FakeProvider, Script
from larkbot.runtime.bootstrap import bootstrap
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import JetStreamSettings
from larkbot.runtime.db import create_engine, default_sqlite_url
from larkbot.testkit.databases import fresh_postgres
from larkbot.testkit.stack import LLM_API_KEY, SERVICES, WAIT_S, Stack, stack_config


async def reset_streams(bus: Bus, jetstream: JetStreamSettings | None = None) -> None:
    """Delete every stream (KV buckets and object stores included) and declare afresh."""
    for info in await bus.js.streams_info():
        assert info.config.name is not None
        await bus.js.delete_stream(info.config.name)
    await bootstrap(bus.js, jetstream)


def postgres_databases(base_url: str, names: tuple[str, ...]) -> AbstractAsyncContextManager[dict[str, str]]:
    """Fresh PostgreSQL databases (one per service: each keeps its own Alembic version table)."""
    return fresh_postgres(base_url, names, prefix="larkbot_e2e")


@dataclass
class ActionTap:
    """A plain (non-queue) subscriber on ``actions.>``: sees a copy of every action request."""

    requests: list[ActionRequest] = field(default_factory=list)
    seen_at: dict[str, float] = field(default_factory=dict)  # idempotency key → first sight (monotonic)

    async def on_msg(self, msg: Msg) -> None:
        request = decode_as(msg.data, ACTION_ADAPTER, dict(msg.headers or {}))
        self.requests.append(request)
        self.seen_at.setdefault(request.idempotency_key, time.monotonic())

    def of_kind(self, kind: str, chat_id: str | None = None) -> list[ActionRequest]:
        return [
            r
            for r in self.requests
            if r.kind == kind and (chat_id is None or getattr(r, "chat_id", None) == chat_id)
        ]


@dataclass
class World:
    stack: Stack
    bus: Bus
    feishu: FakeFeishu
    telegram: FakeBotApi
    llm: FakeProvider
    database_urls: dict[str, str]
    tap: ActionTap

    async def snapshot(self, platform: Platform, chat_id: str) -> ContextSnapshot:
        request = SnapshotRequest(platform=platform, chat_id=chat_id)
        return await self.bus.request(SUBJECT_PIPELINE_SNAPSHOT, request, ContextSnapshot, timeout_s=30)

    async def event_rows(self, platform: str | None = None, chat_id: str | None = None) -> list[Any]:
        """Rows of the pipeline's ``events`` table in the order of record."""
        engine = create_engine(self.database_urls["pipeline"])
        try:
            query = "SELECT id, platform, chat_id, dedup_key, kind, message_id, payload FROM events"
            where = []
            params: dict[str, str] = {}
            if platform is not None:
                where.append("platform = :platform")
                params["platform"] = platform
            if chat_id is not None:
                where.append("chat_id = :chat_id")
                params["chat_id"] = chat_id
            if where:
                query += " WHERE " + " AND ".join(where)
            async with engine.connect() as conn:
                return list((await conn.execute(text(query + " ORDER BY id"), params)).all())
        finally:
            await engine.dispose()

    async def metric(self, service: str, name: str, **labels: str) -> float:
        return await self.stack.scrape(service, name, **labels)

    async def turn_stored(self, platform: str, chat_id: str) -> bool:
        """Whether the driver's latest turn in the chat is over: its newest step closes the chain, and the
        input it answered is marked processed (which a wake-up does after storing its last step).

        A driver killed before that leaves the chain open, and the next one continues it without the
        probe, taking every input then pending with it (docs/driver.md, "Wake-up lifecycle")."""
        engine = create_engine(self.database_urls["driver"])
        where = "WHERE platform = :platform AND chat_id = :chat_id"
        newest_step = f"SELECT requires_follow_up FROM driver_turn_responses {where} ORDER BY id DESC LIMIT 1"
        processed = f"SELECT processed_until_ms FROM driver_chats {where}"
        params = {"platform": platform, "chat_id": chat_id}
        try:
            async with engine.connect() as conn:
                newest = (await conn.execute(text(newest_step), params)).first()
                marks = (await conn.execute(text(processed), params)).first()
        finally:
            await engine.dispose()
        closed = newest is not None and not newest.requires_follow_up
        return closed and marks is not None and marks.processed_until_ms > 0


@asynccontextmanager
async def world(
    root: Path,
    bus: Bus,
    nats_url: str,
    script: Script,
    chats: dict[str, dict[str, Any]],
    *,
    database: str = "sqlite",
    postgres_url: str | None = None,
    chat_defaults: dict[str, Any] | None = None,
    services: tuple[str, ...] = SERVICES,
    config: dict[str, Any] | None = None,
    argv: dict[str, tuple[str, ...]] | None = None,
    feishu: dict[str, Any] | None = None,
    jetstream: JetStreamSettings | None = None,
    service_env: dict[str, dict[str, str]] | None = None,
    replicas: dict[str, int] | None = None,
) -> AsyncIterator[World]:
    """Fakes up, streams reset, the services started and ready; everything stopped on exit. ``config``:
    top-level sections added to the configuration file; ``argv``: the command of a service, by name;
    ``feishu``: keys added to the ``feishu`` section (e.g. a short ``api_timeout_s``); ``jetstream``: the
    replicas and limits the streams are declared with (and the services configured with); ``service_env``:
    variables given to one service only (its own NATS user), by service name; ``replicas``: how many
    processes run a service (the further ones are named ``<service>-r<n>``; PostgreSQL for more than one
    pipeline or driver)."""
    feishu_settings = feishu or {}
    feishu_fake = FakeFeishu()
    telegram = FakeBotApi()
    llm = FakeProvider(script, api_key=LLM_API_KEY)
    await feishu_fake.start()
    await telegram.start()
    await llm.start()
    tap = ActionTap()
    sub = await bus.nc.subscribe("actions.>", cb=tap.on_msg)
    try:
        async with _databases(root, database, postgres_url) as urls:
            await reset_streams(bus, jetstream)
            configured = {k: v for k, v in urls.items() if database != "sqlite"}
            stack = Stack(
                root,
                nats_url,
                stack_config(root, feishu_fake, telegram, llm.url, chats, configured, chat_defaults),
            )
            stack.config["feishu"].update(feishu_settings)
            stack.service_env.update(service_env or {})
            stack.config.update(config or {})
            if jetstream is not None:
                stack.config["jetstream"] = jetstream.model_dump(exclude_defaults=True)
            stack.add(*services)
            for name, count in (replicas or {}).items():
                stack.add_replicas(name, count)
            for name, command in (argv or {}).items():
                stack.services[name].argv = command
            try:
                await stack.up()
                if "ingress-feishu" in services:
                    await feishu_fake.long_connection.wait_connected(timeout_s=WAIT_S)
                yield World(stack, bus, feishu_fake, telegram, llm, urls, tap)
            finally:
                await stack.down()
    finally:
        await sub.unsubscribe()
        await llm.stop()
        await telegram.stop()
        await feishu_fake.stop()


@asynccontextmanager
async def _databases(root: Path, database: str, postgres_url: str | None) -> AsyncIterator[dict[str, str]]:
    if database == "sqlite":
        data = str(root / "data")
        yield {name: default_sqlite_url(data, name) for name in ("pipeline", "driver")}
        return
    assert postgres_url is not None
    async with postgres_databases(postgres_url, ("pipeline", "driver")) as urls:
        yield urls
