"""One chat in the driver: its context copy, its schedule, its marks, and the loop that serializes its
wake-ups. The context consumer and typing subscriber change the state and set ``changed``; the loop
re-reads the pure scheduler's decision after every change and every tick of the clock.

A running wake-up is never preempted mid-step: after ``stop`` (hand-over of the chat's partition, or
shutdown) the runner's interrupt check ends it once its step in progress is persisted, leaving the chain
open for whoever drives the chat next; then the loop exits.

The database may be unavailable for a while (locked, out of connections): a wake-up that meets it is
retried after a backoff (``retry.background``), however often, and never latches the chat
(:class:`~larkbot.driver.errors.WakeDeferred`); marks it refuses stay in memory and are offered again
after the same backoff, and once more before the loop exits. The loop never ends on a database error: a
crashed chat task would stop the service.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import assert_never

from larkbot.canonical.context import Segment
from larkbot.driver.compaction.core.compaction import Summary
from larkbot.runtime import tracing
from larkbot.runtime.config import ChatSettings
from larkbot.runtime.db import DatabaseUnavailable
from larkbot.runtime.logs import log_context
from larkbot.runtime.retry import Backoff

from .. import metrics
from ..errors import WakeDeferred, WakeFinal, WakeRetryable
from ..observer import DriverObserver
from .clock import Clock
from .core import scheduler
from .core.context import ChatContext, latest_external_ms, new_external
from .core.wake import FinalFailure, TransientFailure, WakeFailure
from .history import TurnHistory
from .repository import ChatMarks, DriverRepository

log = logging.getLogger(__name__)

#: Inputs a wake-up's span links to at most (a debounced burst of messages).
MAX_INPUT_TRACES = 16


@dataclass(frozen=True, slots=True)
class Persona:
    name: str
    texts: tuple[str, ...]


@dataclass(slots=True)
class CompactionState:
    """The chat's compaction controller state (``adapters.compactor``): the compaction in progress and
    the back-off after failures."""

    task: asyncio.Task[bool] | None = None
    retry_at_ms: int = 0
    delay_s: float = 0.0
    failures: int = 0
    #: Failures since the last compaction that succeeded: the retry number of the back-off.
    streak: int = 0


def wake_failed(failure: WakeFailure) -> WakeRetryable | WakeFinal:
    """The exception a wake-up's failed outcome leaves the runner as (:mod:`larkbot.driver.errors`)."""
    match failure:
        case TransientFailure(reason, activation):
            return WakeRetryable(reason, activation=activation)
        case FinalFailure(reason, activation):
            return WakeFinal(reason, activation=activation)
        case _:
            assert_never(failure)


@dataclass(frozen=True, slots=True)
class UnsavedMarks:
    """Marks the database refused (``ChatState.marks`` holds them): offered again at ``due_ms``."""

    attempts: int
    due_ms: int


#: ``(chat, wake, wake_id, input_until_ms)``.
RunWake = Callable[["ChatState", scheduler.Wake, str, int], Awaitable[None]]


class ChatState:
    def __init__(
        self,
        platform: str,
        chat_id: str,
        settings: ChatSettings,
        persona: Persona,
        clock: Clock,
        observer: DriverObserver,
        *,
        database_retry: Backoff,
    ) -> None:
        self.platform = platform
        self.chat_id = chat_id
        self.key = f"{platform}:{chat_id}"
        self.settings = settings
        #: Their messages are context only: they never wake the bot nor interrupt its turn.
        self.blocked = frozenset(settings.blocked_users)
        self.persona = persona
        self.clock = clock
        self.observer = observer
        self.debounce = scheduler.Debounce(
            settings.initial_delay_ms,
            settings.typing_extend_ms,
            settings.max_delay_ms,
            tuple(round(s * 1000) for s in settings.transient_retry_delays_s),
        )
        self.context = ChatContext()
        self.schedule = scheduler.Schedule()
        self.marks = ChatMarks(0, 0)
        #: The marks are not saved yet: the database refused them (``None``: saved).
        self.unsaved: UnsavedMarks | None = None
        #: When to try again after the database was unavailable (``retry.background``).
        self.database_retry = database_retry
        self.probe_start: str | None = None
        self.changed = asyncio.Event()
        self.stopping = False
        #: Wake-ups this replica ran for the chat since it took the chat over.
        self.wakeups = 0
        #: Failed attempts at redoing the chat's pending step (``core.wake``).
        self.recovery_failures = 0
        #: The newest compaction summary (loaded at take-over, replaced by each compaction).
        self.summary: Summary | None = None
        #: The sticky start of a trimmed history (``prompt.select_history``); cleared by a compaction.
        self.trim_from_ms: int | None = None
        #: When the wake-up in progress started (compaction keeps what it may still store).
        self.running_since_ms: int | None = None
        #: Estimated tokens of the turn responses after the summary's boundary, as the last wake-up loaded
        #: and stored them (``None``: not known yet); the compactor's cheap check.
        self.turn_tokens: int | None = None
        #: The turn responses as this replica last read or stored them (``wake.history``).
        self.history = TurnHistory()
        self.compaction = CompactionState()
        #: The ``traceparent`` of each context update that brought new input since the last wake-up
        #: (oldest first, bounded): the wake-up continues the newest and links the others.
        self.input_traces: list[str] = []

    # -- inputs ---------------------------------------------------------------------------------------
    def load(self, marks: ChatMarks | None, chain_open: bool, summary: Summary | None = None) -> None:
        if marks is not None:
            self.marks = marks
        self.summary = summary
        self.schedule = replace(self.schedule, resume=chain_open)
        self._changed()

    def set_context(self, context: ChatContext, trace: str | None = None) -> None:
        inputs = new_external(self.context, context, self.marks.processed_until_ms, self.blocked)
        for segment in inputs:
            self.schedule = scheduler.on_input(
                self.schedule, segment.sender_id or "runtime", segment.received_at_ms
            )
        if inputs and trace is not None:
            self.input_traces = [*self.input_traces[-(MAX_INPUT_TRACES - 1) :], trace]
        self.context = context
        self._changed()

    def adopt(self, context: ChatContext, trace: str | None = None) -> None:
        """Move the copy forward to ``context`` (``trace``: the update's ``traceparent``); an older copy
        (a snapshot that lost the race with a newer one taken on a gap) is ignored."""
        if context.seq > self.context.seq:
            self.set_context(context, trace)

    def adopt_summary(self, summary: Summary) -> None:
        self.summary = summary
        self.trim_from_ms = None
        self.turn_tokens = None

    def typing(self, at_ms: int) -> None:
        self.schedule = scheduler.on_typing(self.schedule, at_ms)
        self._changed()

    def _changed(self) -> None:
        self.changed.set()

    # -- reads ----------------------------------------------------------------------------------------
    def shown_segments(self) -> tuple[Segment, ...]:
        """The context after the summary's cursor (the pipeline's copy may lag behind a new summary)."""
        segments = self.context.segments
        if self.summary is None or self.context.cursor >= self.summary.cursor:
            return segments
        cursor = self.summary.cursor
        return tuple(s for s in segments if s.event_seq > cursor)

    def latest_external_ms(self) -> int:
        return latest_external_ms(self.context.segments, self.blocked)

    def last_action_ms(self) -> int:
        own = max((s.received_at_ms for s in self.context.segments if s.is_myself), default=0)
        return max(own, self.marks.last_action_ms)

    def utc_offset_min(self, deployment: int) -> int:
        return self.settings.utc_offset_min if self.settings.utc_offset_min is not None else deployment

    # -- marks ----------------------------------------------------------------------------------------
    def acted(self, at_ms: int) -> None:
        self.marks = replace(self.marks, last_action_ms=max(self.marks.last_action_ms, at_ms))

    async def processed(self, repo: DriverRepository, until_ms: int) -> None:
        """Input up to ``until_ms`` is handled: kept at once, saved now or, when the database refuses,
        later (``unsaved``)."""
        self.marks = replace(self.marks, processed_until_ms=max(self.marks.processed_until_ms, until_ms))
        await self._save_marks(repo)

    async def _save_marks(self, repo: DriverRepository) -> None:
        try:
            await repo.save_marks(self.platform, self.chat_id, self.marks)
        except DatabaseUnavailable as exc:
            # Kept in memory meanwhile: this replica goes on from them. Should it stop before they are
            # saved, the next holder wakes for that input again and sees what the bot did (its steps are
            # stored; a step written ahead is redone under the same keys).
            attempts = 1 if self.unsaved is None else self.unsaved.attempts + 1
            delay_s = self.database_retry.delay(attempts, random.random())
            self.unsaved = UnsavedMarks(attempts, self.clock.now_ms() + round(delay_s * 1000))
            metrics.MARKS_DEFERRED.inc()
            log.warning("the chat's marks were not saved (%s); saving them again in %.1f s", exc, delay_s)
        else:
            self.unsaved = None

    # -- the loop -------------------------------------------------------------------------------------
    async def loop(self, run_wake: RunWake, repo: DriverRepository) -> None:
        while not self.stopping:
            self.changed.clear()
            now = self.clock.now_ms()
            if self.unsaved is not None and self.unsaved.due_ms <= now:
                with log_context(chat=self.key):
                    await self._save_marks(repo)
            action = scheduler.next_action(self.schedule, now, self.debounce)
            match action:
                case scheduler.Wait(until_ms):
                    if self.unsaved is not None:
                        due = self.unsaved.due_ms
                        until_ms = due if until_ms is None else min(until_ms, due)
                    self.observer.chat_idle(self, now)
                    await self.clock.wait_until(until_ms, self.changed)
                    self.observer.chat_woke(self)
                case scheduler.Wake():
                    await self._wake(action, now, run_wake, repo)
                case _:
                    assert_never(action)
        if self.unsaved is not None:
            # A last offer before the chat is handed over (or the service stops).
            with log_context(chat=self.key):
                await self._save_marks(repo)

    async def _wake(
        self, action: scheduler.Wake, now: int, run_wake: RunWake, repo: DriverRepository
    ) -> None:
        input_until = max(action.input_until_ms, self.latest_external_ms())
        # The wake-up handles (and marks processed) everything up to ``input_until``, so it takes
        # those inputs with it whatever its kind (a resume wake-up's own bound is 0).
        self.schedule = scheduler.begin(self.schedule, replace(action, input_until_ms=input_until))
        self.wakeups += 1
        self.running_since_ms = now
        wake_id = uuid.uuid4().hex[:16]
        traces, self.input_traces = self.input_traces, []
        # Every line logged for this wake-up, its failure included, carries the chat and wake id; its
        # span continues the trace of the newest input it answers (a timer's wake-up starts one).
        with (
            log_context(chat=self.key, wake=wake_id, trace=traces[-1] if traces else None),
            tracing.span(
                "driver wake-up",
                parent=traces[-1] if traces else None,
                root=not traces,
                links=traces[:-1],
                attributes={"larkbot.chat": self.key, "larkbot.wake": wake_id, "larkbot.kind": action.kind},
            ),
        ):
            try:
                await run_wake(self, action, wake_id, input_until)
            except (WakeRetryable, WakeFinal) as exc:
                await self._failed(exc, action, input_until, repo)
            except Exception as exc:
                # A bug, not a provider or platform failure: counted where an alert can see it.
                log.exception("wake-up crashed; the context is latched until new input")
                metrics.WAKE_CRASHES.labels(type(exc).__name__[:64]).inc()
                metrics.TURNS.labels("failed").inc()
                crashed = WakeFinal("crashed", activation=None)
                await self._failed(crashed, action, input_until, repo)
            else:
                self.schedule = scheduler.succeeded(self.schedule)
            finally:
                self.running_since_ms = None

    async def _failed(
        self, exc: WakeRetryable | WakeFinal, wake: scheduler.Wake, input_until: int, repo: DriverRepository
    ) -> None:
        match exc:
            case WakeDeferred():
                delay_s = self.database_retry.delay(wake.deferrals + 1, random.random())
                self.schedule, retried = scheduler.deferred(
                    self.schedule,
                    replace(wake, input_until_ms=input_until),
                    self.clock.now_ms(),
                    exc.activation,
                    round(delay_s * 1000),
                )
                metrics.WAKE_FAILURES.labels("database_retried").inc()
                if retried:
                    log.warning("wake-up deferred (%s); retrying in %.1f s", exc, delay_s)
                else:
                    log.warning("wake-up deferred (%s); newer input wakes the chat again", exc)
                # Never latched: the input stays unprocessed until a wake-up handles it.
                return
            case WakeRetryable():
                retry_wake = replace(wake, input_until_ms=input_until)
                self.schedule, retried = scheduler.failed_transiently(
                    self.schedule,
                    retry_wake,
                    self.clock.now_ms(),
                    exc.activation,
                    self.debounce.retry_delays_ms,
                )
                if retried:
                    metrics.WAKE_FAILURES.labels("transient_retried").inc()
                    log.warning("wake-up failed transiently (%s); retrying", exc)
                    return
                metrics.WAKE_FAILURES.labels("transient_exhausted").inc()
            case WakeFinal():
                self.schedule = scheduler.failed_permanently(self.schedule)
                metrics.WAKE_FAILURES.labels("permanent").inc()
            case _:
                assert_never(exc)
        log.error("wake-up failed (%s); the context is latched until new input", exc)
        await self.processed(repo, input_until)

    def stop(self) -> None:
        self.stopping = True
        self.changed.set()
        self.observer.chat_stopping(self)
