"""Quiet hours: a daily window of local time (the chat's UTC offset), from ``start_min`` up to but not
including ``end_min``, past midnight when the end comes first (23:00–07:30 holds 23:00 and 03:00, not
07:30)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

QuietAllow = Literal["direct", "none"]

_DAY_MIN = 24 * 60


@dataclass(frozen=True, slots=True)
class QuietHours:
    #: Minutes after local midnight.
    start_min: int
    end_min: int
    #: What still wakes the bot during them: direct addresses only, or nothing.
    allow: QuietAllow = "direct"

    def label(self) -> str:
        return f"{_clock(self.start_min)}–{_clock(self.end_min)}"


def _clock(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


def local_minute(now_ms: int, utc_offset_min: int) -> int:
    """Minutes after local midnight at ``now_ms`` in a fixed UTC offset."""
    return (now_ms // 60_000 + utc_offset_min) % _DAY_MIN


def in_quiet_hours(quiet: QuietHours, now_ms: int, utc_offset_min: int) -> bool:
    minute = local_minute(now_ms, utc_offset_min)
    if quiet.start_min < quiet.end_min:
        return quiet.start_min <= minute < quiet.end_min
    return minute >= quiet.start_min or minute < quiet.end_min


__all__ = ["QuietAllow", "QuietHours", "in_quiet_hours", "local_minute"]
