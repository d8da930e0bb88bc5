"""The primary turn as a sans-I/O generator (SPEC §4.3).

The runner drives :func:`primary_turn`: each value it yields is a command (:class:`ModelCall`,
:class:`ToolRun`, :class:`Persist`, :class:`CheckInterrupt`), and the runner sends back what happened
(:class:`ModelAnswer`, :class:`ToolDone`, :class:`Ack`), each stamped with the current time. Tests feed
scripted answers; the benchmark replays a long chat through it without any I/O.

One step = one model call (plus up to ``MAX_FORCED_RETRIES`` re-asks when the model ignores the forced
tool choice; their usage is added, only the final answer is kept) → the tool calls in order → one
persisted :class:`TurnRecord` → the interrupt check. A step is persisted *before* the interrupt check,
and the loop stops at step boundaries only; nothing in flight is preempted.

Write-ahead: a step whose answer calls ``send_message`` or ``react`` (or another tool declaring
``write_ahead``: ``set_reminder``) is first persisted as *pending* (the model's answer, no results)
before any tool runs, then replaced by the complete record. A process that dies in between leaves the
pending step behind; the next wake-up of the chat passes it as ``TurnPlan.recover`` and the generator
runs that step's tool calls again without a model call, under the same idempotency keys, so a send the
platform already executed is deduplicated and one that never left is sent now. That one step is the whole
turn: whether its chain goes on is the runner's next decision, made from the stored turn responses like
any other. With ``TurnPlan.recover_abandon`` (the step is too old, or redoing it kept failing) the calls
are not run again; their results say delivery is unknown.

Per call: unknown tools and invalid arguments get an error result; calls over a count get a not-executed
result; the deadline is checked before every side effect. ``end_turn`` closes the turn even beside
follow-up results. The loop continues only when a result needs follow-up (work tools, errors,
``send_message(still_working=true)``), the step was not a wrap-up or react-only step, and enough of the
deadline remains for another model call; the record stores whether it actually continued.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field, replace
from typing import assert_never

from larkbot.canonical.llm import (
    AssistantMessage,
    LLMError,
    LLMResponse,
    Message,
    TextPart,
    ToolCallPart,
    ToolChoice,
    ToolResultMessage,
    Usage,
    UserPart,
)
from larkbot.driver.tools.core import tools

from .protocol import (
    Ack,
    CheckInterrupt,
    Command,
    Feedback,
    ModelAnswer,
    ModelCall,
    Persist,
    ToolDone,
    ToolRun,
    TurnOutcome,
    TurnPlan,
    TurnResult,
    idempotency_key,
)
from .records import ChainUsage, StepMode, TurnRecord

__all__ = [
    "MAX_FORCED_RETRIES",
    "UNKNOWN_DELIVERY",
    "Ack",
    "CheckInterrupt",
    "Command",
    "Feedback",
    "ModelAnswer",
    "ModelCall",
    "Persist",
    "ToolDone",
    "ToolRun",
    "TurnOutcome",
    "TurnPlan",
    "TurnResult",
    "idempotency_key",
    "primary_turn",
]

MAX_FORCED_RETRIES = 2
#: The result of a side effect whose outcome cannot be known (the model must not repeat it).
UNKNOWN_DELIVERY = "delivery unknown: it may have been done; do not repeat it"


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
    #: The tool calls of a recovered step that is not redone.
    abandoned: bool = False


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
        recovered = plan.recover if first else None
        mode: StepMode = (
            recovered.mode if recovered is not None else budget.step_mode(usage, plan.react_only and first)
        )
        wrapped_up = wrapped_up or mode == "wrap_up"
        offered = tools.exposed(
            mode,
            memory=plan.memory_tools,
            ban_spammer=plan.ban_spammer,
            reminders=plan.reminders,
            shell=plan.shell_tools_exposed,
        )
        if recovered is not None:
            step, call_at, answer = recovered.step, recovered.requested_at_ms, _Answer.of(recovered)
        else:
            call_at = now
            call = ModelCall(
                step=step,
                system=plan.system,
                messages=(*plan.history, *produced, plan.late_binding),
                tools=offered,
                tool_choice=ToolChoice(mode="any"),
                deadline_ms=deadline_ms,
            )
            asked = yield from _ask(call)
            if isinstance(asked, LLMError):
                return TurnResult("failed", step - plan.first_step, True, error=asked, usage=usage)
            answer, now = asked
        calls = [p for p in answer.message.parts if isinstance(p, ToolCallPart)]
        if recovered is None and any(c.name in tools.WRITE_AHEAD_TOOLS for c in calls):
            pending = _record(plan, step, call_at, answer, mode, (answer.message,), pending=True)
            ack = yield Persist(pending)
            assert isinstance(ack, Ack)
            now = ack.now_ms
        names = {spec.name for spec in offered}
        st = _Step(now=now, abandoned=recovered is not None and plan.recover_abandon)
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
        entries: tuple[Message, ...] = (answer.message, *_close(st.results, continues))
        record = replace(
            _record(plan, step, call_at, answer, mode, entries, pending=False),
            requires_follow_up=continues,
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
        if not continues or recovered is not None:
            outcome: TurnOutcome = (
                "sent"
                if any_sent
                else "reacted"
                if any_reacted
                else "budget_exhausted"
                if exhausted
                else "silent"
            )
            return TurnResult(outcome, steps, continues, deadline_reached=st.deadline, usage=usage)
        check = yield CheckInterrupt(step)
        assert isinstance(check, Ack)
        now = check.now_ms
        if check.interrupted:
            return TurnResult("interrupted", steps, True, usage=usage)
        step += 1
        first = False


@dataclass(frozen=True, slots=True)
class _Answer:
    """The model's final answer of a step (usage summed over forced re-asks)."""

    message: AssistantMessage
    usage: Usage
    model_identity: str
    fallback_from: tuple[str, ...] = ()

    @classmethod
    def of(cls, pending: TurnRecord) -> _Answer:
        message = pending.entries[0]
        assert isinstance(message, AssistantMessage)
        return cls(message, pending.usage, pending.model_identity, pending.fallback_from)


def _ask(call: ModelCall) -> Generator[Command, Feedback, tuple[_Answer, int] | LLMError]:
    """One model call, asked again (up to ``MAX_FORCED_RETRIES`` times) while the answer calls no tool."""
    total: Usage | None = None
    response: LLMResponse | None = None
    now = 0
    for _attempt in range(1 + MAX_FORCED_RETRIES):
        answer = yield call
        assert isinstance(answer, ModelAnswer)
        now = answer.now_ms
        if isinstance(answer.reply, LLMError):
            return answer.reply
        response = answer.reply
        total = response.usage if total is None else _add(total, response.usage)
        if any(isinstance(p, ToolCallPart) for p in response.message.parts):
            break
    assert response is not None
    assert total is not None
    return _Answer(response.message, total, response.model_identity, response.fallback_from), now


def _record(
    plan: TurnPlan,
    step: int,
    call_at: int,
    answer: _Answer,
    mode: StepMode,
    entries: tuple[Message, ...],
    *,
    pending: bool,
) -> TurnRecord:
    return TurnRecord(
        platform=plan.platform,
        chat_id=plan.chat_id,
        chain_id=plan.chain_id,
        step=step,
        wake_id=plan.wake_id,
        requested_at_ms=call_at,
        entries=entries,
        usage=answer.usage,
        model_identity=answer.model_identity,
        requires_follow_up=False,
        shell_tools_exposed=plan.shell_tools_exposed,
        mode=mode,
        work_calls=0,
        participation_attempts=0,
        sent=False,
        reacted=False,
        pending=pending,
        fallback_from=answer.fallback_from,
    )


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
    carried = replace(
        usage,
        work_calls=usage.work_calls + st.work_calls,
        participation_attempts=usage.participation_attempts + st.attempts,
    )
    kind = tools.kind(tc.name)
    match kind:
        case "end":
            st.ended = True
            return _text("turn ended"), True, False
        case "participation":
            allowed = budget.participation_allowed(carried)
        case "work":
            allowed = budget.work_call_allowed(carried)
        case _:
            assert_never(kind)
    participation = kind == "participation"
    if not allowed:
        st.over_budget = True
        return _text("not executed: the turn's budget for this kind of call is used up"), False, False
    if st.abandoned:
        return _text(f"{UNKNOWN_DELIVERY} (the service restarted during this step)"), False, False
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
