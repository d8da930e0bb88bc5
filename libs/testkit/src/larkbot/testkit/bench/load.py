"""``make bench-load``: a sustained load on every service, as processes, with the fake platforms and the
fake model — turn latency, consumer lag and memory over time, written as JSON and plotted as a PNG.

By hand and bounded: ``python -m larkbot.testkit.bench.load --minutes 10`` (``make bench-load``;
``--chats``, ``--rate``, ``--json``, ``--png``). The six services run as ``larkbot run <service>``
processes (:class:`~..stack.Stack`) on an embedded NATS server (or ``NATS_URL``) and SQLite, as
``make up`` runs them (or PostgreSQL: ``--database-url``), with the fake Telegram Bot API, the fake
Feishu and the fake model in this process (the model answers at once: :class:`.load_feed.LoadModel`).
The members' acts are :mod:`.load_traffic`'s, handed over by :mod:`.load_feed`; debounce 0, so a turn's
latency is the system's, not a configured wait.

Every ``sample_s`` the run records: the acts handed over, the mentions asked and answered, the turn
latency p50/p99 of the replies since the last sample, the machine's load average, the consumer lag —
the pipeline's ``EVENTS`` partitions (``larkbot_pipeline_partition_lag_messages``, which the pipeline
refreshes every few seconds), the driver's ``CONTEXT`` partition consumers and the ``MEDIA`` work queue
(pending plus unacknowledged, read from JetStream), and the events the platforms hold for the
ingresses — and each service's resident memory (``VmRSS``) and CPU time. After the traffic it waits,
bounded, until every mention is answered and every lag has drained. ``--smoke`` runs a few chats for a
few seconds: what the test in ``make test`` runs, so the harness cannot rot.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from larkbot.canonical.names import (
    CONSUMER_DRIVER,
    CONSUMER_MEDIA,
    PARTITIONS,
    STREAM_CONTEXT,
    STREAM_MEDIA,
    partition_consumer,
)
from larkbot.ingress_feishu.fake.server import FakeFeishu
from larkbot.ingress_telegram.fake import FakeBotApi
from larkbot.llm_gateway.fake import FakeProvider
from larkbot.runtime.bootstrap import bootstrap
from larkbot.runtime.bus import Bus, connect
from larkbot.runtime.config import NatsSettings
from larkbot.runtime.natsserver import EmbeddedNats

from ..databases import fresh_postgres
from ..stack import LLM_API_KEY, SERVICES, Stack, stack_config
from .limits import quantiles
from .load_feed import LoadModel, Members, feishu_chat_id, telegram_chat_id
from .load_traffic import plan, split

__all__ = ["LoadOptions", "cpu_per_act", "main", "run"]

EVENTS_LAG = "larkbot_pipeline_partition_lag_messages"
MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class LoadOptions:
    chats: int = 1000
    seconds: float = 600.0
    #: Acts per chat per minute.
    rate: float = 1.0
    sample_s: float = 5.0
    #: How long the run may wait, after the traffic, for every answer and every lag to drain.
    drain_timeout_s: float = 300.0
    seed: int = 27


DEFAULT = LoadOptions()
SMOKE = LoadOptions(chats=4, seconds=8.0, rate=30.0, sample_s=1.0, drain_timeout_s=120.0)


async def _lag(bus: Bus, stack: Stack, members: Members) -> dict[str, int | None]:
    context = 0
    # The driver is ready once it has taken every partition over, its consumer declared.
    for partition in range(PARTITIONS):
        info = await bus.js.consumer_info(STREAM_CONTEXT, partition_consumer(CONSUMER_DRIVER, partition))
        context += (info.num_pending or 0) + (info.num_ack_pending or 0)
    media = await bus.js.consumer_info(STREAM_MEDIA, CONSUMER_MEDIA)
    try:
        events: int | None = int(await stack.scrape("pipeline", EVENTS_LAG))
    except aiohttp.ClientError:
        events = None  # the pipeline is starting again
    return {
        "ingress": members.telegram.pending_updates + members.pushing,
        "events": events,
        "context": context,
        "media": (media.num_pending or 0) + (media.num_ack_pending or 0),
    }


async def _sample(bus: Bus, stack: Stack, members: Members, t0: float) -> dict[str, Any]:
    fresh = members.replies()
    window = quantiles(fresh) if fresh else None
    rss = {name: stack.rss_bytes(name) for name in stack.services}
    cpu = {name: stack.cpu_seconds(name) for name in stack.services}
    return {
        "t_s": round(time.monotonic() - t0, 2),
        "loadavg": round(os.getloadavg()[0], 2),
        "acts": sum(members.acts.values()),
        "asked": len(members.asked),
        "answered": len(members.answered),
        "turn_p50_ms": window["p50"] if window else None,
        "turn_p99_ms": window["p99"] if window else None,
        "lag": await _lag(bus, stack, members),
        "rss_mib": {name: round(value / MIB, 1) if value else None for name, value in rss.items()},
        "cpu_s": {name: None if value is None else round(value, 2) for name, value in cpu.items()},
    }


async def _restart_exited(stack: Stack, sample: dict[str, Any], restarts: list[dict[str, Any]]) -> None:
    """As a deployment's supervisor does (``larkbot up``, Kubernetes): a service process that ended is
    started again, and the exit is kept with its log's tail."""
    for name, status in stack.exited().items():
        tail = [line[:300] for line in stack.tail(name, 5).splitlines()]
        restarts.append({"t_s": sample["t_s"], "service": name, "status": status, "log": tail})
        _say(f"{name} exited with status {status} at {sample['t_s']:.0f} s: started again")
        await stack.start(name)


def _log_counts(stack: Stack) -> dict[str, dict[str, int]]:
    """Per service, its log lines of level warning and above, counted by level and message."""
    counts: dict[str, dict[str, int]] = {}
    for name, service in stack.services.items():
        found: Counter[str] = Counter()
        if service.log_path.exists():
            for line in service.log_path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    record = json.loads(line)
                except ValueError:
                    found["(not JSON)"] += 1
                    continue
                if record.get("level") in ("warning", "error", "critical"):
                    found[f"{record['level']}: {record.get('msg', '')}"] += 1
        counts[name] = dict(found.most_common(12))
    return counts


def _drained(sample: dict[str, Any]) -> bool:
    return sample["answered"] >= sample["asked"] and all(value == 0 for value in sample["lag"].values())


async def run(
    nats_url: str, options: LoadOptions, root: Path, database_url: str | None = None
) -> dict[str, Any]:
    """One load run on the NATS server at ``nats_url``; the services' files and logs under ``root``. The
    pipeline and the driver keep their tables in SQLite under ``root``, or in fresh databases on the
    PostgreSQL server of ``database_url``."""
    if database_url is None:
        return await _run(nats_url, options, root, {})
    async with fresh_postgres(database_url, ("pipeline", "driver"), prefix="larkbot_bench_load") as urls:
        return await _run(nats_url, options, root, urls)


async def _run(nats_url: str, options: LoadOptions, root: Path, databases: dict[str, str]) -> dict[str, Any]:
    telegram_chats, feishu_chats = split(options.chats)
    script = LoadModel()
    telegram, feishu = FakeBotApi(), FakeFeishu()
    llm = FakeProvider(script, api_key=LLM_API_KEY, keep_calls=False)
    await telegram.start()
    await feishu.start()
    await llm.start()
    members = Members(telegram, feishu)
    chats: dict[str, dict[str, Any]] = {f"telegram:{telegram_chat_id(i)}": {} for i in range(telegram_chats)}
    for i in range(feishu_chats):
        chats[f"feishu:{feishu_chat_id(i)}"] = {}
        feishu.chat_names[feishu_chat_id(i)] = f"Load group {i}"
    config = stack_config(root, feishu, telegram, llm.url, chats, {}, {"initial_delay_ms": 0})
    config["services"] = {name.replace("-", "_"): {"log_level": "WARNING"} for name in SERVICES}
    for name, url in databases.items():
        config["services"][name]["database_url"] = url
    stack = Stack(root, nats_url, config)
    stack.add(*SERVICES)
    bus = await connect(NatsSettings(), "bench-load", url=nats_url, give_up_after_s=30)
    samples: list[dict[str, Any]] = []
    load_before = os.getloadavg()
    try:
        await bootstrap(bus.js)
        started = time.monotonic()
        await stack.up()
        await feishu.long_connection.wait_connected(timeout_s=120)
        ready_s = time.monotonic() - started
        _say(f"services ready in {ready_s:.0f} s; {options.chats} chats for {options.seconds:g} s")
        t0 = time.monotonic()
        next_sample = t0 + options.sample_s
        restarts: list[dict[str, Any]] = []
        for act in plan(options.chats, options.seconds, options.rate, options.seed):
            while True:
                now = time.monotonic()
                if now >= next_sample:
                    samples.append(await _sample(bus, stack, members, t0))
                    next_sample += options.sample_s
                    _progress(samples[-1])
                    await _restart_exited(stack, samples[-1], restarts)
                elif t0 + act.at_s > now:
                    await asyncio.sleep(min(t0 + act.at_s, next_sample) - now)
                else:
                    break
            members.act(act)
        traffic_s = time.monotonic() - t0
        deadline = time.monotonic() + options.drain_timeout_s
        calm = 0
        while calm < 2 and time.monotonic() < deadline:
            await asyncio.sleep(max(0.0, next_sample - time.monotonic()))
            next_sample = max(next_sample + options.sample_s, time.monotonic())
            samples.append(await _sample(bus, stack, members, t0))
            _progress(samples[-1])
            await _restart_exited(stack, samples[-1], restarts)
            calm = calm + 1 if _drained(samples[-1]) else 0
        drained_s = samples[-1]["t_s"] - traffic_s if calm >= 2 else None
        await members.settle()
    finally:
        await bus.close()
        log_counts = _log_counts(stack)
        try:
            await stack.down()
        finally:
            await llm.stop()
            await feishu.stop()
            await telegram.stop()
    latencies = [
        members.answered[token] - asked for token, asked in members.asked.items() if token in members.answered
    ]
    return {
        "options": {
            "chats": {"telegram": telegram_chats, "feishu": feishu_chats},
            "database": "postgresql" if databases else "sqlite",
            "seconds": options.seconds,
            "acts_per_chat_per_min": options.rate,
            "sample_s": options.sample_s,
            "seed": options.seed,
        },
        "ready_s": round(ready_s, 1),
        "traffic_s": round(traffic_s, 1),
        "acts": dict(sorted(members.acts.items())),
        "model_calls": dict(sorted(script.calls.items())),
        "turns": {
            "asked": len(members.asked),
            "answered": len(members.answered),
            "withdrawn": members.withdrawn,
            "turn_ms": quantiles(latencies) if latencies else None,
        },
        "drained_after_s": None if drained_s is None else round(drained_s, 1),
        "restarts": restarts,
        "lag_max": _lag_max(samples),
        "rss_mib": _rss_summary(samples),
        "cpu_ms_per_act": cpu_per_act(samples),
        "feishu_push_retries": members.push_retries,
        "log_counts": log_counts,
        "machine": {
            "cpus": os.cpu_count(),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        },
        "samples": samples,
    }


def _lag_max(samples: list[dict[str, Any]]) -> dict[str, int]:
    keys = samples[0]["lag"] if samples else {}
    return {key: max(s["lag"][key] or 0 for s in samples) for key in keys}


def _rss_summary(samples: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    summary: dict[str, dict[str, float | None]] = {}
    for name in samples[0]["rss_mib"] if samples else ():
        values = [s["rss_mib"][name] for s in samples if s["rss_mib"][name] is not None]
        summary[name] = {
            "first": values[0] if values else None,
            "max": max(values) if values else None,
            "last": values[-1] if values else None,
        }
    return summary


def cpu_per_act(samples: list[dict[str, Any]]) -> dict[str, float]:
    """Each service's CPU time from the first sample to the last, per act handed over in between. A
    restarted process counts from 0 again: what it used before its first sample is counted whole (what a
    process used between its last sample and its end is lost, at most one sample's worth)."""
    if len(samples) < 2:
        return {}
    acts = samples[-1]["acts"] - samples[0]["acts"]
    spent: Counter[str] = Counter()
    for before, after in itertools.pairwise(samples):
        for name, used in after["cpu_s"].items():
            was = before["cpu_s"][name]
            if used is not None:
                spent[name] += used - was if was is not None and used >= was else used
    return {name: round(spent[name] * 1000 / max(1, acts), 2) for name in samples[-1]["cpu_s"]}


def _say(line: str) -> None:
    print(f"[bench-load] {line}", file=sys.stderr, flush=True)


def _progress(sample: dict[str, Any]) -> None:
    lag = " ".join(f"{key} {value}" for key, value in sample["lag"].items())
    _say(
        f"{sample['t_s']:7.1f} s  acts {sample['acts']}  answered {sample['answered']}/{sample['asked']}"
        f"  p99 {sample['turn_p99_ms']} ms  lag: {lag}"
    )


async def _interruptible(work: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    """``work``, cancelled on SIGINT or SIGTERM so that it stops the services it started (a run started in
    the background of a shell ignores SIGINT, and Python's default SIGTERM would leave them running)."""
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    return await task


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m larkbot.testkit.bench.load", description=__doc__)
    parser.add_argument("--minutes", type=float, default=DEFAULT.seconds / 60, help="traffic duration")
    parser.add_argument("--chats", type=int, default=DEFAULT.chats)
    parser.add_argument("--rate", type=float, default=DEFAULT.rate, help="acts per chat per minute")
    parser.add_argument("--sample-s", type=float, default=DEFAULT.sample_s)
    parser.add_argument("--smoke", action="store_true", help="a few chats for a few seconds")
    parser.add_argument("--json", type=Path, help="write the report here (default: stdout)")
    parser.add_argument("--png", type=Path, help="plot the run here")
    parser.add_argument(
        "--database-url",
        help="a PostgreSQL server for the pipeline's and driver's tables (fresh databases; default: SQLite)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep the services' logs and databases here (default: a temporary directory)",
    )
    args = parser.parse_args(argv)
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        parser.error(f"--keep {args.keep} is not empty: a run starts from nothing")
    options = (
        SMOKE
        if args.smoke
        else LoadOptions(chats=args.chats, seconds=args.minutes * 60, rate=args.rate, sample_s=args.sample_s)
    )
    with tempfile.TemporaryDirectory(prefix="larkbot-bench-load-") as tmp:
        server: EmbeddedNats | None = None
        nats_url = os.environ.get("NATS_URL")
        if not nats_url:
            server = EmbeddedNats(Path(tmp) / "nats")
            nats_url = server.start()
        try:
            root = args.keep or Path(tmp) / "stack"
            report = asyncio.run(_interruptible(run(nats_url, options, root, args.database_url)))
        finally:
            if server is not None:
                server.stop()
    text = json.dumps(report, indent=1, sort_keys=True)
    if args.json is None:
        print(text)
    else:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n", encoding="utf-8")
    if args.png is not None:
        from .load_plot import plot

        plot(report, args.png)
    return 0 if report["drained_after_s"] is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())
