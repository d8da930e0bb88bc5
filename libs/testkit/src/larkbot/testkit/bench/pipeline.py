"""``larkbot bench`` for the pipeline: events/s through the whole service, cold replay, memory per chat.

Measurements on synthetic traffic (:func:`larkbot.testkit.pipeline.synthetic.chat_traffic`: messages, replies,
mentions, edits, deletes, reactions, renames, ~2 % redeliveries), interleaved over many chats:

- ``pipeline_events_per_s``: the whole service on SQLite — events pre-published to ``EVENTS``, then read
  from every partition, committed with the partitions' resume points, reduced, rendered and published as
  context updates (acknowledged by the server), until everything is handled;
- ``cold_replay_1m_events_s``: 1,000,000 events persisted in the ``events`` table, then the cold start of
  every chat (read in the order of record, decode, reduce, render);
- ``resident_bytes_per_chat``: memory held per resident chat (tracemalloc) with a working window of
  ``WINDOW`` events per chat;
- ``chat_reload_ms``: rebuilding an evicted chat of ``WINDOW`` persisted events from the database (what
  its next event or snapshot waits for when the resident budget evicted it), p50/p99.

Quick mode measures smaller counts and reports the cold replay *rate* under ``cold_replay_events_per_s``
(``cold_replay_1m_events_s`` is then ``None``: nothing was measured at that size).
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import secrets
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
from sqlalchemy import insert

from larkbot.canonical.codec import encode, headers_for
from larkbot.canonical.events import CanonicalEvent
from larkbot.canonical.names import (
    HEADER_MSG_ID,
    KV_LEASES,
    STREAM_CONTEXT,
    STREAM_EVENTS,
    Platform,
    Service,
    context_subject,
    events_subject,
    msg_id,
    partition_of,
)
from larkbot.pipeline.adapters.chats import ResidentChats
from larkbot.pipeline.adapters.repository import EventRepository
from larkbot.pipeline.adapters.tables import events as events_table
from larkbot.pipeline.adapters.writes import NewEvent, event_row
from larkbot.pipeline.app import MIGRATIONS, PipelineOptions, PipelineService
from larkbot.pipeline.core import Projection
from larkbot.pipeline.settings import ChatParams
from larkbot.runtime.bootstrap import bootstrap
from larkbot.runtime.bus import Bus, connect
from larkbot.runtime.config import LarkbotConfig, NatsSettings, parse_config
from larkbot.runtime.db import create_engine, migrate
from larkbot.runtime.process import deployment_offset_min
from larkbot.runtime.retry import RetryPolicy
from larkbot.runtime.service import built

from ..pipeline.synthetic import chat_traffic
from ..pipeline.watch import PipelineWatch

log = logging.getLogger(__name__)

#: Events per chat held in memory for ``resident_bytes_per_chat``.
WINDOW = 200
#: The cold replay's resident budget: large enough that every stored event is replayed.
UNBOUNDED_BYTES = 1 << 50
#: A bound, not an expectation: 50,000 events take seconds.
HANDLED_TIMEOUT_S = 3600.0


def interleaved(chats: list[str], per_chat: int, seed: int = 7) -> Iterator[CanonicalEvent]:
    """Round-robin over the chats' traffic, as a busy deployment receives it."""
    streams = [chat_traffic(chat, per_chat, seed=seed) for chat in chats]
    for round_ in itertools.zip_longest(*streams):
        yield from (e for e in round_ if e is not None)


def bench_config(chats: list[str], database_url: str) -> LarkbotConfig:
    return parse_config(
        {
            "utc_offset_min": 480,
            "services": {"pipeline": {"database_url": database_url, "http_host": "127.0.0.1"}},
            "chats": {"default": {}, **{f"feishu:{chat}": {} for chat in chats}},
        }
    )


def chat_params(config: LarkbotConfig) -> ChatParams:
    """The service's render parameters of ``config``'s chats, with no bot identity known."""
    return ChatParams(config, {}, deployment_offset_min(config.utc_offset_min))


async def _bus_is_ours(bus: Bus) -> bool:
    """The service measurement consumes all of ``EVENTS`` and takes the pipeline's partition leases: only
    on a bus that carries no pipeline traffic (the fresh server ``larkbot bench`` starts)."""
    info = await bus.js.stream_info(STREAM_EVENTS)
    kv = await bus.js.key_value(KV_LEASES)
    try:
        keys = await kv.keys()
    except nats.js.errors.NoKeysError:
        keys = []
    return not info.state.messages and not any(key.startswith("pipeline.") for key in keys)


async def measure_service(nats_url: str, events: int, chats_count: int, root: Path) -> dict[str, Any]:
    tag = secrets.token_hex(3)
    chats = [f"oc_bench_{tag}_{i}" for i in range(chats_count)]
    stream = list(interleaved(chats, events // chats_count + 1))[:events]
    database_url = f"sqlite+aiosqlite:///{root / f'service-{tag}.db'}"
    cfg = bench_config(chats, database_url)
    bus = await connect(NatsSettings(), "bench", url=nats_url, give_up_after_s=30)
    try:
        await bootstrap(bus.js)
        if not await _bus_is_ours(bus):
            raise RuntimeError("the bus carries pipeline traffic: run the benchmark on a server of its own")
        futures = []
        for event in stream:
            dedup = f"{event.chat_id}:{event.dedup_key}"  # synthetic keys are unique per chat only
            headers = headers_for(event, {HEADER_MSG_ID: msg_id(event.platform.value, dedup)})
            subject = events_subject(event.platform.value, event.chat_id)
            futures.append(await bus.js.publish_async(subject, encode(event), headers=headers))
            if len(futures) >= 5000:
                await asyncio.gather(*futures)
                futures.clear()
        await asyncio.gather(*futures)
        stored = (await bus.js.stream_info(STREAM_EVENTS)).state.messages
        watch = PipelineWatch()
        recipe = PipelineService(cfg, PipelineOptions(media_enabled=False, observer=watch))
        started = time.perf_counter()
        async with built(Service.PIPELINE, recipe, cfg, nats_url=nats_url, timeout_s=600) as service:
            await asyncio.wait_for(service.components.ready.wait(), 600)
            # Steady state: from the moment every partition is loaded and consuming.
            ready_at, handled_at_ready = time.perf_counter(), watch.handled
            await watch.until(lambda: watch.handled >= stored, HANDLED_TIMEOUT_S)
            ended = time.perf_counter()
        for chat in chats:
            for stream_name, subject in (
                (STREAM_EVENTS, events_subject("feishu", chat)),
                (STREAM_CONTEXT, context_subject("feishu", chat)),
            ):
                stored_subject = subject.replace(".", f".{partition_of('feishu', chat)}.", 1)
                await bus.js.purge_stream(stream_name, subject=stored_subject)
    finally:
        await bus.close()
    measured = stored - handled_at_ready
    return {
        "events": stored,
        "chats": chats_count,
        "startup_seconds": round(ready_at - started, 3),
        "measured_events": measured,
        "seconds": round(ended - ready_at, 3),
        "events_per_s": round(measured / (ended - ready_at)),
        "overall_events_per_s": round(stored / (ended - started)),
    }


async def persist(database_url: str, chats: list[str], events: int) -> int:
    """Fill the ``events`` table with ``events`` interleaved events (bulk Core inserts: set-up, not
    measured). Redeliveries in the traffic are left out, as the unique key would."""
    engine = create_engine(database_url)
    seen: set[tuple[str, str]] = set()
    stored = 0
    try:
        await migrate(engine, MIGRATIONS)
        rows: list[dict[str, object]] = []
        # A little more traffic than needed: ~2 % of it are redeliveries, which are not stored.
        for event in interleaved(chats, events * 21 // 20 // len(chats) + 1):
            if stored + len(rows) >= events:
                break
            key = (event.chat_id, event.dedup_key)
            if key in seen:
                continue
            seen.add(key)
            rows.append(event_row(NewEvent(event)))
            if len(rows) >= 20_000:
                async with engine.begin() as conn:
                    await conn.execute(insert(events_table), rows)
                stored += len(rows)
                rows = []
        if rows:
            async with engine.begin() as conn:
                await conn.execute(insert(events_table), rows)
            stored += len(rows)
    finally:
        await engine.dispose()
    return stored


async def measure_cold_replay(events: int, chats_count: int, root: Path) -> dict[str, Any]:
    """Every stored event replayed (``events``, ``seconds``: the resident budget is lifted, so no chat is
    left asleep), then the same store started as a deployment starts it, with the default resident budget
    (``default_budget``: the chats with the newest events until the budget is spent, the others rebuilt
    on their next event)."""
    chats = [f"oc_replay_{i}" for i in range(chats_count)]
    database_url = f"sqlite+aiosqlite:///{root / 'replay.db'}"
    started = time.perf_counter()
    stored = await persist(database_url, chats, events)
    persisted = time.perf_counter() - started
    engine = create_engine(database_url)
    try:
        repo = EventRepository(engine)
        params = chat_params(bench_config(chats, database_url))
        runs: list[tuple[int, float, int]] = []
        for budget in (UNBOUNDED_BYTES, None):
            sized = {} if budget is None else {"budget_bytes": budget}
            resident = ResidentChats(None, repo, params, {}, RetryPolicy(), **sized)  # type: ignore[arg-type]
            gc.collect()
            started = time.perf_counter()
            replayed = await resident.cold_start([("feishu", chat) for chat in chats])
            runs.append((replayed, time.perf_counter() - started, len(resident.chats)))
            del resident
            gc.unfreeze()  # the replay froze what it built; let the next run's garbage go
            gc.collect()
    finally:
        await engine.dispose()
    (replayed, elapsed, _), (started_events, started_s, resident_chats) = runs
    return {
        "events": replayed,
        "stored": stored,
        "seconds": round(elapsed, 3),
        "events_per_s": round(replayed / elapsed),
        "persist_seconds": round(persisted, 3),
        "default_budget": {
            "events": started_events,
            "seconds": round(started_s, 3),
            "resident_chats": resident_chats,
            "chats": chats_count,
        },
    }


def measure_resident_bytes(chats_count: int = 50) -> int:
    """tracemalloc growth per chat after projecting ``WINDOW`` events into each of ``chats_count`` chats:
    what a resident chat keeps (IC nodes and the event data they reference, rendered segments, alias
    table), measured after everything transient (the decoded stream, the dedup set) is gone."""
    chats = [f"oc_mem_{i}" for i in range(chats_count)]
    params_for = chat_params(bench_config(chats, "sqlite+aiosqlite:///:memory:"))
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        projections: dict[str, Projection] = {}
        for chat in chats:
            params = params_for(Platform.FEISHU, chat)
            assert params is not None
            projections[chat] = Projection(params)
        seen: set[tuple[str, str]] = set()
        for seq, event in enumerate(interleaved(chats, WINDOW), start=1):
            if (event.chat_id, event.dedup_key) in seen:
                continue
            seen.add((event.chat_id, event.dedup_key))
            projections[event.chat_id].apply(event, seq)
        del seen, event
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(projections) == chats_count
    return round(grown / chats_count)


async def measure_reload(chats_count: int, root: Path) -> dict[str, float]:
    """Each of ``chats_count`` chats of ``WINDOW`` persisted events woken from sleep in turn, with a budget
    that holds one chat: every wake-up is a rebuild from the database (cursor, events, decode, reduce,
    render), as :meth:`ResidentChats.wake` does before committing the chat's next event."""
    from .limits import quantiles  # limits builds on this module's set-up

    chats = [f"oc_reload_{i}" for i in range(chats_count)]
    database_url = f"sqlite+aiosqlite:///{root / 'reload.db'}"
    await persist(database_url, chats, chats_count * WINDOW)
    engine = create_engine(database_url)
    try:
        repo = EventRepository(engine)
        params = chat_params(bench_config(chats, database_url))
        resident = ResidentChats(None, repo, params, {}, RetryPolicy(), budget_bytes=1)  # type: ignore[arg-type]
        keys = [("feishu", chat) for chat in chats]
        await resident.cold_start(keys)
        resident.fit()
        took: list[float] = []
        for key in keys:
            started = time.perf_counter()
            await resident.wake([key])
            took.append(time.perf_counter() - started)
            resident.fit(keep=[key])
        assert len(resident.chats) == 1
    finally:
        await engine.dispose()
    return quantiles(took)


async def measure(nats_url: str, quick: bool, *, sizes: tuple[int, int] | None = None) -> dict[str, Any]:
    """The pipeline's figures for ``larkbot bench`` (quick: smaller counts, same code paths). ``sizes``
    (service events, replayed events) overrides the counts, for tests."""
    logging.getLogger("larkbot").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    service_events, replay_events = (5_000, 50_000) if quick else (50_000, 1_000_000)
    if sizes is not None:
        service_events, replay_events = sizes
    with tempfile.TemporaryDirectory(prefix="larkbot-bench-pipeline-") as tmp:
        root = Path(tmp)
        service = await measure_service(
            nats_url, service_events, min(200, max(1, service_events // 50)), root
        )
        replay = await measure_cold_replay(replay_events, min(1000, max(1, replay_events // 1000)), root)
        reload = await measure_reload(20 if quick else 200, root)
    resident = measure_resident_bytes()
    return {
        "pipeline_events_per_s": float(service["events_per_s"]),
        "cold_replay_1m_events_s": replay["seconds"] if replay["events"] >= 1_000_000 else None,
        "null_because": {}
        if replay["events"] >= 1_000_000
        else {
            "cold_replay_1m_events_s": f"{replay['events']:,} events replayed, not 1,000,000"
            " (the rate is cold_replay_events_per_s)"
        },
        "cold_replay_events_per_s": float(replay["events_per_s"]),
        "resident_bytes_per_chat": resident,
        "chat_reload_ms": reload,
        "pipeline": {
            "service": service,
            "cold_replay": replay,
            "resident_window_events": WINDOW,
            "targets": {"pipeline_events_per_s": 5000, "cold_replay_1m_events_s": 60},
        },
    }
