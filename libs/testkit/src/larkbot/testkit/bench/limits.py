"""``limits`` for ``larkbot bench`` (DESIGN §8): this machine's limits, measured in the same run as the
figures they bound, over the same NATS server and the same SQLite set-up the services use.

- ``nats_round_trip_ms``: a core-NATS request and its reply (1 KB each way), requester and responder on
  two connections of this process;
- ``jetstream_publish_ms``: one publish awaited until its acknowledgement (as the ingress publishes an
  event, and as a KV ``create`` claims a sent-ledger key);
- ``jetstream_delivery_ms``: a publish until the message reaches a pull request already waiting for it
  (:class:`~larkbot.runtime.pull.PullStream`, as the pipeline's and the driver's readers wait);
- ``jetstream_publish_per_s``: publications pipelined in batches of ``BATCH`` — ``publish_async`` for each,
  then one ``gather`` of their acknowledgements, as the pipeline publishes context updates;
- ``jetstream_consume_per_s``: the same messages read back through a reader consumer
  (:func:`~larkbot.runtime.bootstrap.declare_reader`, no acknowledgements) in pull batches of ``BATCH``,
  as the pipeline's partition readers read;
- ``sqlite_commit_ms``: one transaction inserting one ``events`` row, committed; ``sqlite_read_ms``: one
  row read by its key; ``sqlite_insert_rows_per_s``: ``events`` rows inserted ``BATCH`` per transaction —
  all through SQLAlchemy async and aiosqlite in WAL mode (:func:`larkbot.runtime.db.create_engine`) on the
  pipeline's own schema;
- ``reduce_render_events_per_s``: :meth:`Projection.apply <larkbot.pipeline.core.Projection.apply>` alone
  (reduce, then render what changed), in this process, no I/O, over the pipeline bench's synthetic traffic
  interleaved over ``CHATS`` chats.

Each is a lower bound of what the services pay for the same work (a service adds its own code around
it); ``larkbot.testkit.bench.ratios`` sets the figures beside them.
"""

from __future__ import annotations

import asyncio
import gc
import secrets
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import StorageType, StreamConfig
from sqlalchemy import insert, select

from larkbot.canonical.events import CanonicalEvent
from larkbot.canonical.names import Platform
from larkbot.pipeline.adapters.tables import events as events_table
from larkbot.pipeline.adapters.writes import NewEvent, event_row
from larkbot.pipeline.app import MIGRATIONS
from larkbot.pipeline.core import Projection
from larkbot.runtime.bootstrap import declare_reader
from larkbot.runtime.bus import flush
from larkbot.runtime.db import create_engine, migrate
from larkbot.runtime.pull import PullStream

from .pipeline import bench_config, chat_params, interleaved
from .progress import note

__all__ = ["BATCH", "CHATS", "PAYLOAD_BYTES", "Sizes", "measure", "quantiles"]

#: Messages per pipelined publish round and per pull request, rows per batched transaction: the
#: partition reader's pull batch (``larkbot.runtime.reader.PartitionReader``).
BATCH = 500
#: Bytes of each NATS request, reply and JetStream message (an event or a context update is of this order).
PAYLOAD_BYTES = 1024
#: Chats the reduce+render loop interleaves its traffic over (the pipeline bench's service run has 200).
CHATS = 200


@dataclass(frozen=True, slots=True)
class Sizes:
    """How many of each: ``latencies`` single operations per latency, ``bulk`` messages or rows per rate,
    ``events`` for the reduce+render rate."""

    latencies: int
    bulk: int
    events: int

    @classmethod
    def of(cls, quick: bool) -> Sizes:
        return cls(200, 5_000, 20_000) if quick else cls(2_000, 50_000, 200_000)


def quantiles(seconds: list[float]) -> dict[str, float]:
    """p50 and p99 in milliseconds (nearest rank), and the count."""
    ordered = sorted(seconds)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000, 3)

    return {
        "p50": at(0.5),
        "p99": at(0.99),
        "mean": round(statistics.fmean(ordered) * 1000, 3),
        "n": len(ordered),
    }


async def _round_trips(nats_url: str, n: int) -> dict[str, float]:
    subject = f"bench.limits.echo.{secrets.token_hex(4)}"
    requester = await nats.connect(nats_url)
    responder = await nats.connect(nats_url)
    payload = secrets.token_bytes(PAYLOAD_BYTES)

    async def echo(msg: Msg) -> None:
        await msg.respond(msg.data)

    try:
        await responder.subscribe(subject, cb=echo)
        await flush(responder)
        times: list[float] = []
        for i in range(n + n // 10):  # the first tenth warms up
            started = time.perf_counter()
            await requester.request(subject, payload, timeout=5)
            if i >= n // 10:
                times.append(time.perf_counter() - started)
    finally:
        await requester.close()
        await responder.close()
    return quantiles(times)


async def _jetstream(nats_url: str, sizes: Sizes) -> dict[str, Any]:
    tag = secrets.token_hex(4)
    stream, bulk_subject, live_subject = (
        f"BENCH_LIMITS_{tag}",
        f"bench.limits.{tag}.bulk",
        f"bench.limits.{tag}.live",
    )
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    payload = secrets.token_bytes(PAYLOAD_BYTES)
    try:
        # The services' streams are file-backed (``runtime.bootstrap.stream_config``), and so is this one.
        await js.add_stream(
            StreamConfig(name=stream, subjects=[f"bench.limits.{tag}.>"], storage=StorageType.FILE)
        )
        published: list[float] = []
        for _ in range(sizes.latencies):
            started = time.perf_counter()
            await js.publish(bulk_subject, payload)
            published.append(time.perf_counter() - started)

        started = time.perf_counter()
        for offset in range(0, sizes.bulk, BATCH):
            futures = [
                await js.publish_async(bulk_subject, payload) for _ in range(min(BATCH, sizes.bulk - offset))
            ]
            await asyncio.gather(*futures)
        publish_s = time.perf_counter() - started
        note(f"JetStream publish {round(sizes.bulk / publish_s):,}/s")

        total = sizes.latencies + sizes.bulk
        await declare_reader(js, stream, f"bulk-{tag}", bulk_subject)
        pull = PullStream(js, stream, f"bulk-{tag}", batch=BATCH, expires_s=5.0)
        await pull.start()
        received = 0
        started = time.perf_counter()
        try:
            while received < total:
                batch = await pull.next_batch(5.0)
                if not batch:
                    raise TimeoutError(f"pull consumer stalled at {received} of {total} messages")
                received += len(batch)
        finally:
            await pull.close()
        consume_s = time.perf_counter() - started

        delivered = await _deliveries(nc, stream, f"live-{tag}", live_subject, payload, sizes.latencies)
    finally:
        try:
            await js.delete_stream(stream)
        finally:
            await nc.close()
    return {
        "jetstream_publish_ms": quantiles(published),
        "jetstream_delivery_ms": quantiles(delivered),
        "jetstream_publish_per_s": round(sizes.bulk / publish_s),
        "jetstream_consume_per_s": round(received / consume_s),
    }


async def _deliveries(
    nc: NATS, stream: str, consumer: str, subject: str, payload: bytes, n: int
) -> list[float]:
    js = nc.jetstream()
    await declare_reader(js, stream, consumer, subject)
    pull = PullStream(js, stream, consumer, batch=1, expires_s=30.0)
    await pull.start()
    times: list[float] = []

    async def arrival() -> float:
        # Stamped where the message is handed over, not where the publisher's acknowledgement returns.
        if not await pull.next_batch(5.0):
            raise TimeoutError("a published message did not reach the waiting pull request")
        return time.perf_counter()

    try:
        for _ in range(n):
            # A zero timeout only opens the pull request; the flush has it at the server before the publish.
            await pull.next_batch(0)
            await flush(nc)
            started = time.perf_counter()
            arrived = asyncio.ensure_future(arrival())
            await js.publish(subject, payload)
            times.append(await arrived - started)
    finally:
        await pull.close()
    return times


async def _sqlite(root: Path, sizes: Sizes) -> dict[str, Any]:
    chats = [f"oc_limits_{i}" for i in range(CHATS)]
    rows = _rows(chats, sizes.latencies + sizes.bulk)
    engine = create_engine(f"sqlite+aiosqlite:///{root / 'limits.db'}")
    try:
        await migrate(engine, MIGRATIONS)
        commits: list[float] = []
        for row in rows[: sizes.latencies]:
            started = time.perf_counter()
            async with engine.begin() as conn:
                await conn.execute(insert(events_table), [row])
            commits.append(time.perf_counter() - started)

        bulk = rows[sizes.latencies :]
        started = time.perf_counter()
        for offset in range(0, len(bulk), BATCH):
            async with engine.begin() as conn:
                await conn.execute(insert(events_table), bulk[offset : offset + BATCH])
        insert_s = time.perf_counter() - started

        reads: list[float] = []
        for n in range(sizes.latencies):
            query = select(events_table).where(events_table.c.id == 1 + (n * 7919) % len(rows))
            started = time.perf_counter()
            async with engine.connect() as conn:
                (await conn.execute(query)).one()
            reads.append(time.perf_counter() - started)
    finally:
        await engine.dispose()
    return {
        "sqlite_commit_ms": quantiles(commits),
        "sqlite_read_ms": quantiles(reads),
        "sqlite_insert_rows_per_s": round(len(bulk) / insert_s),
    }


def _rows(chats: list[str], count: int) -> list[dict[str, object]]:
    """``count`` distinct ``events`` rows of the synthetic traffic (redeliveries left out, as the unique
    key would)."""
    return [event_row(NewEvent(event)) for event in _distinct(chats, count)]


def _distinct(chats: list[str], count: int) -> list[CanonicalEvent]:
    seen: set[tuple[str, str]] = set()
    out: list[CanonicalEvent] = []
    # A little more traffic than needed: ~2 % of it are redeliveries.
    for event in interleaved(chats, count * 21 // 20 // len(chats) + 1):
        if len(out) >= count:
            break
        key = (event.chat_id, event.dedup_key)
        if key not in seen:
            seen.add(key)
            out.append(event)
    return out


def _reduce_render(events: int) -> dict[str, Any]:
    chats = [f"oc_reduce_{i}" for i in range(CHATS)]
    stream = _distinct(chats, events)
    params_for = chat_params(bench_config(chats, "sqlite+aiosqlite:///:memory:"))
    projections: dict[str, Projection] = {}
    for chat in chats:
        params = params_for(Platform.FEISHU, chat)
        assert params is not None
        projections[chat] = Projection(params)
    gc.collect()
    started = time.perf_counter()
    for seq, event in enumerate(stream, start=1):
        projections[event.chat_id].apply(event, seq)
    elapsed = time.perf_counter() - started
    return {"reduce_render_events_per_s": round(len(stream) / elapsed), "reduce_render_events": len(stream)}


async def measure(nats_url: str, quick: bool, *, sizes: Sizes | None = None) -> dict[str, Any]:
    """The ``limits`` object of the report (quick: smaller counts, same code paths)."""
    sizes = sizes or Sizes.of(quick)
    limits: dict[str, Any] = {"nats_round_trip_ms": await _round_trips(nats_url, sizes.latencies)}
    note(f"NATS round trip p50 {limits['nats_round_trip_ms']['p50']} ms")
    limits.update(await _jetstream(nats_url, sizes))
    note(f"JetStream consume {limits['jetstream_consume_per_s']:,}/s")
    with tempfile.TemporaryDirectory(prefix="larkbot-bench-limits-") as tmp:
        limits.update(await _sqlite(Path(tmp), sizes))
    note(f"SQLite commit p50 {limits['sqlite_commit_ms']['p50']} ms")
    limits.update(_reduce_render(sizes.events))
    limits["sizes"] = {
        "latencies": sizes.latencies,
        "bulk": sizes.bulk,
        "batch": BATCH,
        "payload_bytes": PAYLOAD_BYTES,
    }
    return {"limits": limits}
