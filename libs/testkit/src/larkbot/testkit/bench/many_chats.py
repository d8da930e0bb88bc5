"""``larkbot bench`` part ``many_chats``: the pipeline's resident chats with many configured chats, few of
them active, within the resident budget (``services.pipeline.resident_budget_mb``, DESIGN §8).

``configured`` chats are configured; ``active`` of them have ``WINDOW`` persisted events each. A fresh
process (so that its resident memory is its own) parses that configuration, loads the 16 partitions as
the service does on acquiring them, then wakes every active chat once in turn, as its next event would,
keeping within the budget. Reported: ``rss_mib`` (VmRSS after all of it), ``ready_s`` (all partitions
loaded), the resident and sleeping chat counts, the estimate held, and ``chat_reload_ms`` of the
wake-ups that rebuilt a chat.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from larkbot.canonical.names import Platform
from larkbot.pipeline.adapters.chats import ResidentChats
from larkbot.pipeline.adapters.repository import EventRepository
from larkbot.pipeline.app import GC_THRESHOLDS
from larkbot.runtime.db import create_engine
from larkbot.runtime.retry import RetryPolicy

from .pipeline import WINDOW, bench_config, chat_params, persist

__all__ = ["measure"]

PARTITIONS = 16


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _chats(configured: int, active: int) -> tuple[list[str], list[str]]:
    chats = [f"oc_many_{i}" for i in range(configured)]
    return chats, chats[:: max(1, configured // active)][:active]


async def _child(configured: int, active: int, budget_mb: int, database_url: str) -> dict[str, Any]:
    from .limits import quantiles  # limits builds on the pipeline bench's set-up

    gc.set_threshold(*GC_THRESHOLDS)  # as the service sets them
    chats, busy = _chats(configured, active)
    config = bench_config(chats, database_url)
    params = chat_params(config)
    engine = create_engine(database_url)
    try:
        repo = EventRepository(engine)
        resident = ResidentChats(
            None,  # type: ignore[arg-type]  # nothing is published: no update is made
            repo,
            params,
            {},
            RetryPolicy(),
            budget_bytes=budget_mb * 1024 * 1024,
        )
        keys = [(Platform.FEISHU.value, chat) for chat in chats]
        started = time.perf_counter()
        await asyncio.gather(*(resident.load_partition(p, keys) for p in range(PARTITIONS)))
        ready_s = time.perf_counter() - started
        rebuilt: list[float] = []
        for chat in busy:
            key = (Platform.FEISHU.value, chat)
            asleep = key not in resident.chats
            began = time.perf_counter()
            await resident.wake([key])
            if asleep:
                rebuilt.append(time.perf_counter() - began)
            resident.fit(keep=[key])
        return {
            "configured": configured,
            "active": active,
            "budget_mb": budget_mb,
            "ready_s": round(ready_s, 2),
            "resident_chats": len(resident.chats),
            "asleep_chats": len(resident.asleep),
            "held_mib": round(resident.held_bytes / 2**20, 1),
            "rss_mib": _rss_mib(),
            "chat_reload_ms": quantiles(rebuilt) if rebuilt else None,
        }
    finally:
        await engine.dispose()


async def measure(configured: int, active: int, budget_mb: int = 512) -> dict[str, Any]:
    logging.getLogger("alembic").setLevel(logging.WARNING)
    _chats_all, busy = _chats(configured, active)
    with tempfile.TemporaryDirectory(prefix="larkbot-bench-many-") as tmp:
        database_url = f"sqlite+aiosqlite:///{Path(tmp) / 'pipeline.db'}"
        await persist(database_url, busy, active * WINDOW)
        argv = [sys.executable, "-m", __name__, str(configured), str(active), str(budget_mb), database_url]
        done = await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the many-chats process failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


if __name__ == "__main__":
    logging.getLogger("alembic").setLevel(logging.WARNING)
    n, a, budget, url = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    print(json.dumps(asyncio.run(_child(n, a, budget, url))))
