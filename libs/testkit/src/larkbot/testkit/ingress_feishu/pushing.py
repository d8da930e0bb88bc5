"""Pushing an event over the fake Feishu's long connection as Feishu does: again and again until the
client acknowledges it with 200 (Feishu re-pushes at +15 s, +5 min, …; compressed here to 0.5 s)."""

from __future__ import annotations

import asyncio
from typing import Any

from larkbot.ingress_feishu.fake.server import FakeFeishu

__all__ = ["push_until_accepted"]

RETRY_S = 0.5


async def push_until_accepted(fake: FakeFeishu, envelope: dict[str, Any], timeout_s: float) -> int:
    """Push ``envelope`` until acknowledged with 200 (each attempt waits ``timeout_s`` for the answer);
    returns the attempts that were not."""
    failed = 0
    while True:
        try:
            code = await fake.long_connection.push(envelope, timeout_s)
        except (RuntimeError, TimeoutError, ConnectionError):
            code = 0
        if code == 200:
            return failed
        failed += 1
        await asyncio.sleep(RETRY_S)
