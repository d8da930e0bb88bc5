"""Runs one wake-up of a chat: the ``core.wake`` flow, driven by the interpreter against the real ports —
the LLM gateway, the tool executor, the repository, the compactor and the chat's state.

Failures leave through :class:`WakeFailed` only, classified in the flow: ``transient`` (gateway
``transient`` errors, an unanswered bus request before the turn deadline, a step left pending by a failure)
or permanent (everything else, including a model call cut by the turn deadline). The chat loop turns them
into retries or the latch. After every wake-up the chat is handed to the compactor.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Literal

from larkbot.canonical.aliases import aliases_enabled
from larkbot.canonical.llm import (
    AssistantMessage,
    LLMError,
    LLMRequest,
    LLMResponse,
    TextPart,
    ToolCallPart,
    Usage,
)
from larkbot.driver.audit.audit import AuditStore
from larkbot.driver.audit.core.audit import AuditDraft
from larkbot.driver.audit.requestlog import RequestStore
from larkbot.driver.compaction.compactor import Compactor
from larkbot.driver.compaction.core.compaction import turn_tokens
from larkbot.driver.memory.core.memory import Visibility
from larkbot.driver.memory.core.recall import RecallLimits
from larkbot.driver.memory.memories import MemoryStore
from larkbot.driver.memory.memory_tools import MemoryAccess
from larkbot.driver.moderation.moderation import ModerationAccess
from larkbot.driver.shell.core.gate import GateSettings
from larkbot.driver.shell.shell import ShellAccess, ShellTasks
from larkbot.driver.tools.core import tools
from larkbot.runtime.config import AuditSettings, ChatSettings, LlmSettings, MemorySettings

from .. import metrics
from .accounting import count_record, count_usage
from .chatstate import ChatState, WakeFailed
from .clients import BusClients
from .clock import Clock
from .core.budget import TurnBudget
from .core.estimate import request_tokens
from .core.limits import Limits
from .core.probe import DECIDE_CHOICE, DECIDE_SPEC
from .core.prompt import ActiveTask
from .core.protocol import Ack, CheckInterrupt, ModelAnswer, ModelCall, ToolDone, ToolRun
from .core.records import TurnRecord
from .core.scheduler import Wake
from .core.wake import (
    ChatView,
    Note,
    ProbeCall,
    Recalled,
    Remember,
    StoreProbe,
    WakeFailure,
    WakeInput,
    WakeSettings,
    remember,
    wake_up,
)
from .executor import ToolExecutor
from .interpreter import interpret
from .repository import DriverRepository, StepConflict
from .sizing import Sizing
from .typing_indicator import TypingIndicators

log = logging.getLogger(__name__)

#: Turn responses whose reasoning is replayed (the open chain's always is) when the primary endpoint is
#: not configured here; otherwise its ``reasoning_replay_turns`` (the gateway applies the same rule).
REASONING_REPLAY_TURNS = 3
#: The model identity of a primary answer a dry run made up instead of calling the model.
DRY_RUN_MODEL = "dry-run"


class WakeRunner:
    def __init__(
        self,
        clients: BusClients,
        repo: DriverRepository,
        clock: Clock,
        llm: LlmSettings,
        utc_offset_min: int,
        sizing: Sizing | None = None,
        memories: MemoryStore | None = None,
        memory: MemorySettings | None = None,
        maintainers: frozenset[str] = frozenset(),
        shell: ShellTasks | None = None,
        audit: AuditStore | None = None,
        audit_settings: AuditSettings | None = None,
        requests: RequestStore | None = None,
        dry_run: bool = False,
    ) -> None:
        self.clients = clients
        #: Where each wake-up's audit record goes; ``None``: nowhere (the scripted benchmark).
        self.audit = audit
        self.audit_settings = audit_settings or AuditSettings()
        #: Where each wake-up's model requests and sent message ids go (with the audit record, only when
        #: the audit trail is on); ``None``: nowhere.
        self.requests = requests
        #: The deployment's dry run (every chat's, beside each chat's own ``dry_run``).
        self.dry_run = dry_run
        #: The configuration's maintainers: the only source of maintainer status (``core.gate``).
        self.maintainers = maintainers
        #: The shell tools' tasks; ``None``: no shell anywhere (the scripted benchmark).
        self.shell = shell
        #: The memory store; ``None`` turns memory off for every chat (the scripted benchmark).
        self.memories = memories
        self.memory_settings = memory or MemorySettings()
        self.repo = repo
        self.clock = clock
        self.sizing = sizing or Sizing(llm)
        endpoint = llm.endpoints.get(self.sizing.primary_endpoint)
        self.reasoning_replay = endpoint.reasoning_replay_turns if endpoint else REASONING_REPLAY_TURNS
        self.utc_offset_min = utc_offset_min
        self.typing = TypingIndicators(clients)
        self.compactor = Compactor(clients, repo, clock, self.sizing, utc_offset_min)

    def inputs(self, chat: ChatState, wake: Wake, wake_id: str, input_until_ms: int) -> WakeInput:
        settings = chat.settings
        persona = chat.persona
        return WakeInput(
            platform=chat.platform,
            chat_id=chat.chat_id,
            wake_id=wake_id,
            wake=wake,
            input_until_ms=input_until_ms,
            persona_name=persona.name,
            persona_texts=persona.texts,
            utc_offset_min=chat.utc_offset_min(self.utc_offset_min),
            settings=WakeSettings(
                probe_enabled=settings.probe_enabled,
                bot_exchange_cap=settings.bot_exchange_cap,
                budget=TurnBudget.of(settings),
                probe_timeout_ms=round(settings.probe_timeout_s * 1000),
                reasoning_replay=self.reasoning_replay,
                gate=GateSettings(
                    settings.shell_enabled, self.maintainers, settings.maintainer_window_sec * 1000
                ),
                blocked_users=chat.blocked,
            ),
            new_chain_id=uuid.uuid4().hex[:16],
            memory=RecallLimits(settings.memory_late_binding_max, settings.memory_late_binding_max_chars)
            if self.memory_on(settings)
            else None,
            ban_spammer=settings.ban_spammer_enabled,
        )

    def memory_on(self, settings: ChatSettings) -> bool:
        return self.memories is not None and settings.memory_enabled

    def visibility(self, chat: ChatState) -> Visibility:
        return Visibility(
            platform=chat.platform,
            chat_id=chat.chat_id,
            direct_with=direct_with(chat.platform, chat.chat_id, chat.settings),
            global_allowed=self.memory_settings.global_scope,
        )

    async def run(self, chat: ChatState, wake: Wake, wake_id: str, input_until_ms: int) -> None:
        """One wake-up; the caller binds the chat and ``wake_id`` to the log context."""
        inputs = self.inputs(chat, wake, wake_id, input_until_ms)
        ports = ChatPorts(self, chat, inputs)
        try:
            outcome = await interpret(wake_up(inputs), ports)
        except StepConflict as exc:
            # Another replica drives the chat (a lease that lapsed during a slow step); it owns the
            # step and the input now. Nothing is marked processed here.
            log.error("stopping the wake-up: %s", exc)
            await self._record(ports.audit, f"failed: {exc}")
            return
        except Exception as exc:
            await self._record(ports.audit, f"failed: {type(exc).__name__}: {exc}")
            raise
        finally:
            await ports.finish()
            self.compactor.poke(chat)
        if isinstance(outcome, WakeFailure):
            await self._record(ports.audit, f"failed: {outcome.reason}")
            raise WakeFailed(outcome.reason, transient=outcome.transient, activation=outcome.activation)
        await self._record(ports.audit, ports.audit.outcome_of_done(outcome.path))

    def dry(self, settings: ChatSettings) -> bool:
        return self.dry_run or settings.dry_run

    async def _record(self, draft: AuditDraft, outcome: str) -> None:
        # Written after the wake-up, off its path: the record describes what happened, it decides
        # nothing. A failing write fails the wake-up like any other database error.
        settings = self.audit_settings
        if self.audit is None or not settings.enabled:
            return
        record = draft.record(outcome, self.clock.now_ms(), store_content=settings.store_content)
        await self.audit.add(record)
        # A transaction of its own, right after the record's: the request store remembers the blocks it
        # wrote only once they are committed, which a transaction shared with another store would blur.
        if self.requests is not None:
            await self.requests.add(draft.request_log(), store_content=settings.store_content)

    async def close(self) -> None:
        await self.typing.close()
        await self.compactor.close()


class ChatPorts:
    """The interpreter's ports for one wake-up of one chat."""

    def __init__(self, runner: WakeRunner, chat: ChatState, inputs: WakeInput):
        self.runner = runner
        self.chat = chat
        self.wake = inputs.wake
        self.wake_id = inputs.wake_id
        self.input_until_ms = inputs.input_until_ms
        self._background: list[asyncio.Task[None]] = []
        self._executor: ToolExecutor | None = None
        self._turn_started: float | None = None
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
            if shell is not None and chat.settings.shell_enabled
            else ()
        )
        segments = chat.shown_segments()
        self.audit.saw(segments)
        return ChatView(
            segments=segments,
            summary=chat.summary,
            last_action_ms=chat.last_action_ms(),
            processed_until_ms=chat.marks.processed_until_ms,
            latest_external_ms=chat.latest_external_ms(),
            probe_start=chat.probe_start,
            trim_from_ms=chat.trim_from_ms,
            recovery_failures=chat.recovery_failures,
            stopping=chat.stopping,
            now_ms=self.runner.clock.now_ms(),
            limits=self.limits(),
            active_tasks=tuple(ActiveTask(t.task_id, t.intention, t.started_at_ms) for t in running),
        )

    def limits(self) -> Limits:
        """The chat's limits as the models' windows are known now (a refusal may have taught one)."""
        chat = self.chat
        return self.runner.sizing.limits(chat.settings, chat.persona.name, chat.platform, chat.persona.texts)

    async def load_turns(self, since_ms: int) -> tuple[TurnRecord, ...]:
        turns = await self.runner.repo.turns(self.chat.platform, self.chat.chat_id, since_ms=since_ms)
        self.chat.turn_tokens = sum(turn_tokens(t) for t in turns if not t.pending)
        return turns

    async def load_chain(self, chain_id: str) -> tuple[TurnRecord, ...]:
        return await self.runner.repo.chain(self.chat.platform, self.chat.chat_id, chain_id)

    async def load_latest(self) -> TurnRecord | None:
        return await self.runner.repo.latest_turn(self.chat.platform, self.chat.chat_id)

    # -- model calls ----------------------------------------------------------------------------------
    async def probe(self, call: ProbeCall) -> ModelAnswer:
        chat = self.chat
        runner = self.runner
        request = LLMRequest(
            request_id=f"{self.wake_id}-probe",
            purpose="probe",
            endpoint=runner.sizing.probe_endpoint,
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
        self.audit.requested(
            request, step=None, at_ms=runner.clock.now_ms(), estimated_tokens=estimate, called=not refused
        )
        if refused:
            return ModelAnswer(_too_long(request, estimate, limit), runner.clock.now_ms())
        started = time.perf_counter()
        reply = await runner.clients.generate(request, chat.settings.probe_timeout_s)
        self.audit.probe_latency_ms = round((time.perf_counter() - started) * 1000)
        if isinstance(reply, LLMResponse):
            count_usage("probe", reply)
            runner.sizing.observe(request.endpoint, estimate, reply)
        elif reply.category == "context_length":
            metrics.CONTEXT_LENGTH.labels("provider").inc()
            runner.sizing.refused(request.endpoint, estimate, reply)
        return ModelAnswer(reply, runner.clock.now_ms())

    async def model(self, call: ModelCall) -> ModelAnswer:
        chat = self.chat
        runner = self.runner
        clock = runner.clock
        if self._turn_started is None:
            self._turn_started = time.perf_counter()
        request = LLMRequest(
            request_id=f"{self.wake_id}-{call.step}-{uuid.uuid4().hex[:8]}",
            purpose="primary",
            endpoint=runner.sizing.primary_endpoint,
            system=call.system,
            messages=call.messages,
            tools=call.tools,
            tool_choice=call.tool_choice,
            deadline_ms=call.deadline_ms,
            prompt_cache_key=chat.key,
            chat_key=chat.key,
        )
        limit = runner.sizing.window(request.endpoint)
        estimate = request_tokens(request.system, request.tools, request.messages)
        refused = limit is not None and estimate > limit
        answer_itself = self.dry_run and not chat.settings.dry_run_call_model
        # Also the requests never sent: a refused one shows what did not fit, and a dry run exists to
        # look at the prompts it assembles.
        self.audit.requested(
            request,
            step=call.step,
            at_ms=clock.now_ms(),
            estimated_tokens=estimate,
            called=not (refused or answer_itself),
        )
        if refused:
            return ModelAnswer(_too_long(request, estimate, limit), clock.now_ms())
        if answer_itself:
            self.audit.model_called = False
            return ModelAnswer(_dry_run_answer(request.request_id), clock.now_ms())
        started = time.perf_counter()
        reply = await runner.clients.generate(request, (call.deadline_ms - clock.now_ms()) / 1000)
        self.audit.primary_call(round((time.perf_counter() - started) * 1000))
        now = clock.now_ms()
        if isinstance(reply, LLMError):
            if reply.category == "transient" and now >= call.deadline_ms:
                # The wait was cut to the turn deadline: that is the deadline, not a provider hiccup.
                reply = replace_category(reply, "deadline")
            elif reply.category == "context_length":
                metrics.CONTEXT_LENGTH.labels("provider").inc()
                runner.sizing.refused(request.endpoint, estimate, reply)
        else:
            count_usage("primary", reply)
            runner.sizing.observe(request.endpoint, estimate, reply)
        return ModelAnswer(reply, now)

    # -- tools, persistence, interruption ---------------------------------------------------------------
    async def tool(self, run: ToolRun) -> ToolDone:
        done = await self._tool(run)
        remove = bool(run.args.get("remove", False))
        self.audit.tool(
            run.name, done.ok, send=run.name == tools.SEND, react=run.name == tools.REACT and not remove
        )
        if done.message_ids:
            self.audit.delivered(done.message_ids, done.now_ms)
        return done

    async def _tool(self, run: ToolRun) -> ToolDone:
        # What a dry run withholds from the platform, and what the model is told instead: each tool's
        # ``dry_run`` (its feature's ``core/tools.py``).
        withheld = tools.tool(run.name).dry_run if self.dry_run else None
        if withheld is not None:
            self.audit.withheld.append(run.name)
            ok, text = withheld
            fake_id = f"dry-run-{run.step}-{run.call_index}"
            return ToolDone(ok, (TextPart(text=text.format(id=fake_id)),), self.runner.clock.now_ms())
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

    def _shell_access(self) -> ShellAccess | None:
        tasks, settings = self.runner.shell, self.chat.settings
        if tasks is None:
            return None
        return ShellAccess(tasks, settings.shell_enabled, reserve_ms=round(settings.min_model_call_s * 1000))

    async def persist(self, record: TurnRecord) -> Ack:
        await self.runner.repo.add_turn(record)
        self.audit.stored(record)
        if not record.pending:
            count_record(record)
            if self.chat.turn_tokens is not None:
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
        if command.beside_primary:
            # Stored beside the primary's first model call rather than before it (off the turn's path).
            task = asyncio.create_task(self.runner.repo.add_probe(command.record), name="probe-record")
            self._background.append(task)
        else:
            await self.runner.repo.add_probe(command.record)
        self.audit.probe = command.record

    async def compact(self) -> bool:
        return await self.runner.compactor.now(self.chat)

    async def load_memories(self, persons: tuple[str, ...], limit: int) -> Recalled:
        store = self.runner.memories
        assert store is not None
        found = await store.high_importance(persons, self.runner.visibility(self.chat), limit=limit)
        metrics.MEMORY_OPS.labels("recall", "ok").inc()
        return Recalled(tuple(found))

    def remember(self, command: Remember) -> None:
        remember(self.chat, command)

    def show_typing(self, started_ms: int) -> None:
        if self.dry_run:
            self.audit.withheld.append("typing")
            return
        self.runner.typing.show(self.chat.platform, self.chat.chat_id, self.wake_id, started_ms)

    async def mark_processed(self, until_ms: int) -> None:
        await self.chat.processed(self.runner.repo, until_ms)

    def note(self, note: Note) -> None:
        kind, detail = note.kind, note.detail
        if kind == "path":
            self.audit.path = detail
            metrics.WAKEUPS.labels(self.wake.kind, detail).inc()
        elif kind == "probe":
            self.audit.probe_error = detail == "error"
            metrics.PROBE_DECISIONS.labels(detail).inc()
        elif kind == "suppressed":
            log.info("probe suppressed the wake-up: %s", detail)
        elif kind == "probe_omitted":
            log.warning("probe window omitted %s messages of unprocessed input", detail)
        elif kind == "braked":
            log.info("bot-to-bot exchange reached its cap; not waking")
        elif kind == "recovering":
            log.warning("a step was left pending: %s", detail)
        elif kind == "recovered":
            metrics.RECOVERED_STEPS.labels(detail).inc()
        elif kind == "recover_failed":
            log.warning("redoing the pending step failed: %s", detail)
        elif kind == "context_length":
            log.warning("the request did not fit the model's window; compacting or trimming")
        elif kind == "trimmed":
            metrics.REQUESTS_TRIMMED.inc()
            log.warning("the history was trimmed: %s messages left out", detail)
        elif kind == "clipped":
            metrics.INPUTS_CLIPPED.inc()
            log.warning("the input to answer did not fit the model's window and was clipped: %s", detail)
        elif kind == "gate":
            metrics.SHELL_GATE.labels(detail).inc()
        elif kind == "gate_opened":
            log.info("shell tools exposed: maintainer %s", detail)
        elif kind == "turn":
            self.audit.turn_outcome = detail
            metrics.TURNS.labels(detail).inc()
            if self._turn_started is not None:
                metrics.TURN_SECONDS.observe(time.perf_counter() - self._turn_started)
                self._turn_started = None

    def fatal(self, exc: Exception) -> bool:
        return isinstance(exc, StepConflict)

    async def finish(self) -> None:
        if self._background:
            await asyncio.gather(*self._background)


def _dry_run_answer(request_id: str) -> LLMResponse:
    """The primary's answer in a dry run that does not call the model: ``end_turn`` at no cost, so the
    turn ends silent and its chain closes like any other."""
    end = ToolCallPart(id="dry_run_end", name=tools.END, arguments_json="{}")
    return LLMResponse(
        request_id=request_id,
        model_identity=DRY_RUN_MODEL,
        message=AssistantMessage(parts=(end,), model_identity=DRY_RUN_MODEL),
        stop_reason="tool_use",
        usage=Usage(input_tokens=0, output_tokens=0),
        provider_latency_ms=0,
    )


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


def direct_with(platform: str, chat_id: str, settings: ChatSettings) -> str | None:
    """The person a chat is a direct chat with: configured (``direct_with``), or, on Telegram, the chat
    itself when its id is positive (a private chat's id is the user's id; groups' ids are negative)."""
    if settings.direct_with is not None:
        return settings.direct_with
    if platform == "telegram" and chat_id.isdigit():
        return chat_id
    return None
