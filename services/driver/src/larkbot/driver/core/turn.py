"""The primary turn as a sans-I/O generator (SPEC §4.3).

The runner drives :func:`primary_turn`: each value it yields is a command (:class:`ModelCall`,
:class:`ToolRun`, :class:`Persist`, :class:`CheckInterrupt`), and the runner sends back what happened
(:class:`ModelAnswer`, :class:`ToolDone`, :class:`Ack`), each stamped with the current time. Tests feed
scripted answers; the benchmark replays a long chat through it without any I/O.

One step = one model call (plus up to ``MAX_FORCED_RETRIES`` re-asks when the model ignores the forced
tool choice; their usage is added, only the final answer is kept) → the tool calls in order → one
persisted :class:`TurnRecord` → the interrupt check. A step is persisted *before* the interrupt check,
and the loop stops at step boundaries only; nothing in flight is preempted.

Per call: unknown tools and invalid arguments get an error result; calls over a count get a not-executed
result; the deadline is checked before every side effect. ``end_turn`` closes the turn even beside
follow-up results. The loop continues only when a result needs follow-up (work tools, errors,
``send_message(still_working=true)``), the step was not a wrap-up or react-only step, and enough of the
deadline remains for another model call; the record stores whether it actually continued.
"""

from __future__ import annotations

import hashlib
from collections.abc import Generator
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from larkbot.canonical.llm import (
    LLMError,
    LLMResponse,
    Message,
    TextPart,
    ToolCallPart,
    ToolChoice,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
    UserPart,
)

from . import tools
from .budget import TurnBudget
from .records import ChainUsage, StepMode, TurnRecord

MAX_FORCED_RETRIES = 2
TurnOutcome = Literal["sent", "reacted", "silent", "budget_exhausted", "failed", "interrupted"]


@dataclass(frozen=True, slots=True)
class TurnPlan:
    platform: str
    chat_id: str
    wake_id: str
    chain_id: str
    #: The chain's next step number (0 for a new chain).
    first_step: int
    usage: ChainUsage
    budget: TurnBudget
    react_only: bool
    started_ms: int
    system: str
    history: tuple[Message, ...]
    late_binding: UserMessage
    shell_tools_exposed: bool = False


@dataclass(frozen=True, slots=True)
class ModelCall:
    step: int
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    tool_choice: ToolChoice
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class ToolRun:
    step: int
    call_index: int
    name: str
    args: dict[str, Any]
    idempotency_key: str
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class Persist:
    record: TurnRecord


@dataclass(frozen=True, slots=True)
class CheckInterrupt:
    step: int


Command = ModelCall | ToolRun | Persist | CheckInterrupt


@dataclass(frozen=True, slots=True)
class ModelAnswer:
    reply: LLMResponse | LLMError
    now_ms: int


@dataclass(frozen=True, slots=True)
class ToolDone:
    ok: bool
    parts: tuple[UserPart, ...]
    now_ms: int
    #: The outcome must not be followed up (a send whose delivery is unknown must not be retried).
    final: bool = False


@dataclass(frozen=True, slots=True)
class Ack:
    now_ms: int
    interrupted: bool = False


Feedback = ModelAnswer | ToolDone | Ack


@dataclass(frozen=True, slots=True)
class TurnResult:
    outcome: TurnOutcome
    steps: int
    chain_open: bool
    error: LLMError | None = None
    deadline_reached: bool = False
    usage: ChainUsage = field(default_factory=ChainUsage)


def idempotency_key(platform: str, chat_id: str, chain_id: str, step: int, call_index: int) -> str:
    """Stable per tool call: a retried request names the same side effect (Feishu ``uuid`` ≤ 50 chars)."""
    digest = hashlib.sha256(f"{platform}\x1f{chat_id}\x1f{chain_id}\x1f{step}\x1f{call_index}".encode())
    return "lb" + digest.hexdigest()[:40]


def _text(message: str) -> tuple[UserPart, ...]:
    return (TextPart(text=message),)


def _add(a: Usage, b: Usage) -> Usage:
    return Usage(
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        cache_read_tokens=a.cache_read_tokens + b.cache_read_tokens,
        cache_write_tokens=a.cache_write_tokens + b.cache_write_tokens,
        reasoning_tokens=(a.reasoning_tokens or 0) + (b.reasoning_tokens or 0)
        if a.reasoning_tokens is not None or b.reasoning_tokens is not None
        else None,
    )


@dataclass(slots=True)
class _Step:
    """Mutable bookkeeping of one step (local to the generator)."""

    now: int
    results: list[ToolResultMessage] = field(default_factory=list)
    follow_up: bool = False
    ended: bool = False
    deadline: bool = False
    over_budget: bool = False
    work_calls: int = 0
    attempts: int = 0
    sent: bool = False
    reacted: bool = False


def primary_turn(plan: TurnPlan) -> Generator[Command, Feedback, TurnResult]:
    budget = plan.budget
    usage = plan.usage
    deadline_ms = plan.started_ms + budget.deadline_ms
    now = plan.started_ms
    produced: list[Message] = []
    step = plan.first_step
    any_sent = any_reacted = exhausted = False
    wrapped_up = False
    first = True
    while True:
        mode: StepMode = budget.step_mode(usage, plan.react_only and first)
        wrapped_up = wrapped_up or mode == "wrap_up"
        offered = tools.exposed(mode)
        call = ModelCall(
            step=step,
            system=plan.system,
            messages=(*plan.history, *produced, plan.late_binding),
            tools=offered,
            tool_choice=ToolChoice(mode="any"),
            deadline_ms=deadline_ms,
        )
        call_at = now
        total: Usage | None = None
        response: LLMResponse | None = None
        for _attempt in range(1 + MAX_FORCED_RETRIES):
            answer = yield call
            assert isinstance(answer, ModelAnswer)
            now = answer.now_ms
            if isinstance(answer.reply, LLMError):
                return TurnResult("failed", step - plan.first_step, True, error=answer.reply, usage=usage)
            response = answer.reply
            total = response.usage if total is None else _add(total, response.usage)
            if any(isinstance(p, ToolCallPart) for p in response.message.parts):
                break
        assert response is not None
        assert total is not None
        calls = [p for p in response.message.parts if isinstance(p, ToolCallPart)]
        names = {spec.name for spec in offered}
        st = _Step(now=now)
        for index, tc in enumerate(calls):
            parts, ok, follow = yield from _run_call(plan, st, usage, names, tc, step, index, deadline_ms)
            st.results.append(
                ToolResultMessage(tool_call_id=tc.id, parts=parts, is_error=not ok, requires_follow_up=follow)
            )
            st.follow_up = st.follow_up or follow
        now = st.now
        continues = (
            st.follow_up
            and not st.ended
            and not st.deadline
            and mode == "normal"
            and budget.can_start_model_call(plan.started_ms, now)
        )
        if st.follow_up and not continues and mode == "normal" and not st.ended:
            st.deadline = st.deadline or not budget.can_start_model_call(plan.started_ms, now)
        exhausted = exhausted or st.over_budget or mode == "wrap_up"
        entries: tuple[Message, ...] = (response.message, *_close(st.results, continues))
        record = TurnRecord(
            platform=plan.platform,
            chat_id=plan.chat_id,
            chain_id=plan.chain_id,
            step=step,
            wake_id=plan.wake_id,
            requested_at_ms=call_at,
            entries=entries,
            usage=total,
            model_identity=response.model_identity,
            requires_follow_up=continues,
            shell_tools_exposed=plan.shell_tools_exposed,
            mode=mode,
            work_calls=st.work_calls,
            participation_attempts=st.attempts,
            sent=st.sent,
            reacted=st.reacted,
        )
        ack = yield Persist(record)
        assert isinstance(ack, Ack)
        now = ack.now_ms
        produced.extend(entries)
        usage = replace(
            usage,
            rounds=usage.rounds + (1 if continues else 0),
            work_calls=usage.work_calls + st.work_calls,
            participation_attempts=usage.participation_attempts + st.attempts,
        )
        any_sent = any_sent or st.sent
        any_reacted = any_reacted or st.reacted
        steps = step - plan.first_step + 1
        if not continues:
            outcome: TurnOutcome = (
                "sent"
                if any_sent
                else "reacted"
                if any_reacted
                else "budget_exhausted"
                if exhausted
                else "silent"
            )
            return TurnResult(outcome, steps, False, deadline_reached=st.deadline, usage=usage)
        check = yield CheckInterrupt(step)
        assert isinstance(check, Ack)
        now = check.now_ms
        if check.interrupted:
            return TurnResult("interrupted", steps, True, usage=usage)
        step += 1
        first = False


def _close(results: list[ToolResultMessage], continues: bool) -> list[ToolResultMessage]:
    """Steps that close the chain are stored with follow-up flags cleared."""
    if continues:
        return results
    return [
        r if not r.requires_follow_up else r.model_copy(update={"requires_follow_up": False}) for r in results
    ]


def _run_call(
    plan: TurnPlan,
    st: _Step,
    usage: ChainUsage,
    offered: set[str],
    tc: ToolCallPart,
    step: int,
    index: int,
    deadline_ms: int,
) -> Generator[Command, Feedback, tuple[tuple[UserPart, ...], bool, bool]]:
    """One tool call: ``(result parts, ok, requires follow-up)``."""
    budget = plan.budget
    if tc.name not in offered:
        return _text(f"error: unknown tool {tc.name[:64]!r}"), False, True
    args = tools.validate(tc.name, tc.arguments_json)
    if isinstance(args, tools.Invalid):
        return _text(f"error: invalid arguments: {args.message}"), False, True
    if tc.name == tools.END:
        st.ended = True
        return _text("turn ended"), True, False
    carried = replace(
        usage,
        work_calls=usage.work_calls + st.work_calls,
        participation_attempts=usage.participation_attempts + st.attempts,
    )
    participation = tc.name in tools.PARTICIPATION_TOOLS
    allowed = budget.participation_allowed(carried) if participation else budget.work_call_allowed(carried)
    if not allowed:
        st.over_budget = True
        return _text("not executed: the turn's budget for this kind of call is used up"), False, False
    if st.deadline or budget.expired(plan.started_ms, st.now):
        st.deadline = True
        return _text("not executed: the turn's deadline was reached"), False, False
    if participation:
        st.attempts += 1
    else:
        st.work_calls += 1
    done = yield ToolRun(
        step=step,
        call_index=index,
        name=tc.name,
        args=args,
        idempotency_key=idempotency_key(plan.platform, plan.chat_id, plan.chain_id, step, index),
        deadline_ms=deadline_ms,
    )
    assert isinstance(done, ToolDone)
    st.now = done.now_ms
    if not done.ok:
        return done.parts, False, not done.final
    if tc.name == tools.SEND:
        st.sent = True
        return done.parts, True, bool(args.get("still_working", False))
    if tc.name == tools.REACT:
        st.reacted = True
        return done.parts, True, False
    return done.parts, True, True
