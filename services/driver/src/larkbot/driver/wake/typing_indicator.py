"""The typing indicator shown while the primary turn runs: best-effort, sent beside the turn and never
awaited by it; a missing or failed answer is only counted (``typing_indicators_total``)."""

from __future__ import annotations

import asyncio
import logging

from larkbot.canonical.actions import TypingAction
from larkbot.canonical.errors import ContractError
from larkbot.canonical.names import Platform
from larkbot.runtime.bus import BusUnavailable

from .. import metrics
from .clients import BusClients

log = logging.getLogger(__name__)

#: An ingress that picks a typing indicator up later than this drops it (it would show a stale state).
TYPING_DEADLINE_MS = 5000


class TypingIndicators:
    def __init__(self, clients: BusClients) -> None:
        self.clients = clients
        self._tasks: set[asyncio.Task[None]] = set()

    def show(self, platform: str, chat_id: str, wake_id: str, now_ms: int) -> None:
        action = TypingAction(
            platform=Platform(platform),
            chat_id=chat_id,
            idempotency_key=f"typing-{wake_id}",
            deadline_ms=now_ms + TYPING_DEADLINE_MS,
        )
        task = asyncio.create_task(self._send(action), name=f"typing-{platform}:{chat_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, action: TypingAction) -> None:
        try:
            result = await self.clients.typing(action)
        except (BusUnavailable, ContractError) as exc:
            metrics.TYPING_INDICATORS.labels("unanswered").inc()
            log.info("typing indicator got no usable answer: %s", exc)
            return
        metrics.TYPING_INDICATORS.labels("ok" if result.ok else "failed").inc()
        if not result.ok:
            log.info("typing indicator failed: %s", result.error.code if result.error else "unknown")

    async def close(self) -> None:
        """Drop indicators still waiting for an answer (they are best-effort)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
