"""The speaking budget's guidance (pure): lines for the late-binding message — never the cached prefix,
since they change with every send — once a budget runs low.

Low means at most :data:`LOW_SHARE` of the budget left (a quarter: with Telegram's 20 a minute, five
messages; with a day of 5,000 calls, 1,250) — early enough for the bot to shorten its replies before a
send is refused, late enough that a healthy budget costs no words. A budget with nothing left says so
plainly: a send now would be refused (``budget_spent``).
"""

from __future__ import annotations

from typing import Final

from larkbot.runtime.budgets.core import SpeakingBudget

__all__ = ["LOW_SHARE", "guidance"]

LOW_SHARE: Final = 0.25


def _low(left: int | None, limit: int | None) -> bool:
    return left is not None and bool(limit) and left <= (limit or 0) * LOW_SHARE


def guidance(budget: SpeakingBudget | None) -> tuple[str, ...]:
    """The lines to add, none while every budget is healthy (or unknown)."""
    if budget is None:
        return ()
    lines: list[str] = []
    if _low(budget.minute, budget.minute_limit):
        if budget.minute == 0:
            lines.append(
                f"Speaking budget: spent for this minute in this chat (the operator allows "
                f"{budget.minute_limit} messages a minute) — a message now would be refused; stay silent "
                "or react."
            )
        else:
            lines.append(
                f"Speaking budget: {budget.minute} more message(s) in this chat this minute (the operator "
                f"allows {budget.minute_limit}); each part of a long reply counts. Keep to what matters."
            )
    for left, limit, period in (
        (budget.day, budget.day_limit, "today"),
        (budget.month, budget.month_limit, "this month"),
    ):
        if not _low(left, limit):
            continue
        if left == 0:
            lines.append(
                f"Speaking budget: the platform's API calls for {period} are spent ({limit}) — nothing you "
                "send or do on the platform will go through until it resets; stay silent."
            )
        else:
            lines.append(
                f"Speaking budget: {left} of {limit} platform API calls left {period} (each message, "
                "reaction and lookup counts). Speak only when it matters, briefly."
            )
    return tuple(lines)
