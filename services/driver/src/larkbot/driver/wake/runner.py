"""Runs one wake-up of a chat: the ``core.wake`` flow, driven by the interpreter against the real ports —
the LLM gateway, the tool executor, the repository, the compactor and the chat's state — through the
interpreter's middleware (``wake.middleware``: audit trail → dry run → metrics), composed here.

Failures leave as a :class:`~larkbot.driver.errors.WakeFailed` only, classified in the flow: retryable
(gateway ``transient`` errors, an unanswered bus request before the turn deadline, a step left pending by a
failure) or final (everything else, including a model call cut by the turn deadline). The chat loop turns them
into retries or the latch. A database that is unavailable ends the flow where it stands and leaves as a
:class:`~larkbot.driver.errors.WakeDeferred` carrying the probe's activation. The records written after the
outcome (the audit record, the request log, a probe decision stored beside the primary) decide nothing:
when the database refuses them the outcome stands, and the record is counted as not stored. After every
wake-up the chat is handed to the compactor.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from larkbot.driver.audit.audit import AuditStore
from larkbot.driver.audit.cachewatch import CacheWatch
from larkbot.driver.audit.core.audit import AuditDraft
from larkbot.driver.audit.core.requestlog import blocks_of
from larkbot.driver.audit.middleware import AuditTrail
from larkbot.driver.audit.requestlog import RequestStore
from larkbot.driver.compaction.compactor import Compactor
from larkbot.driver.manners.settings import manners_of
from larkbot.driver.memory.core.memory import Visibility
from larkbot.driver.memory.core.recall import RecallLimits
from larkbot.driver.memory.memories import MemoryStore
from larkbot.driver.ratelimit.limiter import RateLimiter
from larkbot.driver.ratelimit.settings import rate_limits_of
from larkbot.driver.reminders.store import ReminderStore
from larkbot.driver.shell.core.gate import GateSettings
from larkbot.driver.shell.shell import ShellTasks
from larkbot.runtime import tracing
from larkbot.runtime.config import AuditSettings, ChatSettings, LlmSettings, MemorySettings
from larkbot.runtime.db import DatabaseUnavailable

from .. import metrics
from ..errors import StepConflict, WakeDeferred
from .chatstate import ChatState, wake_failed
from .clients import BusClients
from .clock import Clock
from .core.budget import TurnBudget
from .core.scheduler import Wake
from .core.wake import (
    WakeFailure,
    WakeInput,
    WakeSettings,
    wake_up,
)
from .interpreter import interpret
from .middleware import DryRun, Metrics, Middleware, Tracing
from .ports import ChatPorts
from .repository import DriverRepository
from .sizing import Sizing
from .typing_indicator import TypingIndicators

log = logging.getLogger(__name__)

#: Turn responses whose reasoning is replayed (the open chain's always is) when the primary endpoint is
#: not configured here; otherwise its ``reasoning_replay_turns`` (the gateway applies the same rule).
REASONING_REPLAY_TURNS = 3


@dataclass(frozen=True, slots=True)
class WakeStores:
    """What a wake-up keeps beside the chat's own records (each feature's store)."""

    memories: MemoryStore
    shell: ShellTasks
    #: Each wake-up's audit record, and its model requests and sent message ids (only when the audit
    #: trail is on).
    audit: AuditStore
    requests: RequestStore
    #: The rate limits' windows, shared by every replica (the bus's ``rate-limits`` bucket).
    rates: RateLimiter
    reminders: ReminderStore


@dataclass(frozen=True, slots=True)
class WakePolicy:
    """The deployment's settings every wake-up follows (each chat's own are in its ``ChatSettings``)."""

    llm: LlmSettings
    memory: MemorySettings
    audit: AuditSettings
    #: The configuration's maintainers: the only source of maintainer status (``core.gate``).
    maintainers: frozenset[str]
    utc_offset_min: int
    #: The deployment's dry run (every chat's, beside each chat's own ``dry_run``).
    dry_run: bool


class WakeRunner:
    def __init__(
        self,
        clients: BusClients,
        repo: DriverRepository,
        clock: Clock,
        stores: WakeStores,
        policy: WakePolicy,
    ) -> None:
        self.clients = clients
        self.audit = stores.audit
        self.audit_settings = policy.audit
        self.requests = stores.requests
        self.rates = stores.rates
        self.dry_run = policy.dry_run
        self.maintainers = policy.maintainers
        self.shell = stores.shell
        self.reminders = stores.reminders
        self.memories = stores.memories
        self.memory_settings = policy.memory
        self.repo = repo
        self.clock = clock
        self.sizing = Sizing(policy.llm)
        self.policy_llm = policy.llm
        utc_offset_min = policy.utc_offset_min
        self.utc_offset_min = utc_offset_min
        self.typing = TypingIndicators(clients)
        self.compactor = Compactor(clients, repo, clock, self.sizing, utc_offset_min)
        self.cache_watch = CacheWatch()

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
                reasoning_replay=self.reasoning_replay(chat),
                gate=GateSettings(
                    settings.shell_enabled, self.maintainers, settings.maintainer_window_sec * 1000
                ),
                blocked_users=chat.blocked,
                manners=manners_of(
                    settings, direct_chat=direct_with(chat.platform, chat.chat_id, settings) is not None
                ),
                rate_limits=rate_limits_of(settings),
            ),
            new_chain_id=uuid.uuid4().hex[:16],
            memory=RecallLimits(settings.memory_late_binding_max, settings.memory_late_binding_max_chars)
            if self.memory_on(settings)
            else None,
            ban_spammer=settings.ban_spammer_enabled,
            reminders=settings.reminders.enabled,
        )

    def reasoning_replay(self, chat: ChatState) -> int:
        """Reasoning turns replayed to the chat's primary endpoint (``llm.routes`` may choose it)."""
        endpoint = self.policy_llm.endpoints.get(self.sizing.routed("primary", chat.platform, chat.chat_id))
        return endpoint.reasoning_replay_turns if endpoint else REASONING_REPLAY_TURNS

    def memory_on(self, settings: ChatSettings) -> bool:
        return settings.memory_enabled

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
        # The one order of the interpreter's middleware (``wake.middleware``): the audit trail sees what a
        # dry run withheld; metrics count only what reached the ports.
        middleware: list[Middleware] = [Tracing()] if tracing.enabled() else []
        middleware.append(AuditTrail(ports.audit))
        if ports.dry_run:
            unsent = None if chat.settings.dry_run_call_model else ports.withheld_model
            middleware.append(DryRun(self.clock, ports.audit.withheld.append, unsent))
        middleware.append(Metrics(inputs.wake.kind))
        try:
            outcome = await interpret(wake_up(inputs), ports, middleware)
        except StepConflict as exc:
            # Another replica drives the chat (a lease that lapsed during a slow step); it owns the
            # step and the input now. Nothing is marked processed here.
            log.error("stopping the wake-up: %s", exc)
            await self._record(ports.audit, f"failed: {exc}")
            return
        except DatabaseUnavailable as exc:
            await self._record(ports.audit, f"failed: {exc}")
            raise WakeDeferred(str(exc), activation=ports.activation) from None
        except Exception as exc:
            await self._record(ports.audit, f"failed: {type(exc).__name__}: {exc}")
            raise
        finally:
            await ports.finish()
            self.compactor.poke(chat)
        if isinstance(outcome, WakeFailure):
            await self._record(ports.audit, f"failed: {outcome.reason}")
            raise wake_failed(outcome)
        await self._record(ports.audit, ports.audit.outcome_of_done(outcome.path))

    def dry(self, settings: ChatSettings) -> bool:
        return self.dry_run or settings.dry_run

    async def _record(self, draft: AuditDraft, outcome: str) -> None:
        # Written after the wake-up, off its path: the record describes what happened, it decides
        # nothing. A database that refuses it leaves the outcome as it is (the record is counted as not
        # stored); any other failing write fails the wake-up.
        try:
            await self._write_record(draft, outcome)
        except DatabaseUnavailable as exc:
            metrics.UNSTORED_RECORDS.labels("audit").inc()
            log.warning("the wake-up's audit record was not stored (%s)", exc)

    async def _write_record(self, draft: AuditDraft, outcome: str) -> None:
        settings = self.audit_settings
        requests = draft.request_log()
        # The requests are cut into blocks once, for the cache-break watch and the request log; the watch
        # runs with the audit trail off too (it keeps nothing but hashes, in memory).
        cut = [blocks_of(logged.request) for logged in requests.requests]
        self.cache_watch.observe(requests, cut)
        if not settings.enabled:
            return
        record = draft.record(outcome, self.clock.now_ms(), store_content=settings.store_content)
        await self.audit.add(record)
        # A transaction of its own, right after the record's: the request store remembers the blocks it
        # wrote only once they are committed, which a transaction shared with another store would blur.
        await self.requests.add(requests, store_content=settings.store_content, cut=cut)

    async def close(self) -> None:
        await self.typing.close()
        await self.compactor.close()


def direct_with(platform: str, chat_id: str, settings: ChatSettings) -> str | None:
    """The person a chat is a direct chat with: configured (``direct_with``), or, on Telegram, the chat
    itself when its id is positive (a private chat's id is the user's id; groups' ids are negative)."""
    if settings.direct_with is not None:
        return settings.direct_with
    if platform == "telegram" and chat_id.isdigit():
        return chat_id
    return None
