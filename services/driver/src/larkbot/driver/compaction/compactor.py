"""The compaction controller (SPEC §4.5): per chat, independent of wake-ups.

After every wake-up the chat is *poked*: when its history after the cursor exceeds the trigger and no
compaction runs or backs off, one starts in the background. A wake-up never waits for it, except when
its next request would not fit the model's window (``Compact`` in ``wake.core.wake``): then it waits for
the one in progress, or runs one at once.

One compaction: plan the cut (``core.compaction``), summarize the part before it together with the previous
summary through the ``compaction`` endpoint, store the summary (append-only), then move the pipeline's
cursor, which re-renders the chat from it. The summary is stored first: a process that dies before the
cursor moves leaves a summary whose cursor is ahead of the pipeline's; the driver shows only segments after
the summary's cursor anyway, and the next poke moves the pipeline's cursor again (a cursor that does not
advance changes nothing there).

A failed compaction backs off on the runtime's schedule (``larkbot.runtime.backoff.Backoff``, no jitter:
``compaction_retry_initial_s`` doubling to ``compaction_retry_max_s``); the first success resets it.
Meanwhile the chat keeps working on a trimmed history when its requests would not fit.
"""

from __future__ import annotations

import asyncio
import logging
import time

from larkbot.canonical.context import CursorMove
from larkbot.canonical.errors import ContractError, RetryableError
from larkbot.canonical.llm import LLMError, LLMRequest, TextPart
from larkbot.canonical.names import Platform
from larkbot.driver.wake.accounting import count_usage
from larkbot.driver.wake.chatstate import ChatState
from larkbot.driver.wake.clients import BusClients
from larkbot.driver.wake.clock import Clock
from larkbot.driver.wake.core.context import from_snapshot
from larkbot.driver.wake.core.estimate import request_tokens
from larkbot.driver.wake.repository import DriverRepository
from larkbot.driver.wake.sizing import Sizing
from larkbot.runtime.backoff import Backoff
from larkbot.runtime.bus import ServiceRefused
from larkbot.runtime.logs import log_context

from .. import metrics
from .core.compaction import Summary, compaction_messages, compaction_system, history_tokens, plan_compaction

log = logging.getLogger(__name__)

#: How long one compaction request may take (summaries of large windows are slow to write).
COMPACTION_TIMEOUT_S = 120.0


class Compactor:
    def __init__(
        self, clients: BusClients, repo: DriverRepository, clock: Clock, sizing: Sizing, utc_offset_min: int
    ) -> None:
        self.clients = clients
        self.repo = repo
        self.clock = clock
        self.sizing = sizing
        self.utc_offset_min = utc_offset_min
        self._tasks: set[asyncio.Task[bool]] = set()

    # -- entry points ---------------------------------------------------------------------------------
    def poke(self, chat: ChatState) -> None:
        """Start a compaction in the background when the chat needs one and none runs or backs off."""
        state = chat.compaction
        if not chat.settings.compaction_enabled or chat.stopping:
            return
        if state.task is not None and not state.task.done():
            return
        if self.clock.now_ms() < state.retry_at_ms:
            return
        summary = chat.summary
        lagging = summary is not None and chat.context.cursor < summary.cursor
        if not lagging and chat.turn_tokens is not None:
            # The cheap check first (no database read): the rendered context plus the turn responses'
            # estimate the last wake-up loaded and stored.
            persona = chat.persona
            limits = self.sizing.limits(
                chat.settings, persona.name, chat.platform, chat.chat_id, persona.texts
            )
            if history_tokens(chat.shown_segments(), ()) + chat.turn_tokens <= limits.trigger:
                return
        task = asyncio.create_task(self._guarded(chat, force=False), name=f"compaction-{chat.key}")
        state.task = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def now(self, chat: ChatState) -> bool:
        """Compact at once for a request that would not fit: wait for the compaction in progress, or run
        one unless the chat is backing off. Whether the cursor moved."""
        state = chat.compaction
        if state.task is not None and not state.task.done():
            return await asyncio.shield(state.task)
        if not chat.settings.compaction_enabled or self.clock.now_ms() < state.retry_at_ms:
            metrics.COMPACTIONS.labels("backing_off").inc()
            return False
        task = asyncio.create_task(self._guarded(chat, force=True), name=f"compaction-{chat.key}")
        state.task = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return await asyncio.shield(task)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- one compaction -------------------------------------------------------------------------------
    async def _guarded(self, chat: ChatState, *, force: bool) -> bool:
        with log_context(chat=chat.key):
            try:
                moved = await self._compact(chat, force=force)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._failed(chat, f"{type(exc).__name__}: {exc}", exc_info=True)
                return False
            return moved

    def _failed(self, chat: ChatState, reason: str, *, exc_info: bool = False) -> None:
        state = chat.compaction
        settings = chat.settings
        state.failures += 1
        state.streak += 1
        schedule = Backoff(settings.compaction_retry_initial_s, settings.compaction_retry_max_s, jitter=0.0)
        state.delay_s = schedule.delay(state.streak, 0.0)
        state.retry_at_ms = self.clock.now_ms() + round(state.delay_s * 1000)
        metrics.COMPACTIONS.labels("failed").inc()
        log.warning(
            "compaction failed (%s); next attempt in %.0f s", reason, state.delay_s, exc_info=exc_info
        )

    async def _compact(self, chat: ChatState, *, force: bool) -> bool:
        await self._sync_cursor(chat)
        summary = chat.summary
        turns_from = summary.turns_from_ms if summary is not None else 0
        turns = await self.repo.turns(chat.platform, chat.chat_id, since_ms=turns_from)
        segments = chat.shown_segments()
        persona = chat.persona
        limits = self.sizing.limits(chat.settings, persona.name, chat.platform, chat.chat_id, persona.texts)
        metrics.CURSOR_LAG_EVENTS.observe(len(segments))
        metrics.CURSOR_LAG_TOKENS.observe(history_tokens(segments, turns))
        previous = summary.text if summary is not None else None
        plan = plan_compaction(
            segments,
            turns,
            previous_turns_from_ms=turns_from,
            trigger_tokens=limits.trigger,
            target_tokens=limits.target,
            input_cap_tokens=limits.compaction_input_cap,
            processed_until_ms=chat.marks.processed_until_ms,
            blocked=chat.blocked,
            force=force,
            protected_from_ms=chat.running_since_ms,
        )
        if plan is None:
            if force:
                metrics.COMPACTIONS.labels("nothing_to_summarize").inc()
            return False
        offset = chat.utc_offset_min(self.utc_offset_min)
        started = time.perf_counter()
        now = self.clock.now_ms()
        request = LLMRequest(
            request_id=f"compaction-{chat.chat_id[-24:]}-{plan.cursor}-{now}",
            purpose="compaction",
            endpoint=self.sizing.endpoint("compaction", chat.platform, chat.chat_id),
            system=compaction_system(persona.name, chat.platform, limits.summary_max),
            messages=compaction_messages(previous, plan, offset),
            max_output_tokens=limits.summary_max,
            deadline_ms=now + round(COMPACTION_TIMEOUT_S * 1000),
            prompt_cache_key=f"{chat.key}:compaction",
            chat_key=chat.key,
        )
        estimate = request_tokens(request.system, (), request.messages)
        reply = await self.clients.generate(request, COMPACTION_TIMEOUT_S)
        if isinstance(reply, LLMError) and reply.category == "context_length":
            refused_by = reply.endpoint or request.endpoint
            learnt_before = self.sizing.known_window(refused_by)
            self.sizing.refused(refused_by, estimate, reply)
            if self.sizing.known_window(refused_by) != learnt_before:
                # Not a failure to back off from: the next compaction asks for less.
                metrics.COMPACTIONS.labels("too_long").inc()
                log.info("the compaction request was too long for the model; the next one asks for less")
                return False
        if isinstance(reply, LLMError):
            self._failed(chat, f"the model answered {reply.category}: {reply.message[:200]}")
            return False
        count_usage("compaction", reply)
        self.sizing.observe(reply.endpoint or request.endpoint, estimate, reply)
        text = "\n".join(p.text for p in reply.message.parts if isinstance(p, TextPart)).strip()
        if not text:
            self._failed(chat, "the model wrote an empty summary")
            return False
        stored = Summary(
            platform=chat.platform,
            chat_id=chat.chat_id,
            cursor=plan.cursor,
            turns_from_ms=plan.turns_from_ms,
            text=text,
            created_at_ms=self.clock.now_ms(),
            model_identity=reply.model_identity,
            usage=reply.usage,
            segments=len(plan.segments),
            turns=len(plan.turns),
            tokens_before=plan.tokens_before,
            tokens_after=plan.tokens_after,
        )
        await self.repo.add_summary(stored)
        chat.adopt_summary(stored)
        chat.compaction.delay_s = 0.0
        chat.compaction.streak = 0
        chat.compaction.retry_at_ms = 0
        metrics.COMPACTIONS.labels("ok").inc()
        metrics.SUMMARY_TOKENS.observe(reply.usage.output_tokens)
        metrics.COMPACTION_SECONDS.observe(time.perf_counter() - started)
        log.info(
            "compacted %d segments and %d turn responses (%d → %d est. tokens); cursor %d",
            len(plan.segments),
            len(plan.turns),
            plan.tokens_before,
            plan.tokens_after,
            plan.cursor,
        )
        await self._sync_cursor(chat)
        return True

    async def _sync_cursor(self, chat: ChatState) -> None:
        """Move the pipeline's cursor to the summary's when it lags (after a restart between the two)."""
        summary = chat.summary
        if summary is None or chat.context.cursor >= summary.cursor:
            return
        move = CursorMove(
            platform=Platform(chat.platform), chat_id=chat.chat_id, cursor=summary.cursor, reason="compaction"
        )
        try:
            snapshot = await self.clients.move_cursor(move)
        except (RetryableError, ContractError, ServiceRefused) as exc:
            # The pipeline could not answer (its partition changing hands: retryable) or refused. The
            # summary holds; the driver shows only what follows its cursor. Tried again next time.
            log.warning("moving the pipeline's cursor failed (%s); trying again at the next compaction", exc)
            return
        chat.adopt(from_snapshot(snapshot, chat.settings.max_segment_est_tokens))
