"""The grammar of a reminder's ``when`` (``reminders.core.when``), table-driven, in non-UTC offsets: what is
read and when it falls, and what is refused with a reason the model can act on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from larkbot.driver.reminders.core.when import Due, Refused, local_time, parse_when

EAST = 480  # UTC+08:00
WEST = -300  # UTC-05:00
#: Friday 2026-12-04 23:30 at UTC+08:00 — 15:30 UTC, the same day; the local "tomorrow" is Saturday.
NOW_EAST = round(datetime(2026, 12, 4, 15, 30, tzinfo=UTC).timestamp() * 1000)
#: Friday 2026-12-04 20:00 at UTC-05:00 — already Saturday 01:00 UTC.
NOW_WEST = round(datetime(2026, 12, 5, 1, 0, tzinfo=UTC).timestamp() * 1000)


def _at(text: str, now_ms: int, offset: int, max_ahead_days: int = 366) -> str:
    found = parse_when(text, now_ms, offset, max_ahead_days=max_ahead_days)
    assert isinstance(found, Due), found
    local = datetime.fromtimestamp(found.at_ms / 1000, tz=UTC).astimezone(timezone(timedelta(minutes=offset)))
    return f"{local:%Y-%m-%d %H:%M:%S}"


@pytest.mark.parametrize(
    ("when", "local"),
    [
        ("2026-12-05 09:00", "2026-12-05 09:00:00"),
        ("2026-12-05T09:00", "2026-12-05 09:00:00"),
        ("on 2026-12-25 at 18:30", "2026-12-25 18:30:00"),
        ("tomorrow 9:00", "2026-12-05 09:00:00"),
        ("Tomorrow at 09:00", "2026-12-05 09:00:00"),
        ("9:00 tomorrow", "2026-12-05 09:00:00"),
        # A time alone is the next such time: 09:00 has passed today (23:30), so tomorrow's.
        ("9:00", "2026-12-05 09:00:00"),
        ("at 23:45", "2026-12-04 23:45:00"),
        ("23:30", "2026-12-05 23:30:00"),  # now exactly: the next one is tomorrow's
        ("9am", "2026-12-05 09:00:00"),
        ("9:30 pm", "2026-12-05 21:30:00"),
        ("7 p.m.", "2026-12-05 19:00:00"),
        ("noon", "2026-12-05 12:00:00"),
        ("saturday 9am", "2026-12-05 09:00:00"),
        ("Mon 08:15", "2026-12-07 08:15:00"),
        ("thursday 10:00", "2026-12-10 10:00:00"),
        ("in 2 hours", "2026-12-05 01:30:00"),
        ("in 30 minutes", "2026-12-05 00:00:00"),
        ("in 1 hour and 30 minutes", "2026-12-05 01:00:00"),
        ("in 2h30m", "2026-12-05 02:00:00"),
        ("in an hour", "2026-12-05 00:30:00"),
        ("in 45 seconds", "2026-12-04 23:30:45"),
        ("in 3 days", "2026-12-07 23:30:00"),
        ("in 1 week, 2 days", "2026-12-13 23:30:00"),
        ("  IN 10   MINUTES. ", "2026-12-04 23:40:00"),
    ],
)
def test_what_is_read_east_of_utc(when: str, local: str) -> None:
    assert _at(when, NOW_EAST, EAST) == local


@pytest.mark.parametrize(
    ("when", "local"),
    [
        # Local Friday evening, while UTC is already Saturday: "today" and the weekdays are the chat's.
        ("today 21:00", "2026-12-04 21:00:00"),
        ("21:00", "2026-12-04 21:00:00"),
        ("8:00", "2026-12-05 08:00:00"),
        ("saturday 9am", "2026-12-05 09:00:00"),
        ("tomorrow 00:00", "2026-12-05 00:00:00"),
        ("in 5 hours", "2026-12-05 01:00:00"),
    ],
)
def test_what_is_read_west_of_utc(when: str, local: str) -> None:
    assert _at(when, NOW_WEST, WEST) == local


def test_the_offset_decides_the_instant() -> None:
    east = parse_when("2026-12-05 09:00", NOW_EAST, EAST, max_ahead_days=366)
    west = parse_when("2026-12-05 09:00", NOW_WEST, WEST, max_ahead_days=366)
    assert isinstance(east, Due)
    assert isinstance(west, Due)
    assert datetime.fromtimestamp(east.at_ms / 1000, tz=UTC) == datetime(2026, 12, 5, 1, 0, tzinfo=UTC)
    assert datetime.fromtimestamp(west.at_ms / 1000, tz=UTC) == datetime(2026, 12, 5, 14, 0, tzinfo=UTC)
    assert local_time(east.at_ms, EAST) == "2026-12-05 09:00 (Saturday)"
    assert local_time(NOW_EAST + 45_000, EAST) == "2026-12-04 23:30:45 (Friday)"


@pytest.mark.parametrize(
    ("when", "reason"),
    [
        ("at 9", "say am or pm, or write the time as HH:MM (09:00 or 21:00)"),
        ("tomorrow 7", "say am or pm"),
        ("at 15", "write the time as HH:MM (15:00)"),
        ("12pm", "write 00:00 (midnight) or 12:00 (noon)"),
        ("tomorrow 12am", "write 00:00 (midnight) or 12:00 (noon)"),
        ("13:00 pm", "24-hour time: drop 'am'/'pm'"),
        ("midnight", "write 00:00 with the day it starts"),
        ("friday 9:00", "today is Friday: say 'today HH:MM', or give next Friday's date as YYYY-MM-DD"),
        ("next monday 9:00", "give the date as YYYY-MM-DD"),
        ("12/05 9:00", "write dates as YYYY-MM-DD and times as HH:MM"),
        ("9.30", "write dates as YYYY-MM-DD and times as HH:MM"),
        ("tomorrow", "a day without a time: add the time of day, e.g. 'tomorrow 09:00'"),
        ("2026-12-06", "a day without a time"),
        ("tonight", "'tonight' has no time"),
        ("today 08:00", "08:00 today has passed (it is now 23:30): did you mean 'tomorrow 08:00'?"),
        ("2026-12-04 09:00", "that time has passed (it is now 2026-12-04 23:30 (Friday))"),
        ("yesterday 10:00", "that time has passed"),
        ("2026-02-30 09:00", "there is no date 2026-02-30"),
        ("24:00", "there is no time 24:00"),
        ("in 2 months", "months and years have no fixed length"),
        ("in 1.5 hours", "use whole numbers"),
        ("in half an hour", "use whole numbers"),
        ("in 2 hours 3 hours", "hours given twice"),
        ("in 5 fortnights", "unknown unit 'fortnights'"),
        ("in 0 minutes", "that is now: give a time ahead"),
        ("in a while", "unknown unit 'while': use seconds, minutes, hours, days or weeks"),
        ("2028-01-01 09:00", "more than 366 days ahead"),
        ("tomorrow 2026-12-06 9:00", "two days given"),
        ("soon", "cannot read 'soon' as a time of day: write it as 'YYYY-MM-DD HH:MM'"),
    ],
)
def test_what_is_refused_says_what_to_write(when: str, reason: str) -> None:
    found = parse_when(when, NOW_EAST, EAST, max_ahead_days=366)
    assert isinstance(found, Refused), found
    assert reason in found.reason


def test_how_far_ahead_is_the_chats_to_say() -> None:
    assert isinstance(parse_when("in 8 days", NOW_EAST, EAST, max_ahead_days=7), Refused)
    assert isinstance(parse_when("in 7 days", NOW_EAST, EAST, max_ahead_days=7), Due)
