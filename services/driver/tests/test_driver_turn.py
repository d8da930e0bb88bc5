"""The primary turn generator, fed scripted model answers and tool outcomes (no I/O)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from larkbot.canonical.llm import LLMError, LLMResponse, TextPart, ToolResultMessage, Usage, UserMessage
from larkbot.driver.tools.core import tools
from larkbot.driver.wake.core.budget import TurnBudget
from larkbot.driver.wake.core.records import ChainUsage, TurnRecord
from larkbot.driver.wake.core.turn import (
    Ack,
    CheckInterrupt,
    ModelAnswer,
    ModelCall,
    ToolDone,
    ToolRun,
    TurnPlan,
    TurnResult,
    idempotency_key,
    primary_turn,
)
from larkbot.driver.wake.interpreter import interpret
from larkbot.testkit.driver.scripted import ScriptedPorts
from larkbot.testkit.driver.synthetic import response, tool_call

T0 = 1_700_000_000_000
LATE = UserMessage(parts=(TextPart(text="<late-binding/>"),))
HISTORY = (UserMessage(parts=(TextPart(text="<message id='m1'>hi</message>"),)),)


def _plan(**over: object) -> TurnPlan:
    fields: dict[str, object] = {
        "platform": "feishu",
        "chat_id": "oc_1",
        "wake_id": "w1",
        "chain_id": "c1",
        "first_step": 0,
        "usage": ChainUsage(),
        "budget": TurnBudget(),
        "react_only": False,
        "started_ms": T0,
        "system": "system",
        "history": HISTORY,
        "late_binding": LATE,
    }
    fields.update(over)
    return TurnPlan(**fields)  # type: ignore[arg-type]


@dataclass
class Run:
    result: TurnResult
    calls: list[ModelCall] = field(default_factory=list)
    tools: list[ToolRun] = field(default_factory=list)
    records: list[TurnRecord] = field(default_factory=list)
    #: Write-ahead records, in order, with what had run when each was persisted.
    pending: list[tuple[TurnRecord, int]] = field(default_factory=list)


def _ok(run: ToolRun) -> ToolDone:
    return ToolDone(True, (TextPart(text=f"{run.name} ok"),), T0 + 100)


@dataclass
class _Ports(ScriptedPorts):
    """Scripted ports with the fixed times these tests reason about: a model answer at ``T0 + 50``, a
    tool's own time, every persist at ``persist_now``; interrupt checks answered from a list."""

    persist_now: int = T0 + 200
    interrupts: list[bool] = field(default_factory=list)
    runs: list[ToolRun] = field(default_factory=list)
    records: list[TurnRecord] = field(default_factory=list)
    pending: list[tuple[TurnRecord, int]] = field(default_factory=list)

    async def model(self, call: ModelCall) -> ModelAnswer:
        self.calls.append(call)
        return ModelAnswer(self.script(call), T0 + 50)

    async def tool(self, run: ToolRun) -> ToolDone:
        self.runs.append(run)
        return self.tool_script(run)

    async def persist(self, record: TurnRecord) -> Ack:
        if record.pending:
            self.pending.append((record, len(self.runs)))
        else:
            self.records.append(record)
        return Ack(self.persist_now)

    async def check_interrupt(self, check: CheckInterrupt) -> Ack:
        return Ack(self.persist_now, self.interrupts.pop(0) if self.interrupts else False)


def drive(
    plan: TurnPlan,
    script: list[LLMResponse | LLMError],
    *,
    tool: Callable[[ToolRun], ToolDone] = _ok,
    interrupts: list[bool] | None = None,
    persist_now: int = T0 + 200,
) -> Run:
    """One primary turn through the service's interpreter, on scripted ports."""
    answers = iter(script)
    ports = _Ports(
        script=lambda _call: next(answers),
        now_ms=T0,
        tool_script=tool,
        persist_now=persist_now,
        interrupts=list(interrupts or []),
    )
    result = asyncio.run(interpret(primary_turn(plan), ports))
    calls = [c for c in ports.calls if isinstance(c, ModelCall)]
    return Run(result, calls, ports.runs, ports.records, ports.pending)


def _names(call: ModelCall) -> list[str]:
    return [t.name for t in call.tools]


def _results(record: TurnRecord) -> list[ToolResultMessage]:
    return [e for e in record.entries if isinstance(e, ToolResultMessage)]


def test_end_turn_alone_is_silence() -> None:
    run = drive(_plan(), [response(tool_call(tools.END))])
    assert run.result.outcome == "silent"
    assert run.tools == []
    assert len(run.records) == 1
    assert not run.records[0].requires_follow_up
    call = run.calls[0]
    assert call.tool_choice.mode == "any"
    assert call.messages == (*HISTORY, LATE)
    assert _names(call) == [
        "send_message",
        "react",
        "end_turn",
        "read_image",
        "read_old_messages",
        "recall_message",
        "read_file",
    ]


def test_send_is_terminal_with_a_stable_idempotency_key() -> None:
    run = drive(_plan(), [response(tool_call(tools.SEND, text="hello", reply_to="m1"))])
    assert run.result.outcome == "sent"
    assert run.tools[0].args == {"text": "hello", "reply_to": "m1"}
    assert run.tools[0].idempotency_key == idempotency_key("feishu", "oc_1", "c1", 0, 0)
    assert len(run.tools[0].idempotency_key) <= 50
    assert run.records[0].sent
    assert run.records[0].participation_attempts == 1


def test_still_working_keeps_the_loop_open_and_late_binding_stays_last() -> None:
    run = drive(
        _plan(),
        [
            response(tool_call(tools.SEND, text="one sec", still_working=True)),
            response(tool_call(tools.END, "call_2")),
        ],
    )
    assert run.result.outcome == "sent"
    assert [r.requires_follow_up for r in run.records] == [True, False]
    second = run.calls[1].messages
    assert second[-1] == LATE
    assert second[: len(HISTORY)] == HISTORY
    assert second[len(HISTORY) : -1] == run.records[0].entries
    assert run.records[1].step == 1


def test_work_tools_follow_up_then_budget_runs_out_into_a_wrap_up_step() -> None:
    read = tool_call(tools.READ_OLD, message_ids=["m1"])
    run = drive(_plan(), [response(read), response(read), response(read)])
    assert [_names(c) for c in run.calls][2] == ["send_message", "react", "end_turn"]
    assert [r.mode for r in run.records] == ["normal", "normal", "wrap_up"]
    assert [r.requires_follow_up for r in run.records] == [True, True, False]
    wrap = _results(run.records[2])[0]
    assert wrap.is_error
    assert "unknown tool" in wrap.parts[0].text  # type: ignore[union-attr]
    assert not wrap.requires_follow_up  # closing steps are stored with follow-up cleared
    assert run.result.outcome == "budget_exhausted"
    assert not run.result.chain_open


def test_over_budget_calls_in_one_step_are_not_executed() -> None:
    calls = [tool_call(tools.READ_IMAGE, f"c{i}", file_id=f"f{i}", detail="low") for i in range(5)]
    run = drive(_plan(), [response(*calls), response(tool_call(tools.END))])
    assert len(run.tools) == 4
    last = _results(run.records[0])[4]
    assert last.is_error
    assert "not executed" in last.parts[0].text  # type: ignore[union-attr]
    assert run.records[0].work_calls == 4
    assert run.records[1].mode == "wrap_up"


def test_send_and_react_attempts_share_one_cap() -> None:
    calls = [
        tool_call(tools.SEND, "c0", text="a"),
        tool_call(tools.REACT, "c1", message_id="m1", emoji="👍"),
        tool_call(tools.SEND, "c2", text="b"),
        tool_call(tools.SEND, "c3", text="c"),
        tool_call(tools.END, "c4"),
    ]
    run = drive(_plan(), [response(*calls)])
    assert [t.name for t in run.tools] == ["send_message", "react", "send_message"]
    assert "not executed" in _results(run.records[0])[3].parts[0].text  # type: ignore[union-attr]


def test_invalid_arguments_and_unknown_tools_become_error_results() -> None:
    calls = [
        tool_call(tools.SEND, "c0", text=""),
        tool_call("shell", "c1", cmd="ls"),
        tool_call(tools.REACT, "c2", message_id="m1"),
    ]
    bad_json = response(*calls).message.parts[0].model_copy(update={"arguments_json": "{nope"})
    run = drive(
        _plan(),
        [response(*calls, tool_call(tools.READ_OLD, "c3", message_ids=[])), response(tool_call(tools.END))],
    )
    results = _results(run.records[0])
    assert all(r.is_error for r in results)
    assert "invalid arguments" in results[0].parts[0].text  # type: ignore[union-attr]
    assert "unknown tool" in results[1].parts[0].text  # type: ignore[union-attr]
    assert run.tools == []
    assert run.records[0].requires_follow_up  # the model gets a step to correct itself
    assert tools.validate(tools.SEND, bad_json.arguments_json) == tools.Invalid(
        "arguments are not valid JSON"
    )  # type: ignore[union-attr]


def test_react_only_exposes_react_and_end_turn_for_one_step() -> None:
    run = drive(
        _plan(react_only=True),
        [
            response(
                tool_call(tools.SEND, "c0", text="hi"),
                tool_call(tools.REACT, "c1", message_id="m1", emoji="👍"),
            )
        ],
    )
    assert _names(run.calls[0]) == ["react", "end_turn"]
    assert [t.name for t in run.tools] == ["react"]
    assert len(run.calls) == 1
    assert not run.records[0].requires_follow_up  # the unknown-tool error cannot reopen the chain
    assert run.result.outcome == "reacted"


def test_interrupt_after_a_persisted_step_leaves_the_chain_open() -> None:
    run = drive(_plan(), [response(tool_call(tools.READ_OLD, message_ids=["m1"]))], interrupts=[True])
    assert run.result.outcome == "interrupted"
    assert run.result.chain_open
    assert run.records[0].requires_follow_up
    assert run.result.usage == ChainUsage(rounds=1, work_calls=1)


def test_continuation_carries_the_chain_budget() -> None:
    plan = _plan(first_step=2, usage=ChainUsage(rounds=2, work_calls=2))
    run = drive(plan, [response(tool_call(tools.SEND, text="done"))])
    assert run.records[0].mode == "wrap_up"
    assert run.records[0].step == 2
    assert run.tools[0].idempotency_key == idempotency_key("feishu", "oc_1", "c1", 2, 0)


def test_model_failure_ends_the_turn_as_failed() -> None:
    error = LLMError(request_id="r", category="transient", message="503")
    run = drive(_plan(), [error])
    assert run.result.outcome == "failed"
    assert run.result.error == error
    assert run.records == []


def test_ignored_forced_tool_choice_is_asked_again_and_usage_added() -> None:
    u = Usage(input_tokens=10, output_tokens=1)
    run = drive(
        _plan(),
        [
            response(text="hmm", usage=u),
            response(text="hmm", usage=u),
            response(tool_call(tools.END), usage=u),
        ],
    )
    assert len(run.calls) == 3
    assert run.records[0].usage.input_tokens == 30
    assert len(run.records) == 1


def test_deadline_is_checked_before_each_side_effect() -> None:
    def slow(run: ToolRun) -> ToolDone:
        return ToolDone(True, (TextPart(text="ok"),), T0 + 16_000)

    calls = [tool_call(tools.READ_OLD, "c0", message_ids=["m1"]), tool_call(tools.SEND, "c1", text="late")]
    run = drive(_plan(), [response(*calls)], tool=slow)
    assert [t.name for t in run.tools] == ["read_old_messages"]
    assert "deadline" in _results(run.records[0])[1].parts[0].text  # type: ignore[union-attr]
    assert not run.records[0].requires_follow_up
    assert run.result.deadline_reached


def test_no_new_model_call_without_the_minimum_time_left() -> None:
    run = drive(
        _plan(),
        [response(tool_call(tools.READ_OLD, message_ids=["m1"]))],
        persist_now=T0 + 14_000,
        tool=lambda r: ToolDone(True, (TextPart(text="ok"),), T0 + 13_500),
    )
    assert len(run.calls) == 1
    assert not run.records[0].requires_follow_up
    assert run.result.deadline_reached


def test_end_turn_closes_beside_follow_up_results() -> None:
    calls = [tool_call(tools.READ_OLD, "c0", message_ids=["m1"]), tool_call(tools.END, "c1")]
    run = drive(_plan(), [response(*calls)])
    assert len(run.calls) == 1
    assert not run.records[0].requires_follow_up
    assert not any(r.requires_follow_up for r in _results(run.records[0]))


def test_failed_send_with_unknown_outcome_is_not_followed_up() -> None:
    def unknown(run: ToolRun) -> ToolDone:
        return ToolDone(False, (TextPart(text="delivery unknown"),), T0 + 100, final=True)

    run = drive(_plan(), [response(tool_call(tools.SEND, text="x"))], tool=unknown)
    assert not run.records[0].requires_follow_up
    assert run.result.outcome == "silent"


def test_a_step_that_sends_is_written_ahead_before_any_tool_runs() -> None:
    run = drive(_plan(), [response(tool_call(tools.SEND, text="hello"))])
    assert len(run.pending) == 1
    ahead, tools_run_before = run.pending[0]
    assert tools_run_before == 0
    assert ahead.step == 0
    assert ahead.entries == (run.records[0].entries[0],)
    assert not ahead.sent
    assert not ahead.requires_follow_up
    assert ahead.participation_attempts == 0
    assert not run.records[0].pending


def test_a_step_setting_a_reminder_is_written_ahead_too() -> None:
    # A reminder is kept under its call's key: a step lost before it is stored must be redone, not asked
    # of the model again under a new key (which would set it twice).
    plan = _plan(reminders=True)
    run = drive(
        plan,
        [
            response(tool_call(tools.SET_REMINDER, when="in 1 hour", text="tea")),
            response(tool_call(tools.END)),
        ],
    )
    assert len(run.pending) == 1
    assert run.pending[0][1] == 0
    assert tools.PARTICIPATION_TOOLS | {tools.SET_REMINDER} == tools.WRITE_AHEAD_TOOLS


def test_steps_without_side_effects_are_not_written_ahead() -> None:
    run = drive(
        _plan(),
        [response(tool_call(tools.READ_OLD, message_ids=["m1"])), response(tool_call(tools.END))],
    )
    assert run.pending == []
    assert len(run.records) == 2


def _pending_send(**over: object) -> TurnRecord:
    ahead = drive(
        _plan(first_step=2),
        [
            response(tool_call(tools.SEND, "call_s", text="hello", still_working=True)),
            response(tool_call(tools.END)),
        ],
    ).pending[0][0]
    return replace(ahead, **{"requested_at_ms": T0 - 5_000, **over})  # type: ignore[arg-type]


def test_a_recovered_step_redoes_its_calls_under_the_same_keys_without_a_model_call() -> None:
    pending = _pending_send()
    run = drive(_plan(first_step=2, recover=pending, usage=ChainUsage(rounds=1, work_calls=1)), [])
    assert run.calls == []
    assert [t.name for t in run.tools] == [tools.SEND]
    assert run.tools[0].idempotency_key == idempotency_key("feishu", "oc_1", "c1", 2, 0)
    assert run.pending == []
    redone = run.records[0]
    assert (redone.step, redone.requested_at_ms, redone.pending, redone.sent) == (2, T0 - 5_000, False, True)
    assert redone.entries[0] == pending.entries[0]
    # still_working: the step leaves its chain open; going on is the runner's next decision.
    assert redone.requires_follow_up
    assert run.result.chain_open
    assert run.result.outcome == "sent"


def test_a_recovered_step_that_is_abandoned_is_closed_with_delivery_unknown() -> None:
    pending = _pending_send()
    run = drive(_plan(first_step=2, recover=pending, recover_abandon=True), [])
    assert run.tools == []
    assert run.calls == []
    closed = run.records[0]
    assert not closed.pending
    assert not closed.sent
    assert not closed.requires_follow_up
    result = _results(closed)[0]
    assert result.is_error
    assert "do not repeat it" in result.parts[0].text  # type: ignore[union-attr]
    assert not run.result.chain_open
    assert run.result.outcome == "silent"
