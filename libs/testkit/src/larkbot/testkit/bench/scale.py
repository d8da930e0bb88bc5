"""``larkbot bench --only scale``: the pipeline with one and then two replicas on PostgreSQL, in the same run.

Each replica is a ``larkbot run pipeline`` process of its own, pinned to a core of its own where the
machine has them (``os.sched_setaffinity``). For each replica count: a fresh database, the replicas
started and left to settle their partitions (every one ready), then ``events`` events over ``chats``
chats published to ``EVENTS`` as fast as the bus takes them; the figure is the time from the first
publication until the replicas' ``larkbot_pipeline_events_total`` adds up to all of them. Reported per
count: ``events_per_s``, the partitions each replica owns (the balance), and the ratio of two replicas'
rate to one's.

What two cores can show: whether the partitions split evenly and the work moves with them, and whether a
second process adds throughput while NATS, PostgreSQL and this publisher share the same two cores. They
cannot show linear scaling: with two replicas each one shares its core with the server processes.
The database comes from ``LARKBOT_BENCH_DATABASE_URL`` (else ``TEST_DATABASE_URL``); without either the part
is skipped with the reason.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from larkbot.canonical.codec import encode, headers_for
from larkbot.canonical.names import HEADER_MSG_ID, PARTITIONS, events_subject, msg_id
from larkbot.runtime.bus import connect
from larkbot.runtime.config import NatsSettings

from ..databases import fresh_postgres
from .pipeline import interleaved
from .progress import note

__all__ = ["database_url", "measure"]

PORT_BASE = 19_300
READY_TIMEOUT_S = 180.0
HANDLED_TIMEOUT_S = 600.0
OWNED = "larkbot_pipeline_partitions_owned"
HANDLED = "larkbot_pipeline_events_total"


def database_url() -> str | None:
    return os.environ.get("LARKBOT_BENCH_DATABASE_URL") or os.environ.get("TEST_DATABASE_URL")


def _metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            head, _, value = line.rpartition(" ")
            if head.partition("{")[0] == name:
                total += float(value)
    return total


async def _scrape(http: aiohttp.ClientSession, port: int, path: str) -> tuple[int, str]:
    try:
        async with http.get(f"http://127.0.0.1:{port}{path}") as resp:
            return resp.status, await resp.text()
    except aiohttp.ClientError as exc:
        return 0, type(exc).__name__


async def _values(http: aiohttp.ClientSession, ports: list[int], name: str) -> list[float]:
    """``name`` summed over its series, per replica."""
    return [_metric((await _scrape(http, port, "/metrics"))[1], name) for port in ports]


async def _until(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not await predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:g} s waiting for {what}")
        await asyncio.sleep(0.2)


async def _run(
    nats_url: str, base_url: str, replicas: int, events: int, chats_count: int, root: Path
) -> dict[str, Any]:
    tag = secrets.token_hex(3)
    chats = [f"oc_scale_{tag}_{i}" for i in range(chats_count)]
    stream = list(interleaved(chats, events // chats_count + 1))[:events]
    cores = sorted(os.sched_getaffinity(0))
    async with (
        fresh_postgres(base_url, ("pipeline",), prefix="larkbot_bench_scale") as urls,
        aiohttp.ClientSession() as http,
    ):
        url = urls["pipeline"]
        procs = []
        ports = [PORT_BASE + n for n in range(replicas)]
        try:
            for n, port in enumerate(ports):
                config = {
                    "services": {
                        "pipeline": {"database_url": url, "http_port": port, "log_level": "WARNING"}
                    },
                    "chats": {"default": {}, **{f"feishu:{chat}": {} for chat in chats}},
                }
                path = root / f"config-{replicas}-{n}.yaml"
                path.write_text(yaml.safe_dump(config), encoding="utf-8")
                env = {k: v for k, v in os.environ.items() if not k.startswith("LARKBOT_")}
                env.update(NATS_URL=nats_url, LARKBOT_CONFIG=str(path))
                core = {cores[n % len(cores)]}
                log = (root / f"pipeline-{replicas}-{n}.log").open("ab")
                procs.append(
                    await asyncio.create_subprocess_exec(
                        sys.executable,
                        "-m",
                        "larkbot.cli",
                        "run",
                        "pipeline",
                        stdout=log,
                        stderr=asyncio.subprocess.STDOUT,
                        env=env,
                        preexec_fn=lambda core=core: os.sched_setaffinity(0, core),  # type: ignore[misc]
                    )
                )
                log.close()

            async def settled() -> bool:
                statuses = [await _scrape(http, port, "/readyz") for port in ports]
                if any(status != 200 for status, _ in statuses):
                    return False
                owned = await _values(http, ports, OWNED)
                return sum(owned) == PARTITIONS and min(owned) > 0

            await _until(settled, READY_TIMEOUT_S, f"{replicas} pipeline replica(s) ready and balanced")
            owned = [int(n) for n in await _values(http, ports, OWNED)]
            before = sum(await _values(http, ports, HANDLED))
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
                return sum(await _values(http, ports, HANDLED)) - before >= fresh

            await _until(handled, HANDLED_TIMEOUT_S, "every event handled")
            ended = time.perf_counter()
        finally:
            for proc in procs:
                if proc.returncode is None:
                    proc.terminate()
            for proc in procs:
                try:
                    await asyncio.wait_for(proc.wait(), 60)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
    return {
        "replicas": replicas,
        "events": len(stream),
        "chats": chats_count,
        "seconds": round(ended - started, 3),
        "publish_seconds": round(published - started, 3),
        "events_per_s": round(len(stream) / (ended - started)),
        "partitions_owned": owned,
    }


async def measure(nats_url: str, quick: bool) -> dict[str, Any]:
    base = database_url()
    if base is None:
        return {"scale": {"skipped": "no PostgreSQL: set LARKBOT_BENCH_DATABASE_URL or TEST_DATABASE_URL"}}
    events, chats = (5_000, 100) if quick else (50_000, 500)
    runs = []
    with tempfile.TemporaryDirectory(prefix="larkbot-bench-scale-") as tmp:
        for replicas in (1, 2):
            note(f"scale: {replicas} pipeline replica(s), {events} events")
            runs.append(await _run(nats_url, base, replicas, events, chats, Path(tmp)))
    one, two = runs
    return {
        "scale": {
            "pipeline": runs,
            "two_to_one": round(two["events_per_s"] / one["events_per_s"], 2),
            "cores": len(os.sched_getaffinity(0)),
            "driver": "not measured: the driver's scale-out is not in this part yet",
        }
    }
