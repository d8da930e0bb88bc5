"""Typed bus clients of the driver: the LLM gateway, the platform actions of an ingress, the pipeline's
request services, media ``read_image`` / ``read_file`` and the bot identity bucket.

Translation at the edge: a bus failure on ``llm.generate`` becomes a transient :class:`LLMError` so the
turn sees one failure shape; on the other services it stays :class:`BusUnavailable` (a retryable error).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import cached_property

import nats

from larkbot.canonical.actions import ActionRequest, ActionResult, TypingAction
from larkbot.canonical.codec import decode
from larkbot.canonical.context import (
    ContextSnapshot,
    CursorMove,
    HistoryRequest,
    HistoryResponse,
    MemberRequest,
    MemberResponse,
    SnapshotRequest,
)
from larkbot.canonical.errors import RetryableError
from larkbot.canonical.events import BotIdentity
from larkbot.canonical.llm import LLM_REPLY_ADAPTER, LLMError, LLMReply, LLMRequest
from larkbot.canonical.media import ReadFileRequest, ReadFileResponse, ReadImageRequest, ReadImageResponse
from larkbot.canonical.names import (
    KV_IDENTITY,
    SUBJECT_LLM_GENERATE,
    SUBJECT_MEDIA_READ_FILE,
    SUBJECT_MEDIA_READ_IMAGE,
    SUBJECT_PIPELINE_CURSOR,
    SUBJECT_PIPELINE_HISTORY,
    SUBJECT_PIPELINE_MEMBER,
    SUBJECT_PIPELINE_SNAPSHOT,
    Platform,
    actions_subject,
    identity_key,
)
from larkbot.driver.budgets.reader import speaking_budget
from larkbot.runtime.budgets.core import SpeakingBudget
from larkbot.runtime.budgets.store import BudgetReader
from larkbot.runtime.bus import Bus, BusUnavailable
from larkbot.runtime.retry import Backoff, Failure, RetryPolicy, retrying

from .. import metrics
from .clock import Clock, SystemClock

log = logging.getLogger(__name__)

#: How often one action request is asked (same idempotency key) while its outcome stays open.
ACTION_ATTEMPTS = 3
#: The wait before asking again: 0.5 s doubling to 4 s, ±25 %.
REASK_BACKOFF = Backoff(initial_s=0.5, max_s=4.0, factor=2.0, jitter=0.25)
#: ``retry.action_reask`` of the configuration (the count is the chat's ``action_attempts``).
REASK = RetryPolicy(REASK_BACKOFF, max_attempts=None)


class _StillOpen(RetryableError):
    """An answer whose outcome is open (an earlier attempt still running): asked again."""


def _reask_failure(exc: BaseException) -> Failure | None:
    return Failure.TRANSIENT if isinstance(exc, BusUnavailable | _StillOpen) else None


class BusClients:
    def __init__(
        self,
        bus: Bus,
        *,
        action_timeout_s: float = 10.0,
        lookup_timeout_s: float = 5.0,
        typing_timeout_s: float = 2.0,
        clock: Clock | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
        reask: RetryPolicy = REASK,
    ) -> None:
        self.bus = bus
        self.reask = reask
        self.clock: Clock = clock or SystemClock()
        self.sleep = sleep
        self.jitter = jitter
        self.action_timeout_s = action_timeout_s
        self.lookup_timeout_s = lookup_timeout_s
        self.typing_timeout_s = typing_timeout_s
        self._identity: dict[str, BotIdentity] = {}

    @cached_property
    def _budgets(self) -> BudgetReader:
        return BudgetReader(self.bus.js)

    async def speaking_budget(self, platform: str, chat_id: str, now_ms: int) -> SpeakingBudget | None:
        """What the platform budgets leave the bot to say in the chat (``driver.budgets``)."""
        return await speaking_budget(self._budgets, platform, chat_id, now_ms)

    async def generate(self, request: LLMRequest, timeout_s: float) -> LLMReply:
        try:
            return await self.bus.request_as(
                SUBJECT_LLM_GENERATE, request, LLM_REPLY_ADAPTER, timeout_s=max(0.1, timeout_s)
            )
        except BusUnavailable as exc:
            return LLMError(request_id=request.request_id, category="transient", message=str(exc))

    async def act(self, action: ActionRequest, attempts: int = ACTION_ATTEMPTS) -> ActionResult:
        """Run an action. While its outcome is open — no answer, or ``unknown`` with an error the ingress
        marks retryable (an earlier attempt still running) — ask again under the same idempotency key,
        which the ingress deduplicates, so nothing is done twice: after :data:`REASK_BACKOFF`, at most
        ``attempts`` times (the chat's ``action_attempts``), and never once the action's deadline has
        passed. Any other answer is returned as it is; an ``unknown`` the ingress marks final (its answer
        was lost) cannot change by asking. Each ask waits until the deadline and ``action_timeout_s``
        beyond it: the ingress retries the platform until the deadline before it answers."""
        result: ActionResult | None = None

        def left_s() -> float:
            if action.deadline_ms is None:
                return float("inf")
            return (action.deadline_ms - self.clock.now_ms()) / 1000

        def reasked(_failure: Failure, _attempts: int, _wait: float, exc: BaseException | None) -> None:
            metrics.ACTION_REASKS.labels("in_progress" if isinstance(exc, _StillOpen) else "no_answer").inc()

        policy = replace(self.reask, max_attempts=attempts)
        try:
            async for attempt in retrying(
                policy, _reask_failure, left_s=left_s, on_retry=reasked, sleep=self.sleep, jitter=self.jitter
            ):
                with attempt:
                    n = attempt.retry_state.attempt_number
                    try:
                        result = await self.bus.request(
                            actions_subject(action.platform.value),
                            action,
                            ActionResult,
                            timeout_s=self._wait_s(action),
                        )
                    except BusUnavailable as exc:
                        log.warning("action %s attempt %d got no answer: %s", action.kind, n, exc)
                        raise
                    if not _open(result):
                        return result
                    log.warning("action %s attempt %d: an earlier attempt is still running", action.kind, n)
                    raise _StillOpen("an earlier attempt is still running")
        except (BusUnavailable, _StillOpen):
            pass
        if result is not None:
            return result
        raise BusUnavailable(f"no answer to {action.kind} after {attempts} attempts")

    def _wait_s(self, action: ActionRequest) -> float:
        if action.deadline_ms is None:
            return self.action_timeout_s
        left_s = (action.deadline_ms - self.clock.now_ms()) / 1000
        return max(self.action_timeout_s, left_s + self.action_timeout_s)

    async def typing(self, action: TypingAction) -> ActionResult:
        """One attempt, short timeout: a typing indicator is worth nothing late."""
        return await self.bus.request(
            actions_subject(action.platform.value), action, ActionResult, timeout_s=self.typing_timeout_s
        )

    async def snapshot(self, platform: str, chat_id: str) -> ContextSnapshot:
        request = SnapshotRequest(platform=Platform(platform), chat_id=chat_id)
        return await self.bus.request(
            SUBJECT_PIPELINE_SNAPSHOT, request, ContextSnapshot, timeout_s=self.lookup_timeout_s
        )

    async def move_cursor(self, move: CursorMove) -> ContextSnapshot:
        """Ask the pipeline to re-render the chat from ``move.cursor``; the answer is the new context."""
        return await self.bus.request(
            SUBJECT_PIPELINE_CURSOR, move, ContextSnapshot, timeout_s=self.lookup_timeout_s
        )

    async def history(self, request: HistoryRequest) -> HistoryResponse:
        return await self.bus.request(
            SUBJECT_PIPELINE_HISTORY, request, HistoryResponse, timeout_s=self.lookup_timeout_s
        )

    async def member(self, request: MemberRequest) -> MemberResponse:
        return await self.bus.request(
            SUBJECT_PIPELINE_MEMBER, request, MemberResponse, timeout_s=self.lookup_timeout_s
        )

    async def read_image(self, request: ReadImageRequest, timeout_s: float) -> ReadImageResponse:
        return await self.bus.request(
            SUBJECT_MEDIA_READ_IMAGE, request, ReadImageResponse, timeout_s=max(0.1, timeout_s)
        )

    async def read_file(self, request: ReadFileRequest, timeout_s: float) -> ReadFileResponse:
        return await self.bus.request(
            SUBJECT_MEDIA_READ_FILE, request, ReadFileResponse, timeout_s=max(0.1, timeout_s)
        )

    async def identity(self, platform: str) -> BotIdentity | None:
        """The bot's identity from the ``identity`` bucket (cached once found)."""
        if platform in self._identity:
            return self._identity[platform]
        kv = await self.bus.js.key_value(KV_IDENTITY)
        try:
            entry = await kv.get(identity_key(platform))
        except nats.js.errors.KeyNotFoundError:
            return None
        if entry.value is None:
            return None
        found = decode(entry.value, BotIdentity)
        self._identity[platform] = found
        return found


def _open(result: ActionResult) -> bool:
    """Asking again can tell more: an earlier attempt of the same key was still running."""
    return result.outcome == "unknown" and result.error is not None and result.error.retryable
