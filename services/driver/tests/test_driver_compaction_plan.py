"""The pure parts of long-lived chats: the compaction cut, trimming, token estimates and their calibration,
and the limits a model's window puts on a chat."""

from __future__ import annotations

import pytest

from larkbot.canonical.llm import (
    AssistantMessage,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from larkbot.driver.compaction.core.compaction import history_tokens, plan_compaction, turn_tokens
from larkbot.driver.wake.core.estimate import Calibration, message_tokens, segment_tokens
from larkbot.driver.wake.core.limits import Windows, limits
from larkbot.driver.wake.core.prompt import select_history
from larkbot.driver.wake.core.records import TurnRecord
from larkbot.runtime.config import ChatSettings
from larkbot.testkit.driver.synthetic import segment

T0 = 1_800_000_000_000


def _segments(n: int) -> tuple:  # type: ignore[type-arg]
    # Every segment has the same size (ids of more digits get a shorter text), so budgets read as counts.
    return tuple(segment(i, at_ms=T0 + i * 1000, text="x" * (44 - len(str(i)))) for i in range(1, n + 1))


def _turn(
    at_ms: int, *, chain: str = "c", step: int = 0, follow_up: bool = False, pending: bool = False
) -> TurnRecord:
    call = ToolCallPart(id=f"t{at_ms}", name="send_message", arguments_json='{"text":"hi there"}')
    return TurnRecord(
        platform="feishu",
        chat_id="oc",
        chain_id=chain,
        step=step,
        wake_id="w",
        requested_at_ms=at_ms,
        entries=(
            AssistantMessage(parts=(call,), model_identity="m"),
            ToolResultMessage(tool_call_id=call.id, parts=(TextPart(text="sent"),)),
        ),
        usage=Usage(input_tokens=1, output_tokens=1),
        model_identity="m",
        requires_follow_up=follow_up,
        shell_tools_exposed=False,
        mode="normal",
        work_calls=0,
        participation_attempts=1,
        sent=True,
        reacted=False,
        pending=pending,
    )


SEG = segment_tokens(segment(1, text="x" * 43))
#: Every segment of these tests was handled by a wake-up (none is input waiting for an answer).
HANDLED = T0 + 10**9


def _plan(segments: tuple, turns: tuple = (), **kw: int) -> object:  # type: ignore[type-arg]
    args = {
        "previous_turns_from_ms": 0,
        "trigger_tokens": 50 * SEG,
        "target_tokens": 20 * SEG,
        "input_cap_tokens": 10_000 * SEG,
        "processed_until_ms": HANDLED,
    }
    args.update(kw)
    return plan_compaction(segments, turns, **args)  # type: ignore[arg-type]


def test_nothing_to_do_under_the_trigger_unless_forced() -> None:
    segments = _segments(40)
    assert _plan(segments) is None
    forced = plan_compaction(
        segments,
        (),
        previous_turns_from_ms=0,
        trigger_tokens=50 * SEG,
        target_tokens=20 * SEG,
        input_cap_tokens=10_000,
        processed_until_ms=HANDLED,
        force=True,
    )
    assert forced is not None
    assert len(forced.segments) == 20


def test_the_oldest_part_is_summarized_down_to_the_target() -> None:
    segments = _segments(100)
    turns = (_turn(T0 + 10_500), _turn(T0 + 90_500))
    plan = plan_compaction(
        segments,
        turns,
        previous_turns_from_ms=0,
        trigger_tokens=50 * SEG,
        target_tokens=20 * SEG,
        input_cap_tokens=10**6,
        processed_until_ms=HANDLED,
    )
    assert plan is not None
    kept = segments[len(plan.segments) :]
    assert plan.segments == segments[: len(plan.segments)]
    assert plan.cursor == plan.segments[-1].event_seq
    assert plan.turns_from_ms == kept[0].received_at_ms
    assert plan.turns == (turns[0],)  # the older turn is covered, the newer one stays
    assert plan.tokens_after <= 20 * SEG
    assert plan.tokens_after == history_tokens(kept, (turns[1],))
    assert plan.tokens_before == history_tokens(segments, turns)
    # Just enough was summarized: one segment fewer would not reach the target.
    assert history_tokens(segments[len(plan.segments) - 1 :], (turns[1],)) > 20 * SEG


def test_an_open_chain_and_a_running_wake_up_stay_after_the_cut() -> None:
    segments = _segments(100)
    chain = (_turn(T0 + 30_500, chain="open", follow_up=True),)
    plan = _plan(segments, chain)
    assert plan is not None
    assert plan.turns_from_ms <= T0 + 30_500  # type: ignore[attr-defined]
    assert plan.turns == ()  # type: ignore[attr-defined]
    running = plan_compaction(
        segments,
        (),
        previous_turns_from_ms=0,
        trigger_tokens=50 * SEG,
        target_tokens=20 * SEG,
        input_cap_tokens=10**6,
        processed_until_ms=HANDLED,
        protected_from_ms=T0 + 40_000,
    )
    assert running is not None
    assert running.turns_from_ms <= T0 + 40_000
    assert len(running.segments) == 39


def test_input_not_handled_yet_is_never_summarized() -> None:
    """Issue 23: a compaction summarized the mention a wake-up was answering. Everything from the oldest
    unhandled external message on stays after the cut, however far over the target it is."""
    segments = _segments(100)
    waiting = segments[29].received_at_ms  # messages 31.. arrived after the last wake-up's input
    plan = _plan(segments, processed_until_ms=waiting)
    assert plan is not None
    assert len(plan.segments) == 30  # type: ignore[attr-defined]
    assert plan.cursor == 30  # type: ignore[attr-defined]
    assert plan.tokens_after > 20 * SEG  # type: ignore[attr-defined]  # over the target: it waits
    # The bot's own messages, self-sent echoes and blocked senders do not hold the cut back.
    own = tuple(
        segment(i, at_ms=T0 + i * 1000, sender="ou_lark", myself=True, text="x" * (44 - len(str(i))))
        if i > 30
        else s
        for i, s in enumerate(segments, start=1)
    )
    handled = _plan(own, processed_until_ms=waiting)
    assert handled is not None
    assert len(handled.segments) > 30  # type: ignore[attr-defined]
    assert handled.tokens_after <= 20 * SEG  # type: ignore[attr-defined]
    blocked = plan_compaction(
        tuple(
            segment(i, at_ms=T0 + i * 1000, sender="ou_spam", text="x" * (44 - len(str(i)))) if i > 30 else s
            for i, s in enumerate(segments, start=1)
        ),
        (),
        previous_turns_from_ms=0,
        trigger_tokens=50 * SEG,
        target_tokens=20 * SEG,
        input_cap_tokens=10**6,
        processed_until_ms=waiting,
        blocked=frozenset({"ou_spam"}),
    )
    assert blocked is not None
    assert len(blocked.segments) == 80
    # When the very first segment waits for an answer, there is nothing to summarize.
    assert _plan(segments, processed_until_ms=0) is None


def test_the_input_cap_moves_the_cursor_only_as_far_as_summarized() -> None:
    segments = _segments(100)
    plan = plan_compaction(
        segments,
        (),
        previous_turns_from_ms=0,
        trigger_tokens=50 * SEG,
        target_tokens=20 * SEG,
        input_cap_tokens=30 * SEG,
        processed_until_ms=HANDLED,
    )
    assert plan is not None
    assert len(plan.segments) == 30
    assert plan.cursor == 30
    assert plan.summarized_tokens <= 30 * SEG


def test_the_turn_boundary_never_moves_back() -> None:
    segments = _segments(100)
    later = T0 + 200_000
    plan = plan_compaction(
        segments,
        (),
        previous_turns_from_ms=later,
        trigger_tokens=50 * SEG,
        target_tokens=20 * SEG,
        input_cap_tokens=10**6,
        processed_until_ms=HANDLED,
    )
    assert plan is not None
    assert plan.turns_from_ms == later


def test_a_trimmed_history_keeps_the_newest_half_budget_and_its_start_is_sticky() -> None:
    segments = _segments(100)
    whole = select_history(segments, (), budget_tokens=200 * SEG, sticky_from_ms=None)
    assert whole.omitted == 0
    assert whole.segments == segments
    trimmed = select_history(segments, (), budget_tokens=20 * SEG, sticky_from_ms=None)
    assert len(trimmed.segments) == 10
    assert trimmed.omitted == 90
    assert trimmed.from_ms == segments[90].received_at_ms
    grown = (*segments, *_segments(105)[100:])
    held = select_history(grown, (), budget_tokens=20 * SEG, sticky_from_ms=trimmed.from_ms)
    assert held.from_ms == trimmed.from_ms  # the prefix stays while it fits
    assert len(held.segments) == 15
    jumped = select_history(
        (*grown, *_segments(125)[105:]), (), budget_tokens=20 * SEG, sticky_from_ms=trimmed.from_ms
    )
    assert jumped.from_ms is not None
    assert jumped.from_ms > trimmed.from_ms
    chain_start = segments[40].received_at_ms
    kept = select_history(
        segments,
        (_turn(chain_start + 1, follow_up=True),),
        budget_tokens=20 * SEG,
        sticky_from_ms=None,
        keep_from_ms=chain_start,
    )
    assert kept.from_ms is not None
    assert kept.from_ms <= chain_start


def test_estimates_count_tool_calls_results_and_reasoning() -> None:
    reasoning = ReasoningPart(
        text="t" * 100, signature="s" * 400, format="anthropic-messages", model_identity="m"
    )
    assistant = AssistantMessage(
        parts=(reasoning, ToolCallPart(id="1", name="send_message", arguments_json="a" * 200)),
        model_identity="m",
    )
    # 100 readable chars at 2 per token, 400 opaque at 4, the call's name and arguments at 2.
    assert message_tokens(assistant) == 4 + 50 + 100 + 6 + 100
    with_extra = assistant.model_copy(
        update={
            "provider_extra": '{"reasoning_content":"' + "r" * 76 + '"}',
            "provider_extra_format": "openai-chat",
        }
    )
    assert message_tokens(with_extra) == message_tokens(assistant) + 50
    result = ToolResultMessage(tool_call_id="1", parts=(TextPart(text="z" * 60),))
    assert message_tokens(result) == 4 + 30
    assert turn_tokens(_turn(T0)) == sum(message_tokens(m) for m in _turn(T0).entries)
    assert message_tokens(UserMessage(parts=(TextPart(text="ab"),))) == 5


def test_calibration_follows_reported_usage_within_bounds() -> None:
    calibration = Calibration()
    assert calibration.to_estimate(1000) == 1000
    first = calibration.observe(1000, 1500)
    assert first.factor == pytest.approx(1.5)
    assert first.to_estimate(3000) == 2000
    second = first.observe(1000, 1000)
    assert second.factor == pytest.approx(1.4)
    assert Calibration().observe(1000, 100_000).factor == Calibration.MAX
    assert Calibration().observe(0, 100) == Calibration()


def test_a_small_model_window_bounds_every_limit() -> None:
    settings = ChatSettings()
    free = limits(
        settings, Windows(), primary_fixed_tokens=1000, probe_fixed_tokens=500, compaction_fixed_tokens=300
    )
    assert free.request_limit is None
    assert free.trigger == settings.max_context_est_tokens
    assert free.target == settings.working_window_est_tokens
    assert free.probe_budget == settings.probe_context_est_tokens
    small = limits(
        settings,
        Windows(primary=15_000, probe=15_000, compaction=15_000),
        primary_fixed_tokens=1000,
        probe_fixed_tokens=500,
        compaction_fixed_tokens=300,
    )
    assert small.request_limit == 15_000
    room = 15_000 - 1000
    assert small.summary_max == room // 10  # a tenth of the room, not the configured 3,000
    assert small.trigger == room - small.summary_max - 1000
    assert small.target == small.trigger // 2
    assert small.probe_budget < 15_000
    assert small.probe_summary_max <= settings.probe_summary_max_est_tokens
    assert small.compaction_input_cap < 15_000


def test_a_small_window_leaves_the_history_most_of_its_room() -> None:
    """Issue 23: an 8,000-token model (half of it for output, ~3,000 estimated tokens of system prompt
    and tools) compacted at about 2,000 estimated tokens: a 3,000-token summary and a 1,000-token
    reserve took the rest. Shared by proportion, the history gets at least 80 % of the room."""
    settings = ChatSettings()
    window = 8_000  # estimate units, output already reserved (calibration 0.5 of a 4,000-token room)
    fixed = 3_000
    small = limits(
        settings,
        Windows(primary=window, probe=window, compaction=window),
        primary_fixed_tokens=fixed,
        probe_fixed_tokens=1_500,
        compaction_fixed_tokens=300,
    )
    room = window - fixed
    assert small.trigger >= room * 8 // 10
    assert small.summary_max + small.trigger + 500 <= room  # the summary and a reserve still fit
    assert small.trigger - small.target >= room * 4 // 10  # what grows between two compactions
    assert small.probe_budget >= (window - 1_500) * 7 // 10
