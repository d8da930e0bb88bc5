"""Prompt assembly: byte-stable system prompt, RC + TR merge, late binding, probe request, verdicts."""

from __future__ import annotations

import pytest

from larkbot.canonical.llm import (
    AssistantMessage,
    ReasoningPart,
    TextPart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from larkbot.driver.wake.core.participation import Participation
from larkbot.driver.wake.core.probe import read_verdict
from larkbot.driver.wake.core.prompt import (
    format_time,
    history,
    late_binding,
    probe_messages,
    probe_system_prompt,
    system_prompt,
)
from larkbot.driver.wake.core.records import TurnRecord
from larkbot.driver.wake.core.window import Window
from larkbot.testkit.driver.synthetic import response, segment, tool_call

T0 = 1_700_000_000_000


def _turn(at: int, text: str, *, model: str = "m", reasoning: bool = False, chain: str = "c") -> TurnRecord:
    parts: list[TextPart | ReasoningPart] = [TextPart(text=text)]
    if reasoning:
        parts.insert(0, ReasoningPart(text="thinking", format="openai-chat", model_identity=model))
    return TurnRecord(
        platform="feishu",
        chat_id="oc_1",
        chain_id=chain,
        step=0,
        wake_id="w",
        requested_at_ms=at,
        entries=(
            AssistantMessage(parts=tuple(parts), model_identity=model),
            ToolResultMessage(tool_call_id="c", parts=(TextPart(text="ok"),)),
        ),
        usage=Usage(input_tokens=1, output_tokens=1),
        model_identity=model,
        requires_follow_up=False,
        shell_tools_exposed=False,
        mode="normal",
        work_calls=0,
        participation_attempts=1,
        sent=True,
        reacted=False,
    )


def test_system_prompt_is_byte_stable_and_includes_personas() -> None:
    a = system_prompt("Lark", "feishu", ["You like tea.\n"])
    assert a == system_prompt("Lark", "feishu", ["You like tea."])
    assert "You like tea." in a
    assert "Lark" in a


def test_probe_prompt_is_byte_stable_and_carries_the_criteria_in_order() -> None:
    text = probe_system_prompt("Lark", "feishu", ["You like tea."])
    assert text == probe_system_prompt("Lark", "feishu", ["You like tea.\n"])
    flat = " ".join(text.split())
    in_order = [
        "An unanswered human address comes first: a human @-mentioned Lark, replied to or quoted one of its "
        "messages, or called it by name",
        "never suppressed by the volume brake",
        "Another bot mentioning or replying to Lark is not, by itself, a direct address",
        "Messages addressed to someone else default to no_action",
        "a correction about what Lark said or did, or about its persona",
        "model, provider, prompts, tools or deployment are never such an exception: backend secrecy wins",
        "Messages written by bots default to no_action, unless a human asked Lark to talk to that bot",
        "at most two rounds",
        "Lark's turn in a game it is playing",
        "bypass the volume brake on purpose",
        "needs something genuinely new",
        "more than ten messages in the last ten minutes",
        "react_only if a message clearly invites a reaction, and no_action otherwise",
    ]
    positions = [flat.find(phrase) for phrase in in_order]
    assert -1 not in positions, [p for p, at in zip(in_order, positions, strict=True) if at == -1]
    assert positions == sorted(positions)
    assert text.endswith("You like tea.\n")


def test_history_merges_rc_and_tr_by_time_rc_first_and_drops_self_sent() -> None:
    segs = (
        segment(1, at_ms=T0),
        segment(2, at_ms=T0 + 10),
        segment(3, at_ms=T0 + 20, myself=True, self_sent=True),
        segment(4, at_ms=T0 + 30),
    )
    msgs = history(segs, (_turn(T0 + 10, "reply"),), model_identity="m", reasoning_replay=3)
    assert [m.kind for m in msgs] == ["user", "assistant", "tool_result", "user"]
    first = msgs[0]
    assert isinstance(first, UserMessage)
    assert [p.text for p in first.parts] == [segs[0].xml, segs[1].xml]  # type: ignore[union-attr]
    last = msgs[3]
    assert isinstance(last, UserMessage)
    assert [p.text for p in last.parts] == [segs[3].xml]  # type: ignore[union-attr]


def test_appending_a_segment_never_rewrites_earlier_messages() -> None:
    segs = tuple(segment(i, at_ms=T0 + i) for i in range(1, 6))
    turns = (_turn(T0 + 2, "a"),)
    before = history(segs[:4], turns, model_identity="m", reasoning_replay=3)
    after = history(segs, turns, model_identity="m", reasoning_replay=3)
    assert after[: len(before) - 1] == before[:-1]
    assert after[-1].parts[: len(before[-1].parts)] == before[-1].parts  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("model", "replay", "kept"),
    [("m", 3, [True, True]), ("other", 3, [False, False]), ("m", 1, [False, True])],
)
def test_reasoning_replay_only_same_model_and_newest_turns(model: str, replay: int, kept: list[bool]) -> None:
    turns = (_turn(T0 + 1, "a", reasoning=True, chain="c1"), _turn(T0 + 2, "b", reasoning=True, chain="c2"))
    msgs = history((), turns, model_identity=model, reasoning_replay=replay)
    assistants = [m for m in msgs if isinstance(m, AssistantMessage)]
    assert [any(isinstance(p, ReasoningPart) for p in m.parts) for m in assistants] == kept


def test_open_chain_keeps_its_reasoning() -> None:
    turns = (_turn(T0 + 1, "a", reasoning=True, chain="open"), _turn(T0 + 2, "b", chain="x"))
    msgs = history((), turns, model_identity="m", reasoning_replay=0, open_chain_id="open")
    assert isinstance(msgs[0], AssistantMessage)
    assert isinstance(msgs[0].parts[0], ReasoningPart)


def test_late_binding_carries_time_with_year_offset_and_signals() -> None:
    stats = Participation(2, 42, 1)
    msg = late_binding(
        now_ms=T0, utc_offset_min=480, stats=stats, probe_reason="asked", interrupted=True, react_only=True
    )
    text = msg.parts[0].text  # type: ignore[union-attr]
    assert "Current time: 2023-11-15 06:13:20 +08:00 (Wednesday)" in text
    assert "last 10 minutes: 2" in text
    assert "last message: 42" in text
    assert "bot exchanges: 1" in text
    assert "asked" in text
    assert "interrupted" in text
    assert "only a reaction" in text
    assert format_time(T0, -330).endswith("-05:30 (Tuesday)")


def test_probe_messages_show_pins_omitted_marker_and_summary() -> None:
    window = Window((segment(1, mentions_me=True),), 7, (segment(9), segment(10)), "om_9")
    msgs = probe_messages(window, "earlier", now_ms=T0, utc_offset_min=0, stats=Participation(0, None, 0))
    texts = [p.text for p in msgs[0].parts]  # type: ignore[union-attr]
    assert texts[0] == "<summary>\nearlier\n</summary>"
    assert texts[2] == '<omitted messages="7"/>'
    assert len(texts) == 5
    assert "decide" in msgs[1].parts[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("calls", "decision", "failed_closed"),
    [
        ([tool_call("decide", should_act="send_message", reason="asked")], "send_message", False),
        ([tool_call("decide", should_act="react_only", reason="joke")], "react_only", False),
        ([tool_call("decide", should_act="no_action", reason="busy")], "no_action", False),
        ([], "no_action", True),
        ([tool_call("decide", should_act="shout", reason="x")], "no_action", True),
        ([tool_call("decide", should_act="send_message")], "no_action", True),
        ([tool_call("other", should_act="send_message", reason="x")], "no_action", True),
    ],
)
def test_probe_verdict_fails_closed(calls: list, decision: str, failed_closed: bool) -> None:  # type: ignore[type-arg]
    verdict = read_verdict(response(*calls))
    assert verdict.decision == decision
    assert verdict.failed_closed is failed_closed


def test_probe_verdict_with_non_json_arguments_fails_closed() -> None:
    bad = tool_call("decide").model_copy(update={"arguments_json": "not json"})
    assert read_verdict(response(bad)).failed_closed


def test_the_probe_summary_is_capped_keeping_its_newest_part() -> None:
    window = Window(pinned=(), omitted=0, tail=(segment(1, at_ms=T0),), start_id="om_1")
    summary = "old " * 3000 + "newest"
    msgs = probe_messages(
        window,
        summary,
        now_ms=T0,
        utc_offset_min=0,
        stats=Participation(0, None, 0),
        summary_max_est_tokens=10,
    )
    first = msgs[0]
    assert isinstance(first, UserMessage)
    head = first.parts[0]
    assert isinstance(head, TextPart)
    assert head.text == "<summary>\n" + summary[-20:] + "\n</summary>"
    assert head.text.endswith("newest\n</summary>")
