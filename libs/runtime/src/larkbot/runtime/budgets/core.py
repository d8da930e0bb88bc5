"""Budget arithmetic (pure): what a spend does to a stored count, and what is left.

Two shapes of budget, each one KV value:

- a chat's messages per minute — a sliding window: the value is the send times (epoch ms) of the last
  60 s and the limit they were counted against. A sliding window rather than a per-minute counter,
  because Telegram's limit is on any 60 s: a counter reset at :00 would let 2 × the limit through
  across the boundary;
- a platform's API calls per UTC day and per UTC month — counters with the day and month they count,
  rolled over by the first spend of a new period. One value for both, so one compare-and-set spends
  both or neither.

A spend of ``cost`` is granted whole or refused whole (a long text's parts are one spend), and a refusal
says when a spend of that cost could be granted (:class:`Refused`). A limit of ``0`` is unlimited; an
unlimited scope is not stored at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Literal

__all__ = [
    "MINUTE_MS",
    "SCOPES",
    "CallLimits",
    "Calls",
    "Granted",
    "MinuteWindow",
    "Refused",
    "Scope",
    "SpeakingBudget",
    "calls_remaining",
    "minute_remaining",
    "period_of",
    "seconds_to_reset",
    "spend_calls",
    "spend_minute",
]

Scope = Literal["minute", "day", "month"]
SCOPES: Final[tuple[Scope, ...]] = ("minute", "day", "month")
MINUTE_MS: Final = 60_000


@dataclass(frozen=True, slots=True)
class Granted:
    """The spend is booked; ``remaining`` is what its scope (the tightest, for calls) has left."""

    remaining: int


@dataclass(frozen=True, slots=True)
class Refused:
    """The budget of ``scope`` (``limit``) cannot take the spend before ``retry_after_s`` from now."""

    scope: Scope
    limit: int
    retry_after_s: float


@dataclass(frozen=True, slots=True)
class MinuteWindow:
    """A chat's sends of the last minute (epoch ms, oldest first) and the limit they were counted
    against (the driver reads it to tell the bot what is left)."""

    limit: int
    sent_ms: tuple[int, ...] = ()

    def encode(self) -> bytes:
        return json.dumps(
            {"limit": self.limit, "sent_ms": list(self.sent_ms)}, separators=(",", ":")
        ).encode()

    @classmethod
    def decode(cls, data: bytes) -> MinuteWindow:
        raw = json.loads(data)
        return cls(int(raw["limit"]), tuple(sorted(int(t) for t in raw["sent_ms"])))


@dataclass(frozen=True, slots=True)
class CallLimits:
    per_day: int = 0
    per_month: int = 0

    @property
    def unlimited(self) -> bool:
        return not self.per_day and not self.per_month


@dataclass(frozen=True, slots=True)
class Calls:
    """A platform's API calls in ``day`` (``YYYY-MM-DD``, UTC) and ``month`` (``YYYY-MM``), and the
    limits they were counted against."""

    day: str
    day_calls: int
    month: str
    month_calls: int
    limits: CallLimits

    def encode(self) -> bytes:
        raw = {
            "day": self.day,
            "day_calls": self.day_calls,
            "month": self.month,
            "month_calls": self.month_calls,
            "per_day": self.limits.per_day,
            "per_month": self.limits.per_month,
        }
        return json.dumps(raw, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> Calls:
        raw = json.loads(data)
        limits = CallLimits(int(raw["per_day"]), int(raw["per_month"]))
        return cls(str(raw["day"]), int(raw["day_calls"]), str(raw["month"]), int(raw["month_calls"]), limits)


def _utc(now_ms: int) -> datetime:
    return datetime.fromtimestamp(now_ms / 1000, tz=UTC)


def period_of(scope: Literal["day", "month"], now_ms: int) -> str:
    """The UTC day (``2026-12-04``) or month (``2026-12``) that ``now_ms`` falls in."""
    return _utc(now_ms).strftime("%Y-%m-%d" if scope == "day" else "%Y-%m")


def seconds_to_reset(scope: Literal["day", "month"], now_ms: int) -> float:
    """Seconds from ``now_ms`` to the start of the next UTC day or month."""
    now = _utc(now_ms)
    if scope == "day":
        start = now.replace(hour=0, minute=0, second=0, microsecond=0)
        end_ms = int(start.timestamp() * 1000) + 86_400_000
    else:
        year, month = (now.year + 1, 1) if now.month == 12 else (now.year, now.month + 1)
        end_ms = int(datetime(year, month, 1, tzinfo=UTC).timestamp() * 1000)
    return (end_ms - now_ms) / 1000


def _in_window(window: MinuteWindow | None, now_ms: int) -> tuple[int, ...]:
    if window is None:
        return ()
    return tuple(t for t in window.sent_ms if t > now_ms - MINUTE_MS)


def spend_minute(
    window: MinuteWindow | None, limit: int, now_ms: int, cost: int = 1
) -> tuple[MinuteWindow, Granted] | Refused:
    """Book ``cost`` messages at ``now_ms`` in a chat's window of the last minute, under ``limit``
    (``> 0``). Refused when fewer than ``cost`` remain: then ``retry_after_s`` is when enough of the
    booked sends have left the window — a full minute when ``cost`` exceeds the limit itself (it never
    fits; the caller refuses it as it is)."""
    if limit <= 0:
        raise ValueError("an unlimited budget is not spent")
    kept = _in_window(window, now_ms)
    if cost > limit:
        return Refused("minute", limit, MINUTE_MS / 1000)
    over = len(kept) + cost - limit
    if over > 0:
        # The ``over``-th oldest send must leave the window: it does MINUTE_MS after it was booked.
        return Refused("minute", limit, max(0.0, (kept[over - 1] + MINUTE_MS - now_ms) / 1000))
    booked = MinuteWindow(limit, (*kept, *([now_ms] * cost)))
    return booked, Granted(limit - len(booked.sent_ms))


def minute_remaining(window: MinuteWindow | None, now_ms: int) -> int | None:
    """What a chat has left of its minute at ``now_ms`` by its stored window; ``None`` without one."""
    if window is None:
        return None
    return max(0, window.limit - len(_in_window(window, now_ms)))


def _current(calls: Calls | None, limits: CallLimits, now_ms: int) -> Calls:
    day, month = period_of("day", now_ms), period_of("month", now_ms)
    if calls is None:
        return Calls(day, 0, month, 0, limits)
    return Calls(
        day,
        calls.day_calls if calls.day == day else 0,
        month,
        calls.month_calls if calls.month == month else 0,
        limits,
    )


def calls_remaining(calls: Calls | None, limits: CallLimits, now_ms: int) -> dict[Scope, int]:
    """What each limited scope (``day``, ``month``) has left at ``now_ms``."""
    current = _current(calls, limits, now_ms)
    left: dict[Scope, int] = {}
    if limits.per_day:
        left["day"] = max(0, limits.per_day - current.day_calls)
    if limits.per_month:
        left["month"] = max(0, limits.per_month - current.month_calls)
    return left


def spend_calls(
    calls: Calls | None, limits: CallLimits, now_ms: int, cost: int = 1, *, force: bool = False
) -> tuple[Calls, Granted] | Refused:
    """Book ``cost`` API calls at ``now_ms`` against the day's and the month's limits; the day is checked
    first (it resets first). ``force`` books them even past a limit: calls without which the service
    cannot run at all (its credentials), counted so that the count stays true."""
    current = _current(calls, limits, now_ms)
    booked = Calls(current.day, current.day_calls + cost, current.month, current.month_calls + cost, limits)
    if not force:
        if limits.per_day and booked.day_calls > limits.per_day:
            return Refused("day", limits.per_day, seconds_to_reset("day", now_ms))
        if limits.per_month and booked.month_calls > limits.per_month:
            return Refused("month", limits.per_month, seconds_to_reset("month", now_ms))
    left = calls_remaining(booked, limits, now_ms)
    return booked, Granted(min(left.values()) if left else 0)


@dataclass(frozen=True, slots=True)
class SpeakingBudget:
    """What the bot has left to say in a chat, as the ingress last booked it (``None``: unlimited or not
    counted yet): its messages this minute, the platform's API calls today and this month."""

    minute: int | None = None
    minute_limit: int | None = None
    day: int | None = None
    day_limit: int | None = None
    month: int | None = None
    month_limit: int | None = None

    def lowest_share(self) -> float | None:
        """The smallest remaining share of a counted budget (0 = spent), or ``None``."""
        shares = [
            left / limit
            for left, limit in (
                (self.minute, self.minute_limit),
                (self.day, self.day_limit),
                (self.month, self.month_limit),
            )
            if left is not None and limit
        ]
        return min(shares) if shares else None
