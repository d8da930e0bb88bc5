"""Budget arithmetic (pure): the sliding minute and the day/month counters, table-driven."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from larkbot.runtime.budgets.core import (
    CallLimits,
    Calls,
    Granted,
    MinuteWindow,
    Refused,
    calls_remaining,
    minute_remaining,
    period_of,
    seconds_to_reset,
    spend_calls,
    spend_minute,
)


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


T0 = ms("2026-12-04T10:00:00")


@pytest.mark.parametrize(
    ("sent", "limit", "cost", "now", "expected"),
    [
        # An empty window grants and books at now.
        ((), 20, 1, T0, ((T0,), 19)),
        # A long text is one spend: three parts, three stamps.
        ((), 20, 3, T0, ((T0, T0, T0), 17)),
        # The last one that fits.
        (tuple(T0 - i for i in range(19, 0, -1)), 20, 1, T0, (None, 0)),
        # Full: refused until the oldest send leaves the window (it was 10 s ago → 50 s).
        ((T0 - 10_000,) * 20, 20, 1, T0, ("minute", 50.0)),
        # 19 booked, three parts: the two oldest must go, the second oldest (40 s ago) leaves in 20 s.
        ((T0 - 50_000, T0 - 40_000, *([T0 - 1] * 17)), 20, 3, T0, ("minute", 20.0)),
        # Sends older than a minute no longer count (exactly 60 s ago is out).
        ((T0 - 60_000,) * 20, 20, 1, T0, ((T0,), 19)),
        # More parts than the budget itself: never fits, refused for a minute.
        ((), 2, 3, T0, ("minute", 60.0)),
    ],
)
def test_the_minute_window(
    sent: tuple[int, ...], limit: int, cost: int, now: int, expected: tuple[object, object]
) -> None:
    outcome = spend_minute(MinuteWindow(limit, sent) if sent else None, limit, now, cost)
    first, second = expected
    if isinstance(first, str):
        assert outcome == Refused("minute", limit, second)  # type: ignore[arg-type]
        return
    assert not isinstance(outcome, Refused)
    window, granted = outcome
    assert granted == Granted(second)  # type: ignore[arg-type]
    if first is not None:
        assert window.sent_ms == first
    assert len(window.sent_ms) <= limit
    assert MinuteWindow.decode(window.encode()) == window


def test_the_window_remaining_is_read_at_a_time() -> None:
    window = MinuteWindow(20, (T0 - 59_000, T0 - 1000))
    assert minute_remaining(window, T0) == 18
    assert minute_remaining(window, T0 + 1000) == 19
    assert minute_remaining(None, T0) is None


def test_an_unlimited_minute_is_never_spent() -> None:
    with pytest.raises(ValueError, match="unlimited"):
        spend_minute(None, 0, T0)


DAY = period_of("day", T0)
MONTH = period_of("month", T0)


@pytest.mark.parametrize(
    ("stored", "limits", "cost", "force", "expected"),
    [
        # Nothing stored: the day and the month begin.
        (None, CallLimits(100, 1000), 1, False, (1, 1, 99)),
        # The tightest scope is what remains.
        (Calls(DAY, 10, MONTH, 995, CallLimits(100, 1000)), CallLimits(100, 1000), 1, False, (11, 996, 4)),
        # The day is spent: refused until midnight UTC (14 h from 10:00).
        (
            Calls(DAY, 100, MONTH, 500, CallLimits(100, 1000)),
            CallLimits(100, 1000),
            1,
            False,
            ("day", 14 * 3600.0),
        ),
        # The month is spent while the day is not: refused until 1 January.
        (
            Calls(DAY, 0, MONTH, 1000, CallLimits(100, 1000)),
            CallLimits(100, 1000),
            1,
            False,
            ("month", (ms("2027-01-01T00:00:00") - T0) / 1000),
        ),
        # Yesterday's count does not hold today; last month's does not hold this month.
        (
            Calls("2026-12-03", 100, MONTH, 500, CallLimits(100, 1000)),
            CallLimits(100, 1000),
            1,
            False,
            (1, 501, 99),
        ),
        (
            Calls("2026-11-30", 100, "2026-11", 1000, CallLimits(100, 1000)),
            CallLimits(100, 1000),
            1,
            False,
            (1, 1, 99),
        ),
        # Only a month limit (day 0 = unlimited).
        (Calls(DAY, 5000, MONTH, 10, CallLimits(0, 20)), CallLimits(0, 20), 10, False, (5010, 20, 0)),
        (
            Calls(DAY, 5000, MONTH, 10, CallLimits(0, 20)),
            CallLimits(0, 20),
            11,
            False,
            ("month", 27 * 86400 + 14 * 3600.0),
        ),
        # Forced calls (the credentials) are booked past the limit and counted.
        (Calls(DAY, 100, MONTH, 500, CallLimits(100, 1000)), CallLimits(100, 1000), 1, True, (101, 501, 0)),
    ],
)
def test_the_day_and_month_calls(
    stored: Calls | None, limits: CallLimits, cost: int, force: bool, expected: tuple[object, ...]
) -> None:
    outcome = spend_calls(stored, limits, T0, cost, force=force)
    if isinstance(expected[0], str):
        assert isinstance(outcome, Refused)
        assert (outcome.scope, outcome.retry_after_s) == expected
        return
    assert not isinstance(outcome, Refused)
    calls, granted = outcome
    assert (calls.day_calls, calls.month_calls, granted.remaining) == expected
    assert (calls.day, calls.month) == (DAY, MONTH)
    assert Calls.decode(calls.encode()) == calls


def test_remaining_calls_name_only_the_limited_scopes() -> None:
    stored = Calls(DAY, 40, MONTH, 400, CallLimits(100, 1000))
    assert calls_remaining(stored, CallLimits(100, 1000), T0) == {"day": 60, "month": 600}
    assert calls_remaining(stored, CallLimits(0, 1000), T0) == {"month": 600}
    assert calls_remaining(None, CallLimits(), T0) == {}
    # The next day: the day's count is back to the limit, the month's holds.
    assert calls_remaining(stored, CallLimits(100, 1000), T0 + 86_400_000) == {"day": 100, "month": 600}


@pytest.mark.parametrize(
    ("now", "scope", "seconds"),
    [
        ("2026-12-04T23:59:59", "day", 1.0),
        ("2026-12-31T23:00:00", "month", 3600.0),
        ("2026-02-28T00:00:00", "month", 86400.0),
        ("2028-02-28T00:00:00", "month", 2 * 86400.0),
    ],
)
def test_seconds_to_the_reset(now: str, scope: str, seconds: float) -> None:
    assert seconds_to_reset(scope, ms(now)) == seconds  # type: ignore[arg-type]
