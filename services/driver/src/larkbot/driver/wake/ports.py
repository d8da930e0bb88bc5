"""The interpreter's ports for one wake-up of one chat (:class:`ChatPorts`): what each command of the
``core.wake`` flow does against the LLM gateway, the tool executor, the repository, the compactor and
the chat's state. The audit record, a dry run's withheld actions and the wake-up's metrics are the
interpreter's middleware's (``wake.middleware``); the ports hand back what only they see — the model
request they built with its estimate and latency (``ModelAnswer.asked``, recorded by the audit trail) —
and keep the model's usage, the windows learnt and the log lines of the flow's notes.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Literal, assert_never

from larkbot.canonical.aliases import aliases_enabled
from larkbot.canonical.llm import (
    LLMError,
    LLMRequest,
    LLMResponse,
)
from larkbot.driver.audit.core.audit import AuditDraft
from larkbot.driver.compaction.core.compaction import turn_tokens
from larkbot.driver.files.core.files import FileLimits
from larkbot.driver.memory.ahead import RecallAhead
from larkbot.driver.memory.core.recall import people_in
from larkbot.driver.memory.memory_tools import MemoryAccess
from larkbot.driver.moderation.moderation import ModerationAccess
from larkbot.driver.reminders.reminders import ReminderAccess
from larkbot.driver.shell.shell import ShellAccess
from larkbot.runtime.db import DatabaseUnavailable

from .. import metrics
from ..errors import StepConflict
from .accounting import count_usage
from .chatstate import ChatState
from .core.estimate import request_tokens
from .core.limits import Limits
from .core.probe import DECIDE_CHOICE, DECIDE_SPEC
from .core.prompt import ActiveTask
from .core.protocol import Ack, Asked, CheckInterrupt, ModelAnswer, ModelCall, ToolDone, ToolRun
from .core.records import Activation, TurnRecord
from .core.wake import (
    AskRates,
    ChatView,
    Note,
    ProbeCall,
    Rated,
    Recalled,
    Remember,
    StoreProbe,
    WakeInput,
    remember,
)
from .executor import ToolExecutor

if TYPE_CHECKING:
    from .runner import WakeRunner

log = logging.getLogger(__name__)


class ChatPorts:
    """The interpreter's ports for one wake-up of one chat."""

    def __init__(self, runner: WakeRunner, chat: ChatState, inputs: WakeInput):
        self.runner = runner
        self.chat = chat
        self.wake = inputs.wake
        self.wake_id = inputs.wake_id
        self.input_until_ms = inputs.input_until_ms
        #: The probe's decision the wake-up runs on (the one it was retried with, or its own probe's): a
        #: retry after a database failure reuses it instead of asking the probe again.
        self.activation: Activation | None = inputs.wake.activation
        self._background: list[asyncio.Task[None]] = []
        memories = runner.memories
        self._recall = (
            RecallAhead(memories) if memories is not None and runner.memory_on(chat.settings) else None
        )
        self._executor: ToolExecutor | None = None
        self.dry_run = runner.dry(chat.settings)
        self.audit = AuditDraft(
            platform=chat.platform,
            chat_id=chat.chat_id,
            wake_id=inputs.wake_id,
            wake_kind=inputs.wake.kind,
            started_at_ms=runner.clock.now_ms(),
            dry_run=self.dry_run,
        )

    # -- reads ----------------------------------------------------------------------------------------
    async def read_chat(self) -> ChatView:
        chat = self.chat
        shell = self.runner.shell
        running = (
            await shell.store.running_of_chat(chat.platform, chat.chat_id)
            if chat.settings.shell_enabled
            else ()
        )
        now_ms = self.runner.clock.now_ms()
        reminders = (
            await self.runner.reminders.pending(chat.platform, chat.chat_id)
            if chat.settings.reminders.enabled
            else ()
        )
        return ChatView(
            segments=chat.shown_segments(),
            summary=chat.summary,
            last_action_ms=chat.last_action_ms(),
            processed_until_ms=chat.marks.processed_until_ms,
            latest_external_ms=chat.latest_external_ms(),
            probe_start=chat.probe_start,
            trim_from_ms=chat.trim_from_ms,
            recovery_failures=chat.recovery_failures,
            stopping=chat.stopping,
            now_ms=now_ms,
            limits=self.limits(),
            active_tasks=tuple(ActiveTask(t.task_id, t.intention, t.started_at_ms) for t in running),
            speaking_budget=await self.runner.clients.speaking_budget(chat.platform, chat.chat_id, now_ms),
            reminders=reminders,
        )

    def limits(self) -> Limits:
        """The chat's limits as the models' windows are known now (a refusal may have taught one)."""
        chat = self.chat
        return self.runner.sizing.limits(
            chat.settings, chat.persona.name, chat.platform, chat.chat_id, chat.persona.texts
        )

    async def load_turns(self, since_ms: int) -> tuple[TurnRecord, ...]:
        chat = self.chat
        turns = chat.history.since(since_ms)
        if turns is None:
            turns = await self.runner.repo.turns(chat.platform, chat.chat_id, since_ms=since_ms)
            chat.history.loaded(since_ms, turns)
        chat.turn_tokens = sum(turn_tokens(t) for t in turns if not t.pending)
        return turns

    async def load_chain(self, chain_id: str) -> tuple[TurnRecord, ...]:
        return await self.runner.repo.chain(self.chat.platform, self.chat.chat_id, chain_id)

    async def load_latest(self) -> TurnRecord | None:
        return await self.runner.repo.latest_turn(self.chat.platform, self.chat.chat_id)

    # -- model calls ----------------------------------------------------------------------------------
    async def probe(self, call: ProbeCall) -> ModelAnswer:
        chat = self.chat
        runner = self.runner
        if self._recall is not None:
            # Read while the probe is away (``memory.ahead``).
            persons = people_in(chat.shown_segments())
            self._recall.start(persons, runner.visibility(chat), chat.settings.memory_late_binding_max)
        request = LLMRequest(
            request_id=f"{self.wake_id}-probe",
            purpose="probe",
            endpoint=runner.sizing.endpoint("probe", chat.platform, chat.chat_id),
            system=call.system,
            messages=call.messages,
            tools=(DECIDE_SPEC,),
            tool_choice=DECIDE_CHOICE,
            deadline_ms=call.deadline_ms,
            prompt_cache_key=f"{chat.key}:probe",
            chat_key=chat.key,
        )
        estimate = request_tokens(request.system, request.tools, request.messages)
        limit = runner.sizing.window(request.endpoint)
        refused = limit is not None and estimate > limit
        asked = Asked(request, runner.clock.now_ms(), estimate, called=not refused)
        if refused:
            return ModelAnswer(_too_long(request, estimate, limit), runner.clock.now_ms(), asked)
        started = time.perf_counter()
        reply = await runner.clients.generate(request, chat.settings.probe_timeout_s)
        asked = replace(asked, latency_ms=round((time.perf_counter() - started) * 1000))
        if isinstance(reply, LLMResponse):
            count_usage("probe", reply)
            runner.sizing.observe(reply.endpoint or request.endpoint, estimate, reply)
        elif reply.category == "context_length":
            metrics.CONTEXT_LENGTH.labels("provider").inc()
            runner.sizing.refused(reply.endpoint or request.endpoint, estimate, reply)
        return ModelAnswer(reply, runner.clock.now_ms(), asked)

    def _primary(self, call: ModelCall) -> tuple[LLMRequest, int, int | None]:
        """The primary request of ``call``, its token estimate and the window known for its endpoint."""
        chat, sizing = self.chat, self.runner.sizing
        request = LLMRequest(
            request_id=f"{self.wake_id}-{call.step}-{uuid.uuid4().hex[:8]}",
            purpose="primary",
            endpoint=sizing.endpoint("primary", chat.platform, chat.chat_id),
            system=call.system,
            messages=call.messages,
            tools=call.tools,
            tool_choice=call.tool_choice,
            deadline_ms=call.deadline_ms,
            prompt_cache_key=chat.key,
            chat_key=chat.key,
        )
        return (
            request,
            request_tokens(request.system, request.tools, request.messages),
            sizing.window(request.endpoint),
        )

    def withheld_model(self, call: ModelCall, answer: LLMResponse) -> ModelAnswer:
        """A dry run's primary call, not sent: ``answer`` instead (``middleware.DryRun``), or the refusal of a
        request over the window, as a sent one would get. The request is handed back all the same: a dry
        run exists to look at the prompts it assembles."""
        request, estimate, limit = self._primary(call)
        now = self.runner.clock.now_ms()
        if limit is not None and estimate > limit:
            return ModelAnswer(
                _too_long(request, estimate, limit), now, Asked(request, now, estimate, called=False)
            )
        answer = answer.model_copy(update={"request_id": request.request_id})
        return ModelAnswer(answer, now, Asked(request, now, estimate, called=False, answered_itself=True))

    async def model(self, call: ModelCall) -> ModelAnswer:
        runner = self.runner
        clock = runner.clock
        request, estimate, limit = self._primary(call)
        # Also a request never sent: a refused one shows what did not fit.
        asked = Asked(request, clock.now_ms(), estimate, called=not (limit is not None and estimate > limit))
        if not asked.called:
            return ModelAnswer(_too_long(request, estimate, limit), clock.now_ms(), asked)
        started = time.perf_counter()
        reply = await runner.clients.generate(request, (call.deadline_ms - clock.now_ms()) / 1000)
        asked = replace(asked, latency_ms=round((time.perf_counter() - started) * 1000))
        now = clock.now_ms()
        if isinstance(reply, LLMError):
            if reply.category == "transient" and now >= call.deadline_ms:
                # The wait was cut to the turn deadline: that is the deadline, not a provider hiccup.
                reply = replace_category(reply, "deadline")
            elif reply.category == "context_length":
                metrics.CONTEXT_LENGTH.labels("provider").inc()
                runner.sizing.refused(reply.endpoint or request.endpoint, estimate, reply)
        else:
            count_usage("primary", reply)
            runner.sizing.observe(reply.endpoint or request.endpoint, estimate, reply)
        return ModelAnswer(reply, now, asked)

    # -- tools, persistence, interruption ---------------------------------------------------------------
    async def tool(self, run: ToolRun) -> ToolDone:
        if self._executor is None:
            chat = self.chat
            self._executor = ToolExecutor(
                self.runner.clients,
                self.runner.clock,
                chat.platform,
                chat.chat_id,
                chat.context.segments,
                action_attempts=chat.settings.action_attempts,
                max_segment_tokens=chat.settings.max_segment_est_tokens,
                memory=self._memory_access(),
                aliased=aliases_enabled(chat.platform, chat.settings.alias_message_ids),
                shell=self._shell_access(),
                moderation=ModerationAccess(self.runner.maintainers)
                if chat.settings.ban_spammer_enabled
                else None,
                reminders=self._reminder_access(),
                files=FileLimits(chat.settings.files.max_extract_chars, chat.settings.files.max_bytes),
            )
        return await self._executor.run(run)

    def _memory_access(self) -> MemoryAccess | None:
        runner, settings = self.runner, self.chat.settings
        if runner.memories is None or not runner.memory_on(settings):
            return None
        return MemoryAccess(
            runner.memories,
            runner.visibility(self.chat),
            search_max_results=settings.memory_search_max_results,
            search_max_chars=settings.memory_search_max_chars,
        )

    def _reminder_access(self) -> ReminderAccess | None:
        runner, chat = self.runner, self.chat
        if not chat.settings.reminders.enabled:
            return None
        offset = chat.utc_offset_min(runner.utc_offset_min)
        return ReminderAccess(runner.reminders, chat.settings.reminders, runner.clock, offset)

    def _shell_access(self) -> ShellAccess | None:
        tasks, settings = self.runner.shell, self.chat.settings
        if tasks is None:
            return None
        return ShellAccess(tasks, settings.shell_enabled, reserve_ms=round(settings.min_model_call_s * 1000))

    async def persist(self, record: TurnRecord) -> Ack:
        try:
            stored = await self.runner.repo.add_turn(record)
        except BaseException:
            self.chat.history.forget()
            raise
        self.chat.history.stored(stored)
        if not record.pending and self.chat.turn_tokens is not None:
            self.chat.turn_tokens += turn_tokens(record)
        if record.sent or record.reacted:
            self.chat.acted(record.requested_at_ms)
        return Ack(self.runner.clock.now_ms())

    async def check_interrupt(self, check: CheckInterrupt) -> Ack:
        # New input, or the chat is being handed over / the service stops: the chain stays open and
        # whoever drives the chat next continues it.
        chat = self.chat
        interrupted = chat.stopping or chat.latest_external_ms() > self.input_until_ms
        return Ack(self.runner.clock.now_ms(), interrupted)

    # -- the rest -------------------------------------------------------------------------------------
    async def store_probe(self, command: StoreProbe) -> None:
        record = command.record
        if record.activated:
            self.activation = Activation(record.decision, record.reason)
        if command.beside_primary:
            # Stored beside the primary's first model call rather than before it (off the turn's path).
            task = asyncio.create_task(self.runner.repo.add_probe(command.record), name="probe-record")
            self._background.append(task)
        else:
            await self.runner.repo.add_probe(command.record)

    async def compact(self) -> bool:
        return await self.runner.compactor.now(self.chat)

    async def load_memories(self, persons: tuple[str, ...], limit: int) -> Recalled:
        assert self._recall is not None
        return Recalled(tuple(await self._recall.load(persons, self.runner.visibility(self.chat), limit)))

    async def ask_rates(self, command: AskRates) -> Rated:
        return Rated(await self.runner.rates.ask_all(command.asks, command.now_ms))

    def remember(self, command: Remember) -> None:
        remember(self.chat, command)

    def show_typing(self, started_ms: int) -> None:
        self.runner.typing.show(self.chat.platform, self.chat.chat_id, self.wake_id, started_ms)

    async def mark_processed(self, until_ms: int) -> None:
        await self.chat.processed(self.runner.repo, until_ms)

    def note(self, note: Note) -> None:
        # What the audit trail and metrics take from a note is theirs (``wake.middleware``); the ports log.
        kind, detail = note.kind, note.detail
        match kind:
            case "suppressed":
                log.info("probe suppressed the wake-up: %s", detail)
            case "probe_omitted":
                log.warning("probe window omitted %s messages of unprocessed input", detail)
            case "braked":
                log.info("bot-to-bot exchange reached its cap; not waking")
            case "held":
                log.info("held by the chat's manners (%s); not waking", detail)
            case "rate_limited":
                log.info("rate limit refused a wake-up (%s)", detail)
            case "recovering":
                log.warning("a step was left pending: %s", detail)
            case "recover_failed":
                log.warning("redoing the pending step failed: %s", detail)
            case "context_length":
                log.warning("the request did not fit the model's window; compacting or trimming")
            case "trimmed":
                log.warning("the history was trimmed: %s messages left out", detail)
            case "clipped":
                log.warning("the input to answer did not fit the model's window and was clipped: %s", detail)
            case "gate_opened":
                log.info("shell tools exposed: maintainer %s", detail)
            case "path" | "probe" | "recovered" | "gate" | "turn":
                pass
            case _:
                assert_never(kind)

    def fatal(self, exc: Exception) -> bool:
        # A second writer of the step; or the database unavailable, which ends the wake-up as it stands
        # (a step written ahead stays pending) to be retried whole (``runner``), never counted as a
        # failed step or recovery.
        return isinstance(exc, StepConflict | DatabaseUnavailable)

    async def finish(self) -> None:
        if self._recall is not None:
            await self._recall.drop()
        if self._background:
            done = await asyncio.gather(*self._background, return_exceptions=True)
            for result in done:
                if isinstance(result, DatabaseUnavailable):
                    # A record of what was decided; the decision itself is acted on already.
                    metrics.UNSTORED_RECORDS.labels("probe").inc()
                    log.warning("the probe's decision was not stored (%s)", result)
                elif isinstance(result, BaseException):
                    raise result


def _too_long(request: LLMRequest, estimate: int, limit: int | None) -> LLMError:
    """A request over the model's known window, answered as the provider would, never sent."""
    metrics.CONTEXT_LENGTH.labels("preflight").inc()
    return LLMError(
        request_id=request.request_id,
        category="context_length",
        message=f"estimated {estimate} tokens, over the window's {limit}",
    )


def replace_category(error: LLMError, category: Literal["deadline"]) -> LLMError:
    return error.model_copy(update={"category": category, "message": "turn deadline reached"})
