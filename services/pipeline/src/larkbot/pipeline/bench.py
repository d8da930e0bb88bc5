"""``larkbot bench`` for the pipeline: events/s through reduce+render+persist+publish, and cold replay time.

Three measurements on synthetic traffic (:func:`larkbot.pipeline.synthetic.chat_traffic`, interleaved over
``events // 1000`` chats, at most 1000):

- ``core``: reduce + render only (pure, in memory), every event;
- ``service``: the whole service on an embedded NATS server and SQLite — events pre-published to
  ``EVENTS``, then consumed, committed, projected and published as context updates; capped at
  ``service_events`` (default 50,000) so that a 1 M-event run stays within minutes;
- ``cold_replay``: every event committed to the ``events`` table, then the cold start of all chats
  (read back in the order of record, decode, reduce, render).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from larkbot.canonical.codec import encode, headers_for
from larkbot.canonical.events import CanonicalEvent
from larkbot.canonical.names import (
    CONSUMER_PIPELINE,
    HEADER_MSG_ID,
    STREAM_EVENTS,
    Platform,
    Service,
    events_subject,
    msg_id,
)
from larkbot.runtime.bootstrap import bootstrap
from larkbot.runtime.bus import connect
from larkbot.runtime.config import LarkbotConfig, parse_config
from larkbot.runtime.db import create_engine, migrate
from larkbot.runtime.natsserver import EmbeddedNats
from larkbot.runtime.service import running

from .adapters.chats import ResidentChats
from .adapters.repository import EventRepository, NewEvent
from .app import MIGRATIONS, PipelineService
from .core import Projection
from .synthetic import chat_traffic


def traffic(events: int) -> tuple[list[str], list[CanonicalEvent]]:
    chats = [f"oc_bench_{i}" for i in range(max(1, min(1000, events // 1000)))]
    streams = [chat_traffic(chat, events // len(chats) + 1, seed=7) for chat in chats]
    out: list[CanonicalEvent] = []
    for round_ in itertools.zip_longest(*streams):
        out.extend(e for e in round_ if e is not None)
        if len(out) >= events:
            break
    return chats, out[:events]


def bench_config(chats: list[str], database_url: str) -> LarkbotConfig:
    return parse_config(
        {
            "utc_offset_min": 480,
            "services": {"pipeline": {"database_url": database_url, "http_host": "127.0.0.1"}},
            "chats": {"default": {}, **{f"feishu:{chat}": {} for chat in chats}},
        }
    )


def measure_core(service: PipelineService, chats: list[str], stream: list[CanonicalEvent]) -> dict[str, Any]:
    projections: dict[str, Projection] = {}
    for chat in chats:
        params = service.params_for(Platform.FEISHU, chat)
        assert params is not None
        projections[chat] = Projection(params)
    seen: set[tuple[str, str]] = set()
    started = time.perf_counter()
    for seq, event in enumerate(stream, start=1):
        key = (event.chat_id, event.dedup_key)
        if key in seen:
            continue
        seen.add(key)
        projections[event.chat_id].apply(event, seq)
    elapsed = time.perf_counter() - started
    return {"events": len(stream), "seconds": round(elapsed, 3), "events_per_s": round(len(stream) / elapsed)}


async def measure_service(
    nats_url: str, chats: list[str], stream: list[CanonicalEvent], database_url: str
) -> dict[str, Any]:
    bus = await connect(bench_config(chats, database_url).nats, "bench", url=nats_url, give_up_after_s=30)
    try:
        await bootstrap(bus.js)
        futures = []
        for event in stream:
            headers = headers_for(event, {HEADER_MSG_ID: msg_id(event.platform.value, event.dedup_key)})
            subject = events_subject(event.platform.value, event.chat_id)
            futures.append(await bus.js.publish_async(subject, encode(event), headers=headers))
            if len(futures) >= 5000:
                await asyncio.gather(*futures)
                futures.clear()
        await asyncio.gather(*futures)
        cfg = bench_config(chats, database_url)
        app = PipelineService(cfg, media_enabled=False)
        started = time.perf_counter()
        async with running(Service.PIPELINE, app, cfg, nats_url=nats_url):
            await asyncio.wait_for(app.ready.wait(), 600)
            while True:
                info = await bus.js.consumer_info(STREAM_EVENTS, CONSUMER_PIPELINE)
                if not info.num_pending and not info.num_ack_pending:
                    break
                await asyncio.sleep(0.05)
            elapsed = time.perf_counter() - started
    finally:
        await bus.close()
    return {"events": len(stream), "seconds": round(elapsed, 3), "events_per_s": round(len(stream) / elapsed)}


async def measure_cold_replay(
    chats: list[str], stream: list[CanonicalEvent], database_url: str
) -> dict[str, Any]:
    engine = create_engine(database_url)
    try:
        await migrate(engine, MIGRATIONS)
        repo = EventRepository(engine)
        started = time.perf_counter()
        for start in range(0, len(stream), 5000):
            await repo.commit([NewEvent(event) for event in stream[start : start + 5000]])
        persisted = time.perf_counter() - started
        app = PipelineService(bench_config(chats, database_url))
        resident = ResidentChats(None, repo, app.params_for, {})  # type: ignore[arg-type]
        started = time.perf_counter()
        replayed = await resident.cold_start([("feishu", chat) for chat in chats])
        elapsed = time.perf_counter() - started
    finally:
        await engine.dispose()
    return {
        "events": replayed,
        "seconds": round(elapsed, 3),
        "events_per_s": round(replayed / elapsed) if elapsed else None,
        "persist_seconds": round(persisted, 3),
    }


async def _run(events: int, service_events: int) -> dict[str, Any]:
    chats, stream = traffic(events)
    with tempfile.TemporaryDirectory(prefix="larkbot-bench-") as tmp:
        root = Path(tmp)
        app = PipelineService(bench_config(chats, f"sqlite+aiosqlite:///{root / 'x.db'}"))
        core = measure_core(app, chats, stream)
        replay = await measure_cold_replay(chats, stream, f"sqlite+aiosqlite:///{root / 'replay.db'}")
        nats = EmbeddedNats(root / "nats")
        url = nats.start()
        try:
            service = await measure_service(
                url, chats, stream[:service_events], f"sqlite+aiosqlite:///{root / 'service.db'}"
            )
        finally:
            nats.stop()
    return {
        "component": "pipeline",
        "chats": len(chats),
        "core": core,
        "service": service,
        "cold_replay": replay,
        "targets": {"service_events_per_s": 5000, "cold_replay_1m_seconds": 60},
    }


def run(events: int, *, service_events: int = 50_000) -> dict[str, Any]:
    """Run the pipeline benchmark on ``events`` synthetic events; returns a JSON-ready dict."""
    logging.getLogger("larkbot").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    return asyncio.run(_run(events, min(events, service_events)))
