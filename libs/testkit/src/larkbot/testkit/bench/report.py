"""``larkbot bench``: one JSON object of figures measured in one run on this machine.

Each measurement is a module of this package; :data:`MEASUREMENTS` maps its results onto the keys below
and runs them in order, each imported only when it runs. A figure nobody measured is ``null``, never
invented. Targets are in ``docs/performance.md``. The ``larkbot bench`` command is :func:`main`.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
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
    "long_chat",
    "long_chat_small",
    "media_thumbnails_per_s",
    "resident_bytes_per_chat",
    "memory_search_ms",
    "memory_late_binding",
)


async def _gateway(nats_url: str, quick: bool) -> dict[str, Any]:
    from .gateway import measure

    result = await measure(100 if quick else 1000, nats_url)
    return {
        "gateway_overhead_ms": {"p50": result["overhead_p50_ms"], "p99": result["overhead_p99_ms"]},
        "llm_gateway": result,
    }


async def _pipeline(nats_url: str, quick: bool) -> dict[str, Any]:
    from .pipeline import measure

    return await measure(nats_url, quick)


async def _driver(nats_url: str, quick: bool) -> dict[str, Any]:
    from .replay import measure

    return await measure(nats_url, quick)


async def _long_chat(nats_url: str, quick: bool) -> dict[str, Any]:
    from .longchat import measure

    return await measure(nats_url, quick)


async def _media(nats_url: str, quick: bool) -> dict[str, Any]:
    from .media import measure

    return await measure(nats_url, quick)


async def _turn(nats_url: str, quick: bool) -> dict[str, Any]:
    from .turn import measure

    return await measure(nats_url, quick)


async def _memory(_nats_url: str, quick: bool) -> dict[str, Any]:
    from .memory import measure

    return await measure(quick)


#: Each measurement, in the order it runs; one failing does not stop the others (its error is reported
#: under ``errors`` and its figures stay ``null``).
MEASUREMENTS: tuple[tuple[str, Callable[[str, bool], Awaitable[dict[str, Any]]]], ...] = (
    ("llm_gateway", _gateway),
    ("pipeline", _pipeline),
    ("driver", _driver),
    ("long_chat", _long_chat),
    ("media", _media),
    ("turn", _turn),
    ("memory", _memory),
)


async def _measure(nats_url: str, quick: bool) -> tuple[dict[str, Any], dict[str, str]]:
    figures: dict[str, Any] = {"bench_seconds": {}}
    errors: dict[str, str] = {}
    for name, measurement in MEASUREMENTS:
        started = time.perf_counter()
        try:
            figures.update(await measurement(nats_url, quick))
        except Exception as exc:
            errors[name] = f"{type(exc).__name__}: {exc}"
        figures["bench_seconds"][name] = round(time.perf_counter() - started, 2)
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
