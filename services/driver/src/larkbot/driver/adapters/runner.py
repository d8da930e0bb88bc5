"""Runs one wake-up of a chat: probe (unless continuing a chain or reusing an activation), then the
primary turn, driving the sans-I/O generator with real model calls, tool executions and persistence.

Failures leave through :class:`WakeFailed` only, classified once here: ``transient`` (gateway
``transient`` errors, an unanswered bus request before the turn deadline) or permanent (everything else,
including a model call cut by the turn deadline). The chat loop turns them into retries or the latch.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Literal

from larkbot.canonical.llm import (
    LLMError,
    LLMRequest,
    LLMResponse,
)
from larkbot.runtime.config import LlmSettings

from .. import metrics
from ..core import prompt
from ..core.budget import TurnBudget
from ..core.participation import bot_loop_brake, participation
from ..core.probe import DECIDE_CHOICE, DECIDE_SPEC, read_verdict
from ..core.records import Activation, ChainUsage, ProbeRecord, TurnRecord, open_chain
from ..core.scheduler import Wake
from ..core.turn import (
    Ack,
    CheckInterrupt,
    Feedback,
    ModelAnswer,
    ModelCall,
    Persist,
    TurnPlan,
    TurnResult,
    primary_turn,
)
from ..core.window import select_window
from .accounting import count_record, count_usage
from .chatstate import ChatState, WakeFailed
from .clients import BusClients
from .clock import Clock
from .executor import ToolExecutor
from .repository import DriverRepository, StepConflict
from .typing_indicator import TypingIndicators

log = logging.getLogger(__name__)

#: Turn responses whose reasoning is replayed (the open chain's always is) when the primary endpoint is
#: not configured here; otherwise its ``reasoning_replay_turns`` (the gateway applies the same rule).
REASONING_REPLAY_TURNS = 3
#: A pending step older than this is closed unredone ("delivery unknown") instead of being redone.
RECOVER_MAX_AGE_MS = 10 * 60 * 1000
#: Failed attempts at redoing a pending step (each a transient wake-up failure) before it is closed unredone.
RECOVER_ATTEMPTS = 3


class WakeRunner:
    def __init__(
        self, clients: BusClients, repo: DriverRepository, clock: Clock, llm: LlmSettings, utc_offset_min: int
    ) -> None:
        self.clients = clients
        self.repo = repo
        self.clock = clock
        self.probe_endpoint = llm.probe or "probe"
        self.primary_endpoint = llm.primary or "primary"
        endpoint = llm.endpoints.get(self.primary_endpoint)
        self.reasoning_replay = endpoint.reasoning_replay_turns if endpoint else REASONING_REPLAY_TURNS
        self.utc_offset_min = utc_offset_min
        self.typing = TypingIndicators(clients)

    async def run(self, chat: ChatState, wake: Wake, wake_id: str, input_until_ms: int) -> None:
        """One wake-up; the caller binds the chat and ``wake_id`` to the log context."""
        try:
            await self._run(chat, wake, wake_id, input_until_ms)
        except StepConflict as exc:
            # Another replica drives the chat (a lease that lapsed during a slow step); it owns the
            # step and the input now. Nothing is marked processed here.
            log.error("stopping the wake-up: %s", exc)

    async def _run(self, chat: ChatState, wake: Wake, wake_id: str, input_until_ms: int) -> None:
        segments = chat.context.segments
        since = segments[0].received_at_ms if chat.context.cursor > 0 and segments else 0
        turns = await self.repo.turns(chat.platform, chat.chat_id, since_ms=since)
        # The newest turn response is the last of ``turns`` unless all of them are older than the window.
        latest = (
            turns[-1]
            if turns
            else await self.repo.latest_turn(chat.platform, chat.chat_id)
            if since
            else None
        )
        if latest is not None and latest.pending:
            if not await self._recover(chat, wake, wake_id, latest, input_until_ms):
                return
            if chat.stopping:
                return  # handed over: the next holder goes on from the stored turn responses
            turns = await self.repo.turns(chat.platform, chat.chat_id, since_ms=since)
        chain = open_chain(turns)
        if chain:
            chain = await self.repo.chain(chat.platform, chat.chat_id, chain[-1].chain_id)
        activation: Activation | None
        recorded: asyncio.Task[None] | None = None
        if chain:
            path, activation = "continuation", None
        elif wake.activation is not None:
            path, activation = "activation", wake.activation
        elif not chat.settings.probe_enabled:
            path, activation = "activation", Activation("send_message", "probe disabled for this chat")
        elif bot_loop_brake(
            segments, chat.marks.processed_until_ms, self.clock.now_ms(), chat.settings.bot_exchange_cap
        ):
            metrics.WAKEUPS.labels(wake.kind, "braked").inc()
            log.info("bot-to-bot exchange reached its cap; not waking")
            await chat.processed(self.repo, input_until_ms)
            return
        else:
            path = "probe"
            activation, record = await self._probe(chat, wake_id)
            if activation is None:
                await self.repo.add_probe(record)
                metrics.WAKEUPS.labels(wake.kind, path).inc()
                await chat.processed(self.repo, input_until_ms)
                return
            # Stored beside the primary's first model call rather than before it (off the turn's path).
            recorded = asyncio.create_task(self.repo.add_probe(record), name=f"probe-record-{chat.key}")
        metrics.WAKEUPS.labels(wake.kind, path).inc()
        try:
            result = await self._primary(chat, wake_id, turns, chain, activation, input_until_ms)
        except StepConflict:
            raise
        except Exception as exc:
            newest = await self.repo.latest_turn(chat.platform, chat.chat_id)
            if newest is None or not newest.pending:
                raise
            # A step was written ahead and its outcome not stored: retry soon, which redoes it.
            log.warning("wake-up failed with step %d pending; retrying", newest.step, exc_info=True)
            raise WakeFailed(
                f"failed mid-step: {type(exc).__name__}", transient=True, activation=None
            ) from exc
        finally:
            if recorded is not None:
                await recorded
        _raise_failed(result, activation)
        await chat.processed(self.repo, input_until_ms)

    async def _recover(
        self, chat: ChatState, wake: Wake, wake_id: str, pending: TurnRecord, input_until_ms: int
    ) -> bool:
        """Redo the tool calls of a step left pending (``core.turn``), or close it unredone when it is too
        old or redoing it failed ``RECOVER_ATTEMPTS`` times. Returns whether the wake-up goes on: when the
        step's chain stays open (continued from the stored turn responses) or external input arrived after
        the step's model call (the model never saw it). Input it saw is done."""
        abandon = (
            self.clock.now_ms() - pending.requested_at_ms > RECOVER_MAX_AGE_MS
            or chat.recovery_failures >= RECOVER_ATTEMPTS
        )
        log.warning(
            "step %d of chain %s was left pending; %s",
            pending.step,
            pending.chain_id,
            "closing it unredone" if abandon else "redoing its calls",
        )
        chain = await self.repo.chain(chat.platform, chat.chat_id, pending.chain_id)
        done = tuple(t for t in chain if not t.pending)
        try:
            result = await self._primary(
                chat, wake_id, (), done, None, input_until_ms, recover=pending, abandon=abandon
            )
        except StepConflict:
            raise
        except Exception as exc:
            chat.recovery_failures += 1
            log.warning("redoing the pending step failed", exc_info=True)
            raise WakeFailed(
                f"redoing a step failed: {type(exc).__name__}", transient=True, activation=None
            ) from exc
        chat.recovery_failures = 0
        metrics.RECOVERED_STEPS.labels("abandoned" if abandon else "redone").inc()
        if result.chain_open or chat.latest_external_ms() > pending.requested_at_ms:
            return True
        metrics.WAKEUPS.labels(wake.kind, "recovery").inc()
        await chat.processed(self.repo, input_until_ms)
        return False

    async def _probe(self, chat: ChatState, wake_id: str) -> tuple[Activation | None, ProbeRecord]:
        """The probe's verdict and its record (the caller stores it)."""
        now = self.clock.now_ms()
        settings = chat.settings
        segments = chat.context.segments
        window = select_window(
            segments, chat.last_action_ms(), settings.probe_context_est_tokens, chat.probe_start
        )
        chat.probe_start = window.start_id
        if window.omitted:
            log.warning("probe window omitted %d messages of unprocessed input", window.omitted)
        persona = chat.persona
        offset = chat.utc_offset_min(self.utc_offset_min)
        request = LLMRequest(
            request_id=f"{wake_id}-probe",
            purpose="probe",
            endpoint=self.probe_endpoint,
            system=prompt.probe_system_prompt(persona.name, chat.platform, persona.texts),
            messages=prompt.probe_messages(
                window,
                None,
                now_ms=now,
                utc_offset_min=offset,
                stats=participation(segments, now),
                summary_max_est_tokens=settings.probe_summary_max_est_tokens,
            ),
            tools=(DECIDE_SPEC,),
            tool_choice=DECIDE_CHOICE,
            deadline_ms=now + round(settings.probe_timeout_s * 1000),
            prompt_cache_key=f"{chat.key}:probe",
            chat_key=chat.key,
        )
        reply = await self.clients.generate(request, settings.probe_timeout_s)
        if isinstance(reply, LLMError):
            metrics.PROBE_DECISIONS.labels("error").inc()
            raise WakeFailed(
                f"probe failed: {reply.category}",
                transient=reply.category in ("transient", "deadline"),
                activation=None,
            )
        count_usage("probe", reply)
        verdict = read_verdict(reply)
        record = ProbeRecord(
            platform=chat.platform,
            chat_id=chat.chat_id,
            wake_id=wake_id,
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
        metrics.PROBE_DECISIONS.labels("failed_closed" if verdict.failed_closed else verdict.decision).inc()
        if not verdict.activated:
            log.info("probe suppressed the wake-up: %s", verdict.reason)
            return None, record
        return Activation(verdict.decision, verdict.reason), record

    async def _primary(
        self,
        chat: ChatState,
        wake_id: str,
        turns: tuple[TurnRecord, ...],
        chain: tuple[TurnRecord, ...],
        activation: Activation | None,
        input_until_ms: int,
        *,
        recover: TurnRecord | None = None,
        abandon: bool = False,
    ) -> TurnResult:
        started = self.clock.now_ms()
        perf = time.perf_counter()
        segments = chat.context.segments
        persona = chat.persona
        model = turns[-1].model_identity if turns else ""
        plan = TurnPlan(
            platform=chat.platform,
            chat_id=chat.chat_id,
            wake_id=wake_id,
            chain_id=recover.chain_id if recover else chain[-1].chain_id if chain else uuid.uuid4().hex[:16],
            first_step=recover.step if recover else chain[-1].step + 1 if chain else 0,
            usage=ChainUsage.of(chain),
            budget=TurnBudget.of(chat.settings),
            react_only=activation is not None and activation.decision == "react_only",
            started_ms=started,
            system=prompt.system_prompt(persona.name, chat.platform, persona.texts),
            history=prompt.history(
                segments,
                turns,
                model_identity=model,
                reasoning_replay=self.reasoning_replay,
                open_chain_id=recover.chain_id if recover else chain[-1].chain_id if chain else None,
            ),
            late_binding=prompt.late_binding(
                now_ms=started,
                utc_offset_min=chat.utc_offset_min(self.utc_offset_min),
                stats=participation(segments, started),
                probe_reason=activation.reason if activation else None,
                interrupted=bool(chain) or recover is not None,
                react_only=activation is not None and activation.decision == "react_only",
            ),
            shell_tools_exposed=(recover or chain[-1]).shell_tools_exposed if recover or chain else False,
            recover=recover,
            recover_abandon=abandon,
        )
        if not plan.react_only and recover is None:
            self.typing.show(chat.platform, chat.chat_id, wake_id, started)
        executor = ToolExecutor(
            self.clients,
            self.clock,
            chat.platform,
            chat.chat_id,
            segments,
            action_attempts=chat.settings.action_attempts,
            max_segment_tokens=chat.settings.max_segment_est_tokens,
        )
        gen = primary_turn(plan)
        command = next(gen)
        try:
            while True:
                feedback: Feedback
                if isinstance(command, ModelCall):
                    feedback = await self._call_model(chat, wake_id, command)
                elif isinstance(command, Persist):
                    await self.repo.add_turn(command.record)
                    if not command.record.pending:
                        count_record(command.record)
                    if command.record.sent or command.record.reacted:
                        chat.acted(command.record.requested_at_ms)
                    feedback = Ack(self.clock.now_ms())
                elif isinstance(command, CheckInterrupt):
                    # New input, or the chat is being handed over / the service stops: the chain stays
                    # open and whoever drives the chat next continues it.
                    interrupted = chat.stopping or chat.latest_external_ms() > input_until_ms
                    feedback = Ack(self.clock.now_ms(), interrupted)
                else:
                    feedback = await executor.run(command)
                command = gen.send(feedback)
        except StopIteration as stop:
            result: TurnResult = stop.value
        metrics.TURNS.labels(result.outcome).inc()
        metrics.TURN_SECONDS.observe(time.perf_counter() - perf)
        return result

    async def close(self) -> None:
        await self.typing.close()

    async def _call_model(self, chat: ChatState, wake_id: str, call: ModelCall) -> ModelAnswer:
        request = LLMRequest(
            request_id=f"{wake_id}-{call.step}-{uuid.uuid4().hex[:8]}",
            purpose="primary",
            endpoint=self.primary_endpoint,
            system=call.system,
            messages=call.messages,
            tools=call.tools,
            tool_choice=call.tool_choice,
            deadline_ms=call.deadline_ms,
            prompt_cache_key=chat.key,
            chat_key=chat.key,
        )
        reply = await self.clients.generate(request, (call.deadline_ms - self.clock.now_ms()) / 1000)
        now = self.clock.now_ms()
        if isinstance(reply, LLMError) and reply.category == "transient" and now >= call.deadline_ms:
            # The wait was cut to the turn deadline: that is the deadline, not a provider hiccup.
            reply = replace_category(reply, "deadline")
        if isinstance(reply, LLMResponse):
            count_usage("primary", reply)
        return ModelAnswer(reply, now)


def _raise_failed(result: TurnResult, activation: Activation | None) -> None:
    if result.outcome != "failed":
        return
    error = result.error
    raise WakeFailed(
        f"primary failed: {error.category if error else 'unknown'}",
        transient=error is not None and error.category == "transient",
        activation=activation,
    )


def replace_category(error: LLMError, category: Literal["deadline"]) -> LLMError:
    return error.model_copy(update={"category": category, "message": "turn deadline reached"})
