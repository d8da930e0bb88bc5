"""The one retry policy of a send (pure): backoff with jitter, a platform's own wait, and the bounds."""

from __future__ import annotations

import pytest

from larkbot.runtime.retry import Backoff, Failure, RetryPolicy

POLICY = RetryPolicy(
    Backoff(initial_s=0.5, max_s=8.0, factor=2.0, jitter=0.25), max_attempts=5, max_wait_s=60
)


@pytest.mark.parametrize(
    ("retry", "u", "delay"),
    [
        (1, 0.5, 0.5),
        (2, 0.5, 1.0),
        (3, 0.5, 2.0),
        (5, 0.5, 8.0),
        (9, 0.5, 8.0),
        (1, 0.0, 0.375),
        (2, 1.0, 1.25),
    ],
)
def test_backoff_doubles_to_its_cap_and_jitter_spreads_it(retry: int, u: float, delay: float) -> None:
    assert POLICY.backoff.delay(retry, u) == pytest.approx(delay)


def test_transient_failures_back_off_and_a_rate_limit_waits_what_the_platform_said() -> None:
    assert POLICY.wait(Failure.TRANSIENT, 1, left_s=10, u=0.5) == pytest.approx(0.5)
    assert POLICY.wait(Failure.LOST, 2, left_s=10, u=0.5) == pytest.approx(1.0)
    assert POLICY.wait(Failure.RATE_LIMITED, 1, left_s=10, u=0.9, retry_after_s=3) == 3
    # A 429 without its wait backs off like any transient failure.
    assert POLICY.wait(Failure.RATE_LIMITED, 1, left_s=10, u=0.5) == pytest.approx(0.5)


def test_no_retry_past_the_deadline_the_attempt_count_or_the_longest_wait() -> None:
    assert POLICY.wait(Failure.TRANSIENT, 3, left_s=2.0, u=0.5) is None  # 2 s would end at the deadline
    assert POLICY.wait(Failure.TRANSIENT, 3, left_s=2.1, u=0.5) == pytest.approx(2.0)
    assert POLICY.wait(Failure.TRANSIENT, 5, left_s=100, u=0.5) is None  # five attempts made
    assert POLICY.wait(Failure.RATE_LIMITED, 1, left_s=1000, u=0.5, retry_after_s=61) is None
    assert POLICY.wait(Failure.RATE_LIMITED, 1, left_s=5, u=0.5, retry_after_s=30) is None


@pytest.mark.parametrize(
    "bad",
    [dict(initial_s=0), dict(initial_s=2, max_s=1), dict(factor=0.5), dict(jitter=1.0), dict(jitter=-0.1)],
)
def test_an_invalid_backoff_is_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="invalid backoff"):
        Backoff(**bad)
