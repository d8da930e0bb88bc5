"""One wake-up of a chat as a sans-I/O generator (SPEC §4): redo a step left pending, pick the path
(continuation, activation, the chat's manners and rate limits, brake, probe), decide the shell tools'
gate once (``core.gate``), run the primary turn, keep the request within the model's window, and mark the
input processed. The manners' guidance (``manners.core``), who is rate-limited (``ratelimit.core``) and
the speaking budget when it runs low (``budgets.core``) go into the probe's and the primary's
late-binding message only.

:func:`wake_up` yields commands and receives their results; one interpreter
(``adapters.interpreter.interpret``) drives it for the service, the benchmark and the tests alike. The
primary turn's own commands (:mod:`.turn`) pass through the same interpreter (``yield from``).

The commands, what each answers, and the flow's inputs and outcomes are in :mod:`.commands`. This module
is the flow itself, ~500 lines on purpose: one generator read top to bottom, whose steps (recover, probe,
gate, fit the primary into the window) share the state loaded with the chat (``_Loaded``); cut further,
that state would cross modules.

An exception from a command's execution is thrown back into the generator at that command. During the
primary turn it is answered by looking at the newest turn response: a pending step means "retry soon,
which redoes it" (transient); otherwise it propagates (a bug). During a recovery it is transient and
counted against the recovery attempts.

Overflow is an answer, not a latch, for the probe and the primary alike: a request whose estimate exceeds
the model's window, or that the provider refuses as too long, makes the wake-up compact (``Compact``),
then ask again with less — the probe with half the window it showed, the primary with a trimmed history,
then with its unhandled input clipped (``core.fit``). The input the wake-up answers (after
``processed_until_ms``) is never compacted away and never trimmed; the limits are re-read with the chat
(``ChatView.limits``), so a window learnt from a refusal applies to the next attempt.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from larkbot.canonical.llm import LLMError, LLMResponse
from larkbot.driver.budgets.core import speaking
from larkbot.driver.compaction.core.compaction import first_unprocessed
from larkbot.driver.manners.core import manners
from larkbot.driver.memory.core.memory import Memory
from larkbot.driver.memory.core.recall import memory_block, people_in
from larkbot.driver.ratelimit.core import admission
from larkbot.driver.reminders.core.reminders import late_binding_lines
from larkbot.driver.shell.core import gate
from larkbot.driver.tools.core import tools

from . import fit, prompt
from .actions import action_segments, with_actions
from .commands import (
    AskRates,
    ChatView,
    Compact,
    FinalFailure,
    Flow,
    LoadChain,
    LoadLatest,
    LoadMemories,
    LoadTurns,
    MarkProcessed,
    Note,
    NoteKind,
    Path,
    ProbeCall,
    Rated,
    ReadChat,
    Recalled,
    Remember,
    ShowTyping,
    Sticky,
    StoreProbe,
    TransientFailure,
    WakeCommand,
    WakeDone,
    WakeFailure,
    WakeFeedback,
    WakeInput,
    WakeOutcome,
    WakeSettings,
    remember,
)
from .estimate import request_tokens, segment_tokens
from .participation import bot_loop_brake, participation
from .probe import read_verdict
from .protocol import ModelAnswer, TurnPlan, TurnResult
from .records import Activation, ChainUsage, ProbeRecord, TurnRecord, open_chain
from .turn import primary_turn
from .window import select_window


# -- the flow -----------------------------------------------------------------------------------------
@dataclass(slots=True)
class _Loaded:
    view: ChatView
    turns: tuple[TurnRecord, ...]
    chain: tuple[TurnRecord, ...]


def _load(w: WakeInput) -> Generator[WakeCommand, WakeFeedback, _Loaded]:
    view = yield ReadChat()
    assert isinstance(view, ChatView)
    turns = yield LoadTurns(view.turns_from_ms)
    assert isinstance(turns, tuple)
    chain = open_chain(turns)
    if chain:
        loaded = yield LoadChain(chain[-1].chain_id)
        assert isinstance(loaded, tuple)
        chain = loaded
    return _Loaded(view, turns, chain)


def wake_up(w: WakeInput) -> Flow:
    state = yield from _load(w)
    latest = state.turns[-1] if state.turns else None
    if latest is not None and latest.pending:
        recovered = yield from _recover(w, state.view, latest)
        if recovered is not None:
            return recovered
        state = yield from _load(w)
        if state.view.stopping:
            return WakeDone("recovery")  # handed over: the next holder goes on from the stored turns
    view = state.view
    manner = manners.assess(
        view.segments,
        since_ms=view.processed_until_ms,
        now_ms=view.now_ms,
        utc_offset_min=w.utc_offset_min,
        manners=w.settings.manners,
        blocked=w.settings.blocked_users,
    )
    guidance = (*manners.guidance(manner, w.settings.manners), *speaking.guidance(view.speaking_budget))
    activation: Activation | None
    if state.chain:
        path: Path = "continuation"
        activation = None
    elif w.wake.activation is not None:
        path, activation = "activation", w.wake.activation
    elif (held := manner.held) is not None:
        return (yield from _held(w, held))
    elif w.settings.probe_enabled and bot_loop_brake(
        state.view.segments,
        state.view.processed_until_ms,
        state.view.now_ms,
        w.settings.bot_exchange_cap,
        w.settings.blocked_users,
    ):
        yield Note("path", "braked")
        yield Note("braked")
        yield MarkProcessed(w.input_until_ms)
        return WakeDone("braked")
    else:
        limited = yield from admission.admit(w, view)
        if isinstance(limited, TransientFailure):
            return limited
        if limited.held:
            return (yield from _held(w, "rate_limit"))
        guidance = (*guidance, *limited.lines)
        if not w.settings.probe_enabled:
            path, activation = "activation", Activation("send_message", "probe disabled for this chat")
        else:
            path = "probe"
            probed, state = yield from _probe(w, state, guidance)
            if isinstance(probed, WakeFailure):
                return probed
            activation = probed
            if activation is None:
                yield Note("path", "probe")
                yield MarkProcessed(w.input_until_ms)
                return WakeDone("suppressed")
    shell = yield from _gate(w, state)
    if path != "continuation":
        counted = yield from admission.count_turn(w, state.view.now_ms, activation)
        if counted is not None:
            return counted
    yield Note("path", path)
    result = yield from _primary_within_window(w, state, activation, shell, guidance)
    if isinstance(result, WakeFailure):
        return result
    if result.outcome == "failed":
        error = result.error
        failed: type[WakeFailure] = (
            TransientFailure if error is not None and error.category == "transient" else FinalFailure
        )
        return failed(f"primary failed: {error.category if error else 'unknown'}", activation)
    yield MarkProcessed(w.input_until_ms)
    return WakeDone(path)


def _held(w: WakeInput, reason: str) -> Generator[WakeCommand, WakeFeedback, WakeOutcome]:
    yield Note("path", "held")
    yield Note("held", reason)
    yield MarkProcessed(w.input_until_ms)
    return WakeDone("held")


def _recover(
    w: WakeInput, view: ChatView, pending: TurnRecord
) -> Generator[WakeCommand, WakeFeedback, WakeOutcome | None]:
    """Redo the tool calls of a step left pending (``core.turn``), or close it unredone when it is too
    old or redoing it failed ``recover_attempts`` times. ``None``: the wake-up goes on (the step's chain
    stays open, or external input arrived after the step's model call, which the model never saw)."""
    settings = w.settings
    abandon = (
        view.now_ms - pending.requested_at_ms > settings.recover_max_age_ms
        or view.recovery_failures >= settings.recover_attempts
    )
    closing = " (closing it unredone)" if abandon else ""
    yield Note("recovering", f"step {pending.step} of chain {pending.chain_id}{closing}")
    chain = yield LoadChain(pending.chain_id)
    assert isinstance(chain, tuple)
    done = tuple(t for t in chain if not t.pending)
    plan = _plan(w, view, (), done, None, recover=pending, abandon=abandon)
    try:
        result = yield from primary_turn(plan)
        yield Note("turn", result.outcome)
    except Exception as exc:
        # Any failure to redo is retried, and counted against the attempts.
        yield Note("recover_failed", repr(exc))
        yield Remember(recovery_failures=view.recovery_failures + 1)
        return TransientFailure(f"redoing a step failed: {type(exc).__name__}", activation=None)
    yield Remember(recovery_failures=0)
    yield Note("recovered", "abandoned" if abandon else "redone")
    if result.chain_open or view.latest_external_ms > pending.requested_at_ms:
        return None
    yield Note("path", "recovery")
    yield MarkProcessed(w.input_until_ms)
    return WakeDone("recovery")


def _gate(w: WakeInput, state: _Loaded) -> Generator[WakeCommand, WakeFeedback, bool]:
    """Whether the primary's steps offer the shell tools: the open chain's persisted decision, else the
    gate over the context the wake-up started with (a message arriving later cannot open it)."""
    view = state.view
    if state.chain:
        decision = gate.reuse(state.chain[-1].shell_tools_exposed)
    else:
        decision = gate.decide(
            view.segments,
            last_action_ms=view.last_action_ms,
            started_ms=view.now_ms,
            settings=w.settings.gate,
        )
    yield Note("gate", decision.outcome)
    if decision.maintainer_id is not None:
        yield Note("gate_opened", f"{decision.maintainer_id} (message {decision.message_id})")
    return decision.exposed


#: Probe requests one wake-up may make that the model refuses as too long, before it gives up.
PROBE_FIT_ATTEMPTS = 4


def _probe(
    w: WakeInput, state: _Loaded, guidance: tuple[str, ...]
) -> Generator[WakeCommand, WakeFeedback, tuple[Activation | WakeFailure | None, _Loaded]]:
    """The probe's activation, ``None`` when it suppressed the wake-up, or the failure of its call; and
    the chat as last read (a refusal for length compacts and reads it again)."""
    compacted = False
    budget: int | None = None
    for _attempt in range(PROBE_FIT_ATTEMPTS):
        view, settings = state.view, w.settings
        now = view.now_ms
        allowed = view.limits.probe_budget if budget is None else min(budget, view.limits.probe_budget)
        shown = with_actions(view.segments, action_segments(state.turns, w.utc_offset_min))
        window = select_window(shown, view.last_action_ms, allowed, view.probe_start)
        yield Remember(probe_start=window.start_id)
        if window.omitted:
            yield Note("probe_omitted", str(window.omitted))
        call = ProbeCall(
            system=prompt.probe_system_prompt(w.persona_name, w.platform, w.persona_texts),
            messages=prompt.probe_messages(
                window,
                view.summary.text if view.summary is not None else None,
                now_ms=now,
                utc_offset_min=w.utc_offset_min,
                stats=participation(view.segments, now),
                summary_max_est_tokens=view.limits.probe_summary_max,
                guidance=guidance,
            ),
            deadline_ms=now + settings.probe_timeout_ms,
        )
        answer = yield call
        assert isinstance(answer, ModelAnswer)
        reply = answer.reply
        if isinstance(reply, LLMError) and reply.category == "context_length":
            # Like the primary's: compact once, then show half of what was refused.
            yield Note("context_length", "probe")
            moved = False
            if not compacted:
                compacted = True
                moved = bool((yield Compact()))
            if not moved:
                budget = max(1, sum(segment_tokens(s) for s in window.segments) // 2)
            state = yield from _load(w)
            continue
        if not isinstance(reply, LLMResponse):
            yield Note("probe", "error")
            failed: type[WakeFailure] = (
                TransientFailure if reply.category in ("transient", "deadline") else FinalFailure
            )
            failure = failed(f"probe failed: {reply.category}", activation=None)
            return failure, state
        verdict = read_verdict(reply)
        record = ProbeRecord(
            platform=w.platform,
            chat_id=w.chat_id,
            wake_id=w.wake_id,
            requested_at_ms=now,
            decision=verdict.decision,
            reason=verdict.reason,
            activated=verdict.activated,
            failed_closed=verdict.failed_closed,
            model_identity=reply.model_identity,
            usage=reply.usage,
            window_start=window.start_id,
            omitted=window.omitted,
        )
        yield Note("probe", "failed_closed" if verdict.failed_closed else verdict.decision)
        yield StoreProbe(record, beside_primary=verdict.activated)
        if not verdict.activated:
            yield Note("suppressed", verdict.reason)
            return None, state
        return Activation(verdict.decision, verdict.reason), state
    yield Note("probe", "error")
    return FinalFailure("probe failed: context_length", activation=None), state


def _plan(
    w: WakeInput,
    view: ChatView,
    turns: tuple[TurnRecord, ...],
    chain: tuple[TurnRecord, ...],
    activation: Activation | None,
    *,
    recover: TurnRecord | None = None,
    abandon: bool = False,
    selected: prompt.Selected | None = None,
    memories: tuple[Memory, ...] = (),
    shell: bool = False,
    guidance: tuple[str, ...] = (),
) -> TurnPlan:
    started = view.now_ms
    segments = view.segments
    model = turns[-1].model_identity if turns else ""
    react_only = activation is not None and activation.decision == "react_only"
    continuing = recover or (chain[-1] if chain else None)
    shown_segments = selected.segments if selected is not None else segments
    shown_turns = selected.turns if selected is not None else turns
    return TurnPlan(
        platform=w.platform,
        chat_id=w.chat_id,
        wake_id=w.wake_id,
        chain_id=continuing.chain_id if continuing else w.new_chain_id,
        first_step=recover.step if recover else chain[-1].step + 1 if chain else 0,
        usage=ChainUsage.of(chain),
        budget=w.settings.budget,
        react_only=react_only,
        started_ms=started,
        system=prompt.system_prompt(w.persona_name, w.platform, w.persona_texts, memory=w.memory is not None),
        history=prompt.history(
            shown_segments,
            shown_turns,
            model_identity=model,
            reasoning_replay=w.settings.reasoning_replay,
            open_chain_id=continuing.chain_id if continuing else None,
            summary=view.summary.text if view.summary is not None else None,
            omitted=selected.omitted if selected is not None else 0,
            gaps=selected.gaps if selected is not None else (),
        ),
        late_binding=prompt.late_binding(
            now_ms=started,
            utc_offset_min=w.utc_offset_min,
            stats=participation(segments, started),
            probe_reason=activation.reason if activation else None,
            interrupted=bool(chain) or recover is not None,
            react_only=react_only,
            memory_block=memory_block(memories, w.memory) if w.memory is not None else None,
            active_tasks=view.active_tasks,
            reminders=late_binding_lines(view.reminders, w.utc_offset_min),
            guidance=guidance,
        ),
        shell_tools_exposed=continuing.shell_tools_exposed if continuing else shell,
        recover=recover,
        recover_abandon=abandon,
        memory_tools=w.memory is not None,
        ban_spammer=w.ban_spammer,
        reminders=w.reminders,
    )


def first_request_tokens(plan: TurnPlan) -> int:
    mode = plan.budget.step_mode(plan.usage, plan.react_only)
    offered = tools.exposed(
        mode,
        memory=plan.memory_tools,
        ban_spammer=plan.ban_spammer,
        reminders=plan.reminders,
        shell=plan.shell_tools_exposed,
    )
    return request_tokens(plan.system, offered, (*plan.history, plan.late_binding))


#: How far a primary request that does not fit has gone: as it is, compacted, trimmed, clipped.
_WHOLE, _COMPACTED, _TRIMMED, _CLIPPED = range(4)
#: Clipped requests one wake-up tries, each in half the share of the window the one before had (a
#: refusal that states no window teaches it only roughly).
CLIP_ATTEMPTS = 3
#: The share of the history's room a clipped input takes at first (markers and memories need the rest).
CLIP_SHARE = 0.95


def _answering_from_ms(w: WakeInput, state: _Loaded) -> int | None:
    """Where the part of the history that a trimmed request always keeps starts: the open chain, and
    the input the wake-up answers (``None``: neither)."""
    times = [state.chain[0].requested_at_ms] if state.chain else []
    view = state.view
    first = first_unprocessed(view.segments, view.processed_until_ms, w.settings.blocked_users)
    if first is not None:
        times.append(view.segments[first].received_at_ms)
    return min(times) if times else None


def _escalate(stage: int) -> Generator[WakeCommand, WakeFeedback, int]:
    """The next stage for a request that did not fit: compact first (trim when compaction cannot)."""
    if stage == _WHOLE:
        return _COMPACTED if (yield Compact()) else _TRIMMED
    return stage + 1


def _fitted_plan(
    w: WakeInput,
    state: _Loaded,
    activation: Activation | None,
    shell: bool,
    stage: int,
    share: float = CLIP_SHARE,
    guidance: tuple[str, ...] = (),
) -> Generator[WakeCommand, WakeFeedback, TurnPlan]:
    """The primary's plan at ``stage``: the history whole, trimmed (sticky, keeping the input and the
    open chain), or with the unhandled input clipped to what the window leaves (``core.fit``)."""
    view = state.view
    selected: prompt.Selected | None = None
    if stage >= _TRIMMED or view.trim_from_ms is not None:
        selected = prompt.select_history(
            view.segments,
            state.turns,
            budget_tokens=view.limits.target,
            sticky_from_ms=view.trim_from_ms,
            keep_from_ms=_answering_from_ms(w, state),
        )
        if selected.omitted:
            yield Note("trimmed", str(selected.omitted))
        yield Remember(trim_from_ms=selected.from_ms)
    plan = yield from _plan_with_memories(w, state, activation, shell, selected, guidance)
    if stage < _CLIPPED or selected is None:
        return plan
    start = first_unprocessed(selected.segments, view.processed_until_ms, w.settings.blocked_users)
    if start is None:
        return plan
    limit = view.limits.request_limit
    shown = sum(segment_tokens(s) for s in selected.segments if not s.is_self_sent)
    # The history's share of the window: what the request holds besides its segments stays as it is.
    budget = view.limits.target if limit is None else max(1, limit - (first_request_tokens(plan) - shown))
    clipped = fit.clip_input(selected, start=start, budget_tokens=max(1, int(budget * share)))
    yield Note(
        "clipped", f"{clipped.omitted} messages before the input, {sum(n for _i, n in clipped.gaps)} in it"
    )
    return (yield from _plan_with_memories(w, state, activation, shell, clipped, guidance))


def _plan_with_memories(
    w: WakeInput,
    state: _Loaded,
    activation: Activation | None,
    shell: bool,
    selected: prompt.Selected | None,
    guidance: tuple[str, ...] = (),
) -> Generator[WakeCommand, WakeFeedback, TurnPlan]:
    memories: tuple[Memory, ...] = ()
    if w.memory is not None and w.memory.max_count:
        persons = people_in(selected.segments if selected is not None else state.view.segments)
        if persons:
            loaded = yield LoadMemories(persons, w.memory.max_count)
            assert isinstance(loaded, Recalled)
            memories = loaded.memories
    return _plan(
        w,
        state.view,
        state.turns,
        state.chain,
        activation,
        selected=selected,
        memories=memories,
        shell=shell,
        guidance=guidance,
    )


def _primary_within_window(
    w: WakeInput, state: _Loaded, activation: Activation | None, shell: bool, guidance: tuple[str, ...]
) -> Generator[WakeCommand, WakeFeedback, TurnResult | WakeFailure]:
    """The primary turn within the model's window. A request that does not fit — by its estimate, before
    it is sent, or by the provider's refusal — goes one stage further (compact, trim, clip) and is asked
    again; only one that fits at none of them fails. ``shell``: the wake-up's gate decision (a chain
    this wake-up stored steps of carries it on)."""
    stage = _WHOLE
    clips = 0
    typing_shown = False
    while True:
        share = CLIP_SHARE / 2**clips
        plan = yield from _fitted_plan(w, state, activation, shell, stage, share, guidance)
        limit = state.view.limits.request_limit
        if limit is not None and first_request_tokens(plan) > limit:
            if stage == _CLIPPED:
                clips += 1
                if clips == CLIP_ATTEMPTS:
                    reason = "the request does not fit the model's window even clipped"
                    return FinalFailure(reason, activation)
                continue
            stage = yield from _escalate(stage)
            if stage == _COMPACTED:
                state = yield from _load(w)
            continue
        if not plan.react_only and not typing_shown:
            typing_shown = True
            yield ShowTyping(plan.started_ms)
        try:
            result = yield from primary_turn(plan)
            yield Note("turn", result.outcome)
        except Exception:
            newest = yield LoadLatest()
            if not isinstance(newest, TurnRecord) or not newest.pending:
                raise
            # A step was written ahead and its outcome not stored: retry soon, which redoes it.
            return TransientFailure(f"failed mid-step {newest.step}", activation=None)
        error = result.error
        if result.outcome != "failed" or error is None or error.category != "context_length":
            return result
        yield Note("context_length")
        if stage == _CLIPPED:
            clips += 1
            if clips == CLIP_ATTEMPTS:
                return result
        else:
            stage = yield from _escalate(stage)
        # Steps stored before the overflow left their chain open: the retry continues it. The limits
        # are read again too: the refusal may have taught the model's real window.
        state = yield from _load(w)


__all__ = [
    "AskRates",
    "ChatView",
    "Compact",
    "FinalFailure",
    "Flow",
    "LoadChain",
    "LoadLatest",
    "LoadMemories",
    "LoadTurns",
    "MarkProcessed",
    "Note",
    "NoteKind",
    "Path",
    "ProbeCall",
    "Rated",
    "ReadChat",
    "Recalled",
    "Remember",
    "ShowTyping",
    "Sticky",
    "StoreProbe",
    "TransientFailure",
    "WakeCommand",
    "WakeDone",
    "WakeFailure",
    "WakeFeedback",
    "WakeInput",
    "WakeOutcome",
    "WakeSettings",
    "first_request_tokens",
    "remember",
    "wake_up",
]
