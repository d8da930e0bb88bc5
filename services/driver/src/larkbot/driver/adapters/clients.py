"""Typed bus clients of the driver: the LLM gateway, the platform actions of an ingress, the pipeline's
request services, media ``read_image`` and the bot identity bucket.

Translation at the edge: a bus failure on ``llm.generate`` becomes a transient :class:`LLMError` so the
turn sees one failure shape; on the other services it stays :class:`BusUnavailable` (a retryable error).
"""

from __future__ import annotations

import logging

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
from larkbot.canonical.events import BotIdentity
from larkbot.canonical.llm import LLM_REPLY_ADAPTER, LLMError, LLMReply, LLMRequest
from larkbot.canonical.media import ReadImageRequest, ReadImageResponse
from larkbot.canonical.names import (
    KV_IDENTITY,
    SUBJECT_LLM_GENERATE,
    SUBJECT_MEDIA_READ_IMAGE,
    SUBJECT_PIPELINE_CURSOR,
    SUBJECT_PIPELINE_HISTORY,
    SUBJECT_PIPELINE_MEMBER,
    SUBJECT_PIPELINE_SNAPSHOT,
    Platform,
    actions_subject,
    identity_key,
)
from larkbot.runtime.bus import Bus, BusUnavailable

log = logging.getLogger(__name__)

#: How often one action request is repeated (same idempotency key) while its outcome is unknown.
ACTION_ATTEMPTS = 3


class BusClients:
    def __init__(
        self,
        bus: Bus,
        *,
        action_timeout_s: float = 10.0,
        lookup_timeout_s: float = 5.0,
        typing_timeout_s: float = 2.0,
    ) -> None:
        self.bus = bus
        self.action_timeout_s = action_timeout_s
        self.lookup_timeout_s = lookup_timeout_s
        self.typing_timeout_s = typing_timeout_s
        self._identity: dict[str, BotIdentity] = {}

    async def generate(self, request: LLMRequest, timeout_s: float) -> LLMReply:
        try:
            return await self.bus.request_as(
                SUBJECT_LLM_GENERATE, request, LLM_REPLY_ADAPTER, timeout_s=max(0.1, timeout_s)
            )
        except BusUnavailable as exc:
            return LLMError(request_id=request.request_id, category="transient", message=str(exc))

    async def act(self, action: ActionRequest, attempts: int = ACTION_ATTEMPTS) -> ActionResult:
        """Run an action; an unknown outcome (or no answer) is asked again with the same idempotency key,
        which the ingress deduplicates, so a send is never delivered twice. ``attempts`` is the chat's
        ``action_attempts``."""
        result: ActionResult | None = None
        for attempt in range(1, attempts + 1):
            try:
                result = await self.bus.request(
                    actions_subject(action.platform.value),
                    action,
                    ActionResult,
                    timeout_s=self.action_timeout_s,
                )
            except BusUnavailable as exc:
                log.warning("action %s attempt %d got no answer: %s", action.kind, attempt, exc)
                continue
            if result.outcome != "unknown":
                return result
            log.warning("action %s attempt %d has an unknown outcome; asking again", action.kind, attempt)
        if result is not None:
            return result
        raise BusUnavailable(f"no answer to {action.kind} after {attempts} attempts")

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
