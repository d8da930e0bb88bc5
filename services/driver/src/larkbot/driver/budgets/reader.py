"""Reads a chat's speaking budget from the budget buckets the ingress services write (read-only here).

A bucket that does not answer leaves the budget unknown for this wake-up (``None``: no guidance): the
ingress still refuses what a spent budget cannot take, so not knowing costs only the early warning.
"""

from __future__ import annotations

import logging

from larkbot.runtime.budgets.core import SpeakingBudget
from larkbot.runtime.budgets.store import BudgetReader, BudgetUnavailable

__all__ = ["speaking_budget"]

log = logging.getLogger(__name__)


async def speaking_budget(
    reader: BudgetReader, platform: str, chat_id: str, now_ms: int
) -> SpeakingBudget | None:
    try:
        return await reader.read(platform, chat_id, now_ms)
    except BudgetUnavailable as exc:
        log.warning("speaking budget not read: %s", exc)
        return None
