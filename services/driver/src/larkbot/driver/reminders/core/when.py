"""When a reminder is due, from what the model writes: a small, exact grammar read in the chat's UTC
offset, which refuses what it cannot read one way only (the reason tells the model what to write).

Accepted (case and spacing free; ``at`` and ``on`` optional):

- relative: ``in 2 hours``, ``in 30 minutes``, ``in 1 hour 30 minutes``, ``in 2h30m``, ``in a day``
  (units: seconds, minutes, hours, days, weeks, each once, whole numbers);
- a time of day: ``09:00`` / ``9:00`` (24-hour clock), ``9am``, ``9:30 pm``, ``noon`` — alone it is the
  next such time (today if still ahead, else tomorrow);
- a day and a time, either order: ``2026-12-05 09:00`` (also ``2026-12-05T09:00``), ``today 18:00``,
  ``tomorrow 9:00``, ``friday 9am`` (the coming Friday, never today).

Refused, each with what to write instead: a bare hour (``at 9``: am or pm?), ``12am`` / ``12pm`` and
``midnight`` (read both ways), ``next friday`` and a weekday naming today, dates with slashes or dots
(``12/05``: May or December?), a day without a time, months and years as units (no fixed length),
fractions, and any time not ahead of now or further ahead than the chat allows.

The offset is fixed (the chat's ``utc_offset_min``): there are no daylight-saving changes to guess.
Pure: the caller passes the time now.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Final

__all__ = ["Due", "Refused", "local_time", "parse_when"]

WEEKDAYS: Final = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAY_OF: Final = {**{d: i for i, d in enumerate(WEEKDAYS)}, **{d[:3]: i for i, d in enumerate(WEEKDAYS)}}
_UNITS: Final = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600),
    **dict.fromkeys(("d", "day", "days"), 86400),
    **dict.fromkeys(("w", "wk", "wks", "week", "weeks"), 604800),
}
_VAGUE_UNITS: Final = frozenset({"month", "months", "mo", "year", "years", "yr", "yrs", "y"})
_UNIT_NAME: Final = {1: "seconds", 60: "minutes", 3600: "hours", 86400: "days", 604800: "weeks"}

_FORMS: Final = (
    "'YYYY-MM-DD HH:MM', 'tomorrow HH:MM', 'HH:MM' (the next such time) or 'in N minutes/hours/days'"
)
_ISO_DATE: Final = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_ISO_DATETIME: Final = re.compile(r"(\d{4}-\d{2}-\d{2})t(\d{1,2}:\d{2})")
_OTHER_DATE: Final = re.compile(r"\d{1,4}[/.]\d{1,2}(?:[/.]\d{1,4})?")
_CLOCK: Final = re.compile(r"(\d{1,2}):(\d{2})")
_MERIDIEM: Final = re.compile(r"(\d{1,2})(?::(\d{2}))?\s*(am|pm|a\.m\.?|p\.m\.?)")
_BARE_HOUR: Final = re.compile(r"\d{1,2}")
_RELATIVE_PART: Final = re.compile(r"(\d+|an?)\s*([a-z]+)")
_FRACTION: Final = re.compile(r"\d+[.,]\d+|half")


@dataclass(frozen=True, slots=True)
class Due:
    """The reminder's time, in ms since the epoch."""

    at_ms: int


@dataclass(frozen=True, slots=True)
class Refused:
    """Why ``when`` was not read, written for the model to act on."""

    reason: str


class _Refusal(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _zone(utc_offset_min: int) -> timezone:
    return timezone(timedelta(minutes=utc_offset_min))


def local_time(at_ms: int, utc_offset_min: int) -> str:
    """``2026-12-05 09:00 (Saturday)``, seconds shown only when there are any."""
    local = datetime.fromtimestamp(at_ms / 1000, tz=UTC).astimezone(_zone(utc_offset_min))
    clock = f"{local:%H:%M:%S}" if local.second else f"{local:%H:%M}"
    return f"{local:%Y-%m-%d} {clock} ({local:%A})"


def parse_when(text: str, now_ms: int, utc_offset_min: int, *, max_ahead_days: int) -> Due | Refused:
    """When ``text`` is, seen from ``now_ms`` in the offset; refused unless it is ahead of now and at
    most ``max_ahead_days`` days ahead."""
    words = " ".join(text.lower().replace(",", " ").split()).rstrip(".!")
    now = datetime.fromtimestamp(now_ms / 1000, tz=UTC).astimezone(_zone(utc_offset_min))
    try:
        at_ms = _relative(words, now_ms) if words.startswith("in ") else _absolute(words, now)
    except _Refusal as refusal:
        return Refused(refusal.reason)
    if at_ms <= now_ms:
        return Refused(f"that time has passed (it is now {local_time(now_ms, utc_offset_min)})")
    if at_ms - now_ms > max_ahead_days * 86_400_000:
        return Refused(f"that is more than {max_ahead_days} days ahead, the furthest a reminder is kept")
    return Due(at_ms)


def _relative(words: str, now_ms: int) -> int:
    rest = re.sub(r"\band\b", " ", words[3:]).strip()
    if _FRACTION.search(rest):
        raise _Refusal("use whole numbers, e.g. 'in 1 hour 30 minutes' rather than 'in 1.5 hours'")
    parts = list(_RELATIVE_PART.finditer(rest))
    if not parts or "".join(p.group(0) for p in parts).replace(" ", "") != rest.replace(" ", ""):
        raise _Refusal(f"cannot read {words!r}: write it as {_FORMS}")
    total_s = 0
    seen: set[int] = set()
    for part in parts:
        amount, unit = part.group(1), part.group(2)
        if unit in _VAGUE_UNITS:
            raise _Refusal("months and years have no fixed length: give the date as 'YYYY-MM-DD HH:MM'")
        seconds = _UNITS.get(unit)
        if seconds is None:
            raise _Refusal(f"unknown unit {unit!r}: use seconds, minutes, hours, days or weeks")
        if seconds in seen:
            raise _Refusal(f"{_UNIT_NAME[seconds]} given twice: give each unit once")
        seen.add(seconds)
        total_s += (1 if amount in ("a", "an") else int(amount)) * seconds
    if total_s == 0:
        raise _Refusal("that is now: give a time ahead, e.g. 'in 10 minutes'")
    return now_ms + total_s * 1000


def _absolute(words: str, now: datetime) -> int:
    words = _ISO_DATETIME.sub(r"\1 \2", words)
    tokens = [t for t in words.split(" ") if t not in ("at", "on")]
    if not tokens:
        raise _Refusal(f"no time given: write it as {_FORMS}")
    if "next" in tokens or "this" in tokens:
        raise _Refusal("'next' and 'this' with a day can mean two dates: give the date as YYYY-MM-DD")
    for token in tokens:
        if _OTHER_DATE.fullmatch(token):
            raise _Refusal(
                f"{token!r} can be read more than one way: write dates as YYYY-MM-DD and times as HH:MM"
            )
    day_at = [i for i, t in enumerate(tokens) if _is_day(t)]
    if len(day_at) > 1:
        raise _Refusal(f"two days given in {words!r}: give one")
    if day_at and day_at[0] not in (0, len(tokens) - 1):
        raise _Refusal(f"cannot read {words!r}: write it as {_FORMS}")
    day_token = tokens.pop(day_at[0]) if day_at else None
    day = _day(day_token, now) if day_token is not None else None
    if not tokens:
        raise _Refusal(f"a day without a time: add the time of day, e.g. '{day_token} 09:00'")
    hour, minute = _time_of_day(" ".join(tokens))
    if day is None:
        at = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
        if at <= now:
            at += timedelta(days=1)
    else:
        at = datetime.combine(day, datetime.min.time(), now.tzinfo)
        at = at.replace(hour=hour, minute=minute)
        if day_token == "today" and at <= now:
            raise _Refusal(
                f"{hour:02d}:{minute:02d} today has passed (it is now {now:%H:%M}): "
                f"did you mean 'tomorrow {hour:02d}:{minute:02d}'?"
            )
    return round(at.timestamp() * 1000)


def _is_day(token: str) -> bool:
    return (
        token in ("today", "tomorrow", "tonight", "yesterday")
        or token in _WEEKDAY_OF
        or _ISO_DATE.fullmatch(token) is not None
    )


def _day(token: str, now: datetime) -> date:
    today = now.date()
    if token == "today":
        return today
    if token == "tomorrow":
        return today + timedelta(days=1)
    if token == "tonight":
        raise _Refusal("'tonight' has no time: write 'today HH:MM'")
    if token == "yesterday":
        raise _Refusal("that time has passed: a reminder is for a time ahead")
    if token in _WEEKDAY_OF:
        weekday = _WEEKDAY_OF[token]
        if weekday == today.weekday():
            name = WEEKDAYS[weekday].capitalize()
            raise _Refusal(f"today is {name}: say 'today HH:MM', or give next {name}'s date as YYYY-MM-DD")
        return today + timedelta(days=(weekday - today.weekday()) % 7)
    found = _ISO_DATE.fullmatch(token)
    assert found is not None  # _is_day
    try:
        return date(int(found[1]), int(found[2]), int(found[3]))
    except ValueError:
        raise _Refusal(f"there is no date {token}") from None


def _time_of_day(text: str) -> tuple[int, int]:
    if text == "noon":
        return 12, 0
    if text == "midnight":
        raise _Refusal("'midnight' can be the start or the end of a day: write 00:00 with the day it starts")
    if (found := _CLOCK.fullmatch(text)) is not None:
        hour, minute = int(found[1]), int(found[2])
        if hour > 23 or minute > 59:
            raise _Refusal(f"there is no time {text}: use 00:00 to 23:59")
        return hour, minute
    if (found := _MERIDIEM.fullmatch(text)) is not None:
        hour, minute = int(found[1]), int(found[2] or 0)
        pm = found[3].startswith("p")
        if hour == 12 or hour == 0:
            raise _Refusal("12am and 12pm are read both ways: write 00:00 (midnight) or 12:00 (noon)")
        if hour > 12:
            raise _Refusal(f"{hour}:{minute:02d} is a 24-hour time: drop 'am'/'pm'")
        if minute > 59:
            raise _Refusal(f"there is no time {text}")
        return hour + 12 if pm else hour, minute
    if _BARE_HOUR.fullmatch(text) is not None:
        hour = int(text)
        if hour > 23:
            raise _Refusal(f"there is no hour {hour}: use 00:00 to 23:59")
        if hour >= 13:
            raise _Refusal(f"write the time as HH:MM ({hour}:00)")
        raise _Refusal(
            f"say am or pm, or write the time as HH:MM ({hour:02d}:00 or {(hour % 12) + 12:02d}:00)"
        )
    raise _Refusal(f"cannot read {text!r} as a time of day: write it as {_FORMS}")
