"""``larkbot bench``: one JSON object of figures measured in one run on this machine.

Each measurement is a module of this package; :data:`MEASUREMENTS` maps its results onto the keys below
and runs them in order, each imported only when it runs (``--only`` runs some of them: :func:`select`).
The machine's limits are measured first; after every part ran, :func:`.ratios.ratios` sets each figure
beside its limit. A figure nobody measured is ``null``, never invented. Which part runs, and how far it
is, goes to stderr (:mod:`.progress`); stdout carries the report alone. Targets are in
``docs/performance.md``. The ``larkbot bench`` command is :func:`main`.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from larkbot.runtime.natsserver import EmbeddedNats

from . import progress
from .ratios import PART_OF, ratios

__all__ = ["KEYS", "MEASUREMENTS", "UnknownPart", "bench", "main", "select"]

#: Every key the report always carries (``null`` until measured).
KEYS: tuple[str, ...] = (
    "limits",
    "ratios",
    "turn_overhead_ms",
    "pipeline_events_per_s",
    "cold_replay_1m_events_s",
    "gateway_overhead_ms",
    "cacheable_prefix_ratio",
    "long_chat",
    "long_chat_small",
    "media_thumbnails_per_s",
    "media_frames_per_s",
    "transcription_overhead_ms",
    "resident_bytes_per_chat",
    "chat_reload_ms",
    "many_chats",
    "scale",
    "memory_search_ms",
    "memory_late_binding",
)


async def _limits(nats_url: str, quick: bool) -> dict[str, Any]:
    from .limits import measure

    return await measure(nats_url, quick)


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


async def _many_chats(_nats_url: str, quick: bool) -> dict[str, Any]:
    from .many_chats import measure

    return {"many_chats": await measure(10_000, 100) if quick else await measure(100_000, 1_000)}


async def _scale(nats_url: str, quick: bool) -> dict[str, Any]:
    from .scale import measure

    return await measure(nats_url, quick)


async def _memory(_nats_url: str, quick: bool) -> dict[str, Any]:
    from .memory import measure

    return await measure(quick)


#: Each measurement, in the order it runs; one failing does not stop the others (its error is reported
#: under ``errors`` and its figures stay ``null``).
MEASUREMENTS: tuple[tuple[str, Callable[[str, bool], Awaitable[dict[str, Any]]]], ...] = (
    ("limits", _limits),
    ("llm_gateway", _gateway),
    ("pipeline", _pipeline),
    ("driver", _driver),
    ("long_chat", _long_chat),
    ("media", _media),
    ("turn", _turn),
    ("memory", _memory),
    ("many_chats", _many_chats),
    ("scale", _scale),
)


class UnknownPart(ValueError):
    """``--only`` named a part the bench does not have."""


def select(only: Iterable[str] | None) -> tuple[str, ...]:
    """The parts to run, in the bench's order: every one, or those named in ``only`` (each entry a name
    or a comma-separated list of names)."""
    names = tuple(name for name, _ in MEASUREMENTS)
    if only is None:
        return names
    wanted = {part.strip() for entry in only for part in entry.split(",") if part.strip()}
    unknown = sorted(wanted - set(names))
    if unknown:
        raise UnknownPart(f"unknown bench part {', '.join(unknown)}; the parts are {', '.join(names)}")
    if not wanted:
        raise UnknownPart(f"--only names no part; the parts are {', '.join(names)}")
    return tuple(name for name in names if name in wanted)


async def _measure(
    parts: tuple[str, ...], nats_url: str, quick: bool
) -> tuple[dict[str, Any], dict[str, str]]:
    figures: dict[str, Any] = {"bench_seconds": {}}
    errors: dict[str, str] = {}
    chosen = [(name, measurement) for name, measurement in MEASUREMENTS if name in parts]
    for index, (name, measurement) in enumerate(chosen, start=1):
        started = time.perf_counter()
        with progress.running(index, len(chosen), name):
            try:
                measured = await measurement(nats_url, quick)
                figures.setdefault("null_because", {}).update(measured.pop("null_because", {}))
                figures.update(measured)
            except Exception as exc:
                errors[name] = f"{type(exc).__name__}: {exc}"
        figures["bench_seconds"][name] = round(time.perf_counter() - started, 2)
    return figures, errors


def bench(*, quick: bool = False, only: Iterable[str] | None = None) -> dict[str, Any]:
    """The report of the parts :func:`select` picks from ``only`` (every part when ``None``)."""
    parts = select(only)
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
            figures, errors = asyncio.run(_measure(parts, nats_url, quick))
        finally:
            if server is not None:
                server.stop()
    report.update(figures)
    missing = {name: "did not run (--only)" for name, _ in MEASUREMENTS if name not in parts}
    missing.update((name, "failed") for name in errors)
    report["ratios"] = ratios(report, missing)
    report["null_because"] = null_reasons(report, figures.get("null_because", {}), missing)
    if errors:
        report["errors"] = errors
    return report


def null_reasons(report: dict[str, Any], told: dict[str, str], missing: dict[str, str]) -> dict[str, str]:
    """Why each ``null`` figure of :data:`KEYS` is ``null``: what its part said, else that the part did
    not run or failed; a ``null`` no part explains is named as such, never left without a word."""
    out: dict[str, str] = {}
    for key in KEYS:
        if key == "ratios" or report.get(key) is not None:
            continue
        part = PART_OF[key]
        if key in told:
            out[key] = told[key]
        elif part in missing:
            out[key] = f"the {part} part {missing[part]}"
        else:
            out[key] = f"the {part} part ran and did not measure it"
    return out


def main(*, as_json: bool, quick: bool, only: Iterable[str] | None = None) -> int:
    try:
        report = bench(quick=quick, only=only)
    except UnknownPart as exc:
        print(f"larkbot bench: {exc}", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps(report, sort_keys=True))
    else:
        print(json.dumps(report, indent=2, sort_keys=True))
    return 1 if report.get("errors") else 0
