"""``larkbot bench --only scale``: the pipeline and then the driver, each with one and then two replicas on
PostgreSQL, in the same run.

Each replica is a ``larkbot run <service>`` process of its own (:class:`~..stack.Stack`), pinned to a core
of its own where the machine has them (``os.sched_setaffinity``). For each replica count, a fresh
database and the replicas started and left to settle their partitions (every one ready, the 16 split).

- Pipeline: ``events`` events over ``chats`` chats published to ``EVENTS`` as fast as the bus takes them;
  the figure is the time from the first publication until the replicas' ``larkbot_pipeline_events_total``
  adds up to all of them. Reported per count: ``events_per_s``, the partitions each replica owns.
- Driver (:mod:`.scale_driver`): members mentioning the bot in their chats in a closed loop, the model
  answering at once: ``turns_per_s``, turn latency under that load (``turn_ms``), and per replica the
  partitions, chats and turns it took.

The counts run one, two, two, one (:func:`order`; ``--quick``: one, two), and ``two_to_one`` and
``driver_two_to_one`` are two replicas' mean rate over one's: the machine's other work moves a single
run's figure by more than a second replica does.

What two cores can show: whether the partitions split evenly and the work moves with them, and whether a
second process adds throughput while NATS, PostgreSQL and the bench process share the same two cores.
They cannot show linear scaling: with two replicas each one shares its core with the server processes
and the load generator, so a second replica's gain is a lower bound of a second node's.
The database comes from ``LARKBOT_BENCH_DATABASE_URL`` (else ``TEST_DATABASE_URL``); without either the part
is skipped with the reason.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from larkbot.canonical.codec import encode, headers_for
from larkbot.canonical.names import HEADER_MSG_ID, PARTITIONS, events_subject, msg_id
from larkbot.runtime.bus import connect
from larkbot.runtime.config import NatsSettings

from ..databases import fresh_postgres
from ..stack import Stack, until
from .pipeline import interleaved
from .progress import note
from .scale_driver import measure_driver

__all__ = ["database_url", "measure"]

READY_TIMEOUT_S = 180.0
HANDLED_TIMEOUT_S = 600.0
OWNED = "larkbot_pipeline_partitions_owned"
HANDLED = "larkbot_pipeline_events_total"


def database_url() -> str | None:
    return os.environ.get("LARKBOT_BENCH_DATABASE_URL") or os.environ.get("TEST_DATABASE_URL")


async def _total(stack: Stack, names: list[str], metric_name: str) -> list[float]:
    """``metric_name`` summed over its series, per replica."""
    return [await stack.scrape(name, metric_name) for name in names]


async def _run(
    nats_url: str, base_url: str, replicas: int, events: int, chats_count: int, root: Path
) -> dict[str, Any]:
    tag = secrets.token_hex(3)
    chats = [f"oc_scale_{tag}_{i}" for i in range(chats_count)]
    stream = list(interleaved(chats, events // chats_count + 1))[:events]
    async with fresh_postgres(base_url, ("pipeline",), prefix="larkbot_bench_scale") as urls:
        stack = Stack(
            root / f"pipeline-{replicas}",
            nats_url,
            {
                "services": {"pipeline": {"database_url": urls["pipeline"], "log_level": "WARNING"}},
                "chats": {"default": {}, **{f"feishu:{chat}": {} for chat in chats}},
            },
        )
        names = stack.add_pinned("pipeline", replicas)
        try:
            await stack.up()

            async def settled() -> bool:
                statuses = [(await stack.readyz(name))[0] for name in names]
                if any(status != 200 for status in statuses):
                    return False
                owned = await _total(stack, names, OWNED)
                return sum(owned) == PARTITIONS and min(owned) > 0

            await until(settled, f"{replicas} pipeline replica(s) ready and balanced", READY_TIMEOUT_S)
            owned = [int(n) for n in await _total(stack, names, OWNED)]
            before = sum(await _total(stack, names, HANDLED))
            bus = await connect(NatsSettings(), "bench-scale", url=nats_url, give_up_after_s=30)
            try:
                started = time.perf_counter()
                futures = []
                acks = []
                for event in stream:
                    dedup = f"{event.chat_id}:{event.dedup_key}"
                    headers = headers_for(event, {HEADER_MSG_ID: msg_id(event.platform.value, dedup)})
                    subject = events_subject(event.platform.value, event.chat_id)
                    futures.append(await bus.js.publish_async(subject, encode(event), headers=headers))
                    if len(futures) >= 2000:
                        acks += await asyncio.gather(*futures)
                        futures.clear()
                acks += await asyncio.gather(*futures)
                published = time.perf_counter()
            finally:
                await bus.close()
            # The stream's duplicate window drops the traffic's few repeats before any replica sees them.
            fresh = sum(1 for ack in acks if not ack.duplicate)

            async def handled() -> bool:
                return sum(await _total(stack, names, HANDLED)) - before >= fresh

            await until(handled, "every event handled", HANDLED_TIMEOUT_S)
            ended = time.perf_counter()
        finally:
            await stack.down()
    return {
        "replicas": replicas,
        "events": len(stream),
        "chats": chats_count,
        "seconds": round(ended - started, 3),
        "publish_seconds": round(published - started, 3),
        "events_per_s": round(len(stream) / (ended - started)),
        "partitions_owned": owned,
    }


def order(quick: bool) -> tuple[int, ...]:
    """The replica counts in the order they run: one, two, two, one — so that other work on the machine
    that grows or fades during the part weighs on both counts alike —, or once each under ``--quick``."""
    return (1, 2) if quick else (1, 2, 2, 1)


def two_to_one(runs: list[dict[str, Any]], rate: str) -> float:
    """Two replicas' mean ``rate`` over one's."""
    mean = {n: statistics.fmean(run[rate] for run in runs if run["replicas"] == n) for n in (1, 2)}
    return round(mean[2] / mean[1], 2)


async def measure(nats_url: str, quick: bool) -> dict[str, Any]:
    base = database_url()
    if base is None:
        return {"scale": {"skipped": "no PostgreSQL: set LARKBOT_BENCH_DATABASE_URL or TEST_DATABASE_URL"}}
    events, chats = (5_000, 100) if quick else (50_000, 500)
    runs = []
    with tempfile.TemporaryDirectory(prefix="larkbot-bench-scale-") as tmp:
        for index, replicas in enumerate(order(quick)):
            note(f"scale: {replicas} pipeline replica(s), {events} events")
            runs.append(await _run(nats_url, base, replicas, events, chats, Path(tmp) / f"p{index}"))
        driver = await measure_driver(nats_url, base, quick, Path(tmp), order(quick))
    return {
        "scale": {
            "pipeline": runs,
            "two_to_one": two_to_one(runs, "events_per_s"),
            "driver": driver,
            "driver_two_to_one": two_to_one(driver, "turns_per_s"),
            "cores": len(os.sched_getaffinity(0)),
        }
    }
