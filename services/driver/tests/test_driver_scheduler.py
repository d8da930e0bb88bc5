"""Scheduling decisions (SPEC §4.1, §4.4), table-driven over sequences of inputs, typing and time."""

from __future__ import annotations

import pytest

from larkbot.driver.wake.core import scheduler as s
from larkbot.driver.wake.core.records import Activation

CFG = s.Debounce(initial_delay_ms=1000, typing_extend_ms=5000, max_delay_ms=30000)
DELAYS = CFG.retry_delays_ms


def _feed(ops: list[tuple[str, str, int]]) -> s.Schedule:
    state = s.Schedule()
    for kind, who, at in ops:
        state = s.on_input(state, who, at) if kind == "msg" else s.on_typing(state, at)
    return state


@pytest.mark.parametrize(
    ("ops", "due"),
    [
        pytest.param([], None, id="nothing-pending"),
        pytest.param([("msg", "a", 0)], 1000, id="single-message"),
        pytest.param(
            [("msg", "a", 0), ("msg", "a", 400), ("msg", "a", 900)], 1900, id="trigger-burst-extends"
        ),
        pytest.param([("msg", "a", 0), ("msg", "b", 900)], 1000, id="other-sender-does-not-extend"),
        pytest.param([("msg", "a", 0), ("typing", "b", 500)], 5500, id="typing-extends"),
        pytest.param([("typing", "a", 0), ("msg", "a", 100)], 5000, id="typing-before-message-counts"),
        pytest.param(
            [("msg", "a", 0), *[("typing", "a", t) for t in range(0, 60000, 4000)]], 30000, id="max-delay-cap"
        ),
        pytest.param([("msg", "a", t) for t in range(0, 40000, 900)], 30000, id="trigger-burst-capped"),
    ],
)
def test_due_time(ops: list[tuple[str, str, int]], due: int | None) -> None:
    assert s.due_ms(_feed(ops), CFG) == due


def test_wake_takes_inputs_and_new_input_during_run_waits_for_its_own_window() -> None:
    state = _feed([("msg", "a", 0), ("msg", "a", 300)])
    assert s.next_action(state, 1299, CFG) == s.Wait(1300)
    wake = s.next_action(state, 1300, CFG)
    assert wake == s.Wake("debounced", 300, 0, None)
    assert isinstance(wake, s.Wake)
    state = s.begin(state, wake)
    assert state.inputs == ()
    assert s.next_action(state, 99999, CFG) == s.Wait(None)  # serialized: one wake-up at a time
    state = s.on_input(state, "b", 2000)
    assert s.next_action(state, 99999, CFG) == s.Wait(None)
    state = s.succeeded(state)
    assert s.next_action(state, 2999, CFG) == s.Wait(3000)
    assert s.next_action(state, 3000, CFG) == s.Wake("debounced", 2000, 0, None)


def test_transient_failures_retry_after_5_then_20_seconds_then_latch() -> None:
    act = Activation("send_message", "asked")
    state = _feed([("msg", "a", 0)])
    wake = s.next_action(state, 1000, CFG)
    assert isinstance(wake, s.Wake)
    state, retried = s.failed_transiently(s.begin(state, wake), wake, 1000, act, DELAYS)
    assert retried
    assert s.next_action(state, 5999, CFG) == s.Wait(6000)
    retry = s.next_action(state, 6000, CFG)
    assert retry == s.Wake("retry", 0, 1, act)
    assert isinstance(retry, s.Wake)
    state = s.on_typing(state, 5990)  # typing never postpones a retry
    assert s.next_action(state, 6000, CFG) == retry
    state, retried = s.failed_transiently(s.begin(state, retry), retry, 6000, act, DELAYS)
    assert retried
    third = s.next_action(state, 26000, CFG)
    assert third == s.Wake("retry", 0, 2, act)
    assert isinstance(third, s.Wake)
    state, retried = s.failed_transiently(s.begin(state, third), third, 26000, act, DELAYS)
    assert not retried
    assert s.next_action(state, 10**9, CFG) == s.Wait(None)  # latched until new input


def test_newer_input_supersedes_a_pending_retry() -> None:
    state = _feed([("msg", "a", 0)])
    wake = s.next_action(state, 1000, CFG)
    assert isinstance(wake, s.Wake)
    state, _ = s.failed_transiently(s.begin(state, wake), wake, 1000, None, DELAYS)
    assert state.retry is not None
    state = s.on_input(state, "b", 3000)
    assert state.retry is None
    assert s.next_action(state, 4000, CFG) == s.Wake("debounced", 3000, 0, None)


def test_input_during_a_failing_run_supersedes_the_retry() -> None:
    state = _feed([("msg", "a", 0)])
    wake = s.next_action(state, 1000, CFG)
    assert isinstance(wake, s.Wake)
    state = s.on_input(s.begin(state, wake), "b", 1500)
    state, retried = s.failed_transiently(state, wake, 2000, None, DELAYS)
    assert not retried
    assert s.next_action(state, 2500, CFG) == s.Wake("debounced", 1500, 0, None)


def test_permanent_failure_latches_until_new_input() -> None:
    state = _feed([("msg", "a", 0)])
    wake = s.next_action(state, 1000, CFG)
    assert isinstance(wake, s.Wake)
    state = s.failed_permanently(s.begin(state, wake))
    assert s.next_action(state, 10**9, CFG) == s.Wait(None)
    state = s.on_input(state, "a", 5000)
    assert s.next_action(state, 6000, CFG) == s.Wake("debounced", 5000, 0, None)


def test_resume_of_an_open_chain_runs_once() -> None:
    state = s.Schedule(resume=True)
    wake = s.next_action(state, 0, CFG)
    assert wake == s.Wake("resume", 0, 0, None)
    assert isinstance(wake, s.Wake)
    assert s.next_action(s.succeeded(s.begin(state, wake)), 0, CFG) == s.Wait(None)


def test_retry_delays_come_from_the_chat_settings() -> None:
    wake = s.Wake("debounced", 0, 0, None)
    state = s.on_input(s.Schedule(), "ou_a", 0)
    state, retried = s.failed_transiently(s.begin(state, wake), wake, 1000, None, (250,))
    assert retried
    assert state.retry is not None
    assert state.retry.due_ms == 1250
    retry = s.Wake("retry", 0, state.retry.attempt, None)
    _state, retried = s.failed_transiently(s.begin(state, retry), retry, 1250, None, (250,))
    assert not retried  # one delay configured: one retry


def test_a_deferred_wake_up_is_retried_however_often_and_keeps_its_transient_count() -> None:
    act = Activation("send_message", "asked")
    state = s.on_input(s.Schedule(), "ou_a", 0)
    wake = s.next_action(state, 1000, CFG)
    assert isinstance(wake, s.Wake)
    now = 1000
    # Far more deferrals than transient retries: none gives up, each carries the activation.
    for deferrals in range(1, len(DELAYS) + 5):
        state, retried = s.deferred(s.begin(state, wake), wake, now, act, 500)
        assert retried
        assert state.retry == s.Retry(wake.attempt, now + 500, 0, act, deferrals)
        assert s.next_action(state, now + 499, CFG) == s.Wait(now + 500)
        now += 500
        wake = s.next_action(state, now, CFG)
        assert wake == s.Wake("retry", 0, 0, act, deferrals)
        assert isinstance(wake, s.Wake)
    # A transient failure after them still has every transient retry left.
    state, retried = s.failed_transiently(s.begin(state, wake), wake, now, act, DELAYS)
    assert retried
    assert state.retry is not None
    assert (state.retry.attempt, state.retry.deferrals) == (1, 0)


def test_newer_input_supersedes_a_deferred_wake_up() -> None:
    state = s.on_input(s.Schedule(), "ou_a", 0)
    wake = s.next_action(state, 1000, CFG)
    assert isinstance(wake, s.Wake)
    running = s.on_input(s.begin(state, wake), "ou_b", 1500)  # arrived during the wake-up
    state, retried = s.deferred(running, wake, 2000, None, 500)
    assert not retried
    assert state.retry is None
    assert not state.running
    # The newer input's own wake-up comes as usual (it takes the older input with it).
    assert s.next_action(state, 2500, CFG) == s.Wake("debounced", 1500, 0, None)
