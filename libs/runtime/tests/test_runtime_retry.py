"""The one retry policy of a send (pure): backoff with jitter, a platform's own wait, and the bounds."""

from __future__ import annotations

import asyncio

import pytest

from larkbot.runtime.config import LarkbotConfig
from larkbot.runtime.retry import Backoff, Failure, RetryPolicy, forever, retrying

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


def test_a_take_over_snapshot_is_asked_again_forever_up_to_ten_seconds_apart() -> None:
    policy = RetryPolicy.of(LarkbotConfig().retry.takeover_snapshot)
    assert policy.max_attempts is None
    assert [policy.wait(Failure.TRANSIENT, n, left_s=float("inf"), u=0.5) for n in (1, 2, 6, 50)] == [
        0.5,
        1.0,
        10.0,
        10.0,
    ]
    custom = LarkbotConfig.model_validate({"retry": {"takeover_snapshot": {"max_s": 2.0}}})
    assert RetryPolicy.of(custom.retry.takeover_snapshot).backoff.max_s == 2.0


def test_an_inbound_update_is_stored_forever_up_to_ten_seconds_apart() -> None:
    policy = RetryPolicy.of(LarkbotConfig().retry.inbound_store)
    assert policy.max_attempts is None
    assert policy.max_wait_s == 12.5
    waits = [policy.wait(Failure.TRANSIENT, n, left_s=float("inf"), u=0.5) for n in (1, 2, 7, 50)]
    assert waits == [0.25, 0.5, 10.0, 10.0]
    custom = LarkbotConfig.model_validate({"retry": {"inbound_store": {"max_s": 2.0}}})
    assert RetryPolicy.of(custom.retry.inbound_store).backoff.max_s == 2.0


@pytest.mark.parametrize(
    "bad",
    [dict(initial_s=0), dict(initial_s=2, max_s=1), dict(factor=0.5), dict(jitter=1.0), dict(jitter=-0.1)],
)
def test_an_invalid_backoff_is_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="invalid backoff"):
        Backoff(**bad)


# -- the loop (tenacity under the policy) ----------------------------------------------------------------


class Refused(Exception):
    def __init__(self, failure: Failure | None, retry_after_s: float | None = None) -> None:
        super().__init__(f"refused ({failure})")
        self.failure = failure
        self.retry_after_s = retry_after_s


async def _run(
    outcomes: list[Refused | str], *, left: float = 100.0, paced: bool = False
) -> tuple[str | BaseException, list[float], list[tuple[Failure, int]]]:
    slept: list[float] = []
    retried: list[tuple[Failure, int]] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    attempts = iter(outcomes)
    loop = retrying(
        POLICY,
        lambda exc: exc.failure if isinstance(exc, Refused) else None,
        left_s=lambda: left,
        retry_after=lambda exc: exc.retry_after_s if isinstance(exc, Refused) else None,
        paced=paced,
        on_retry=lambda failure, n, _wait, _exc: retried.append((failure, n)),
        sleep=sleep,
        jitter=lambda: 0.5,
    )
    try:
        async for attempt in loop:
            with attempt:
                outcome = next(attempts)
                if isinstance(outcome, Refused):
                    raise outcome
                return outcome, slept, retried
    except Refused as exc:
        return exc, slept, retried
    raise AssertionError("the loop ended without an outcome")


async def test_the_loop_waits_the_policy_s_backoff_and_returns_the_first_success() -> None:
    result, slept, retried = await _run([Refused(Failure.TRANSIENT), Refused(Failure.LOST), "sent"])
    assert result == "sent"
    assert slept == pytest.approx([0.5, 1.0])
    assert retried == [(Failure.TRANSIENT, 1), (Failure.LOST, 2)]


async def test_a_final_failure_is_raised_at_once_and_the_last_one_when_the_policy_gives_up() -> None:
    final = Refused(None)
    result, slept, _ = await _run([Refused(Failure.TRANSIENT), final])
    assert result is final
    assert slept == pytest.approx([0.5])
    five = [Refused(Failure.TRANSIENT) for _ in range(5)]
    result, slept, _ = await _run([*five, "never reached"])
    assert result is five[-1]
    assert len(slept) == 4  # max_attempts=5
    result, slept, _ = await _run([Refused(Failure.TRANSIENT), "never reached"], left=0.4)
    assert isinstance(result, Refused)
    assert slept == []  # the wait would end past the deadline


async def test_the_first_attempt_is_numbered_one_and_ends_the_loop_or_leaves_as_tenacity_would() -> None:
    # The first attempt runs before tenacity is built; what follows must not tell the difference.
    numbers: list[int] = []
    async for attempt in retrying(POLICY, lambda _exc: Failure.TRANSIENT):
        with attempt:
            numbers.append(attempt.retry_state.attempt_number)
    assert numbers == [1]  # a success without return ends the loop

    final = Refused(None)
    result, slept, retried = await _run([final, "never reached"])
    assert result is final
    assert (slept, retried) == ([], [])

    async def cancelled() -> None:
        async for attempt in retrying(POLICY, lambda _exc: Failure.TRANSIENT):
            with attempt:
                numbers.append(attempt.retry_state.attempt_number)
                raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await cancelled()
    assert numbers == [1, 1]  # never retried

    seen: list[int] = []
    outcomes = iter([Refused(Failure.TRANSIENT), Refused(Failure.TRANSIENT), "sent"])

    async def no_sleep(_seconds: float) -> None:
        return None

    async for attempt in retrying(POLICY, lambda exc: getattr(exc, "failure", None), sleep=no_sleep):
        with attempt:
            seen.append(attempt.retry_state.attempt_number)
            outcome = next(outcomes)
            if isinstance(outcome, Refused):
                raise outcome
    assert seen == [1, 2, 3]


async def test_a_paced_rate_limit_is_checked_against_the_bounds_but_left_to_the_pacer() -> None:
    limited = Refused(Failure.RATE_LIMITED, retry_after_s=3.0)
    _result, slept, _ = await _run([limited, "sent"], paced=True)
    assert slept == [0.0]
    _result, slept, _ = await _run([Refused(Failure.RATE_LIMITED, 3.0), "sent"])
    assert slept == [3.0]
    result, slept, _ = await _run([Refused(Failure.RATE_LIMITED, 61.0), "sent"], paced=True)
    assert isinstance(result, Refused)
    assert slept == []  # longer than max_wait_s: given up


def test_a_policy_that_never_gives_up_allows_the_jittered_cap() -> None:
    policy = forever(Backoff(initial_s=0.5, max_s=30.0, jitter=0.25))
    assert policy.wait(Failure.TRANSIENT, 1000, left_s=float("inf"), u=0.999) == pytest.approx(
        37.49, abs=0.01
    )


def test_every_kind_of_retrying_work_has_its_policy_in_the_configuration() -> None:
    from larkbot.runtime.config import parse_config

    configured = {"initial_s": 0.01, "max_s": 0.05, "jitter": 0, "max_attempts": 2, "max_wait_s": 1}
    config = parse_config({"retry": {"llm_call": configured}}, {})
    assert RetryPolicy.of(config.retry.llm_call) == RetryPolicy(
        Backoff(initial_s=0.01, max_s=0.05, factor=2.0, jitter=0.0), max_attempts=2, max_wait_s=1.0
    )
    defaults = parse_config({}, {}).retry
    assert RetryPolicy.of(defaults.llm_call) == RetryPolicy(
        Backoff(initial_s=0.25, max_s=8.0, factor=2.0, jitter=0.25), max_attempts=4, max_wait_s=60.0
    )
