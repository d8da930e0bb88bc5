"""``larkbot bench``: one JSON object of figures measured in one run on this machine.

Each service that has something to measure exposes ``larkbot.<service>.bench.measure(nats_url, quick)``
returning some of the keys below. A figure nobody measured is ``null``, never invented. Targets are in
``docs/performance.md``.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from larkbot.runtime.natsserver import EmbeddedNats

#: Every key the report always carries (``null`` until measured).
KEYS: tuple[str, ...] = (
    "turn_overhead_ms",
    "pipeline_events_per_s",
    "cold_replay_1m_events_s",
    "gateway_overhead_ms",
    "cacheable_prefix_ratio",
    "media_thumbnails_per_s",
    "resident_bytes_per_chat",
)

#: Modules providing ``measure``; a module that is not importable contributes nothing.
SOURCES: tuple[str, ...] = (
    "larkbot.pipeline.bench",
    "larkbot.llm_gateway.bench",
    "larkbot.driver.bench",
    "larkbot.media.bench",
)


async def _measure(nats_url: str, quick: bool) -> tuple[dict[str, Any], dict[str, str]]:
    figures: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name in SOURCES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        started = time.perf_counter()
        try:
            figures.update(await module.measure(nats_url, quick))
        except Exception as exc:
            errors[name] = f"{type(exc).__name__}: {exc}"
        figures.setdefault("bench_seconds", {})[name.split(".")[1]] = round(time.perf_counter() - started, 2)
    return figures, errors


def bench(*, quick: bool = False) -> dict[str, Any]:
    report: dict[str, Any] = dict.fromkeys(KEYS)
    report["machine"] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": sys.platform,
    }
    nats_url = os.environ.get("NATS_URL")
    server: EmbeddedNats | None = None
    with tempfile.TemporaryDirectory(prefix="larkbot-bench-") as tmp:
        if not nats_url:
            server = EmbeddedNats(Path(tmp) / "nats")
            nats_url = server.start()
        try:
            figures, errors = asyncio.run(_measure(nats_url, quick))
        finally:
            if server is not None:
                server.stop()
    report.update(figures)
    if errors:
        report["errors"] = errors
    return report


def main(*, as_json: bool, quick: bool) -> int:
    report = bench(quick=quick)
    if as_json:
        print(json.dumps(report, sort_keys=True))
    else:
        print(json.dumps(report, indent=2, sort_keys=True))
    return 1 if report.get("errors") else 0
