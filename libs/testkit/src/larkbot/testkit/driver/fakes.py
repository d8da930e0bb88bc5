"""Stand-ins for the driver's other neighbours on the real bus — a scripted LLM gateway
(``llm.generate``), a platform ingress (``actions.<platform>``) and a media worker
(``media.read_image``) — for the driver's scenario tests and the benchmarks. They speak the real subjects
and contracts; only the behaviour behind them is scripted. The pipeline's stand-in is
:mod:`.fake_pipeline`.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable

from pydantic import BaseModel

from larkbot.canonical.actions import (
    ACTION_ADAPTER,
    ActionError,
    ActionRequest,
    ActionResult,
    MessageDeletion,
    ModerateAction,
    ModerationReport,
    ReactAction,
    SendMessageAction,
    TypingAction,
)
from larkbot.canonical.llm import ImagePart, LLMError, LLMReply, LLMRequest
from larkbot.canonical.media import MediaError, ReadImageRequest, ReadImageResponse
from larkbot.canonical.names import (
    QUEUE_ACTIONS,
    QUEUE_LLM,
    QUEUE_MEDIA,
    SUBJECT_LLM_GENERATE,
    SUBJECT_MEDIA_READ_IMAGE,
    Platform,
    actions_subject,
)
from larkbot.runtime.bus import Bus
from larkbot.runtime.serve import Endpoint, adapter_decoder, model_decoder

from .fake_pipeline import FakePipeline
from .synthetic import segment

#: Async so a script can act on the world (publish input, wait for the driver) before answering.
Script = Callable[[LLMRequest], Awaitable[LLMReply]]


class FakeLLM:
    """Answers ``llm.generate`` with ``script(request)``; remembers every request."""

    def __init__(self, bus: Bus, script: Script, *, keep: bool = True) -> None:
        self.script = script
        #: Remember requests (``keep=False``: a long replay that watches them through its script).
        self.keep = keep
        self.requests: list[LLMRequest] = []
        self.changed = asyncio.Condition()
        self.endpoint = Endpoint(
            bus,
            SUBJECT_LLM_GENERATE,
            QUEUE_LLM,
            model_decoder(LLMRequest),
            self._handle,
            lambda _data, exc: LLMError(
                request_id="unknown", category="permanent", message=type(exc).__name__
            ),
        )

    async def _handle(self, request: LLMRequest) -> BaseModel:
        if self.keep:
            self.requests.append(request)
        async with self.changed:
            self.changed.notify_all()
        reply: BaseModel = await self.script(request)
        return reply

    def by_purpose(self, purpose: str) -> list[LLMRequest]:
        return [r for r in self.requests if r.purpose == purpose]

    async def wait_for(self, count: int, purpose: str | None = None, timeout_s: float = 30.0) -> None:
        def enough() -> bool:
            found = self.requests if purpose is None else self.by_purpose(purpose)
            return len(found) >= count

        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(enough), timeout_s)


class FakePlatform:
    """An ingress answering ``actions.<platform>``: executes each idempotency key once (a repeat answers
    ``duplicate``), publishes the bot's sent message back through the pipeline as a self-sent segment, and
    can be told to lose the answer of the next N sends (``outcome="unknown"`` after executing, retryable:
    asking again under the key tells, as the ingresses answer while an attempt still runs). A
    ``moderate`` action is answered by ``moderate`` (default: banned, every message deleted), and the
    messages it reports deleted are deleted in the pipeline. Typing
    actions are recorded; while ``typing_gate`` is set to an unset event they are held until it is set (a
    slow platform). ``on_sent`` is told of each message sent, as it is executed (a bench times its turns
    by it)."""

    def __init__(
        self,
        bus: Bus,
        platform: Platform,
        pipeline: FakePipeline,
        clock_ms: Callable[[], int],
        *,
        on_sent: Callable[[SendMessageAction], None] | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.clock_ms = clock_ms
        self.on_sent = on_sent
        self.delivered: list[SendMessageAction] = []
        self.reactions: list[ReactAction] = []
        self.typing: list[TypingAction] = []
        self.moderations: list[ModerateAction] = []
        self.moderate: Callable[[ModerateAction], ActionResult] = banned_everything
        self.requests: list[ActionRequest] = []
        self.executed: dict[str, ActionResult] = {}
        self.lose_answers = 0
        self.typing_gate: asyncio.Event | None = None
        self._ids = itertools.count(1000)
        self.endpoint: Endpoint[ActionRequest] = Endpoint(
            bus,
            actions_subject(platform.value),
            QUEUE_ACTIONS,
            adapter_decoder(ACTION_ADAPTER),
            self._handle,
            lambda _d, exc: ActionResult(
                idempotency_key="unknown",
                ok=False,
                outcome="failed",
                error=ActionError(code="platform", message=type(exc).__name__, retryable=False),
            ),
        )

    def sent_in(self, chat_id: str) -> list[str]:
        return [d.text for d in self.delivered if d.chat_id == chat_id]

    async def _handle(self, action: ActionRequest) -> BaseModel:
        self.requests.append(action)
        if isinstance(action, TypingAction):
            self.typing.append(action)
            if self.typing_gate is not None:
                await self.typing_gate.wait()
            return ActionResult(idempotency_key=action.idempotency_key, ok=True, outcome="done")
        done = self.executed.get(action.idempotency_key)
        if done is not None:
            return done.model_copy(update={"outcome": "duplicate"})
        if isinstance(action, SendMessageAction):
            n = next(self._ids)
            self.delivered.append(action)
            if self.on_sent is not None:
                self.on_sent(action)
            result = ActionResult(
                idempotency_key=action.idempotency_key, ok=True, outcome="done", message_ids=(f"om_{n}",)
            )
            self.executed[action.idempotency_key] = result
            await self.pipeline.append(
                segment(
                    n,
                    sender="ou_bot",
                    name="Bot",
                    at_ms=self.clock_ms(),
                    text=action.text,
                    myself=True,
                    self_sent=True,
                ),
                chat_id=action.chat_id,
            )
            if self.lose_answers > 0:
                self.lose_answers -= 1
                return ActionResult(
                    idempotency_key=action.idempotency_key,
                    ok=False,
                    outcome="unknown",
                    error=ActionError(code="timeout", message="platform did not answer", retryable=True),
                )
            return result
        if isinstance(action, ModerateAction):
            self.moderations.append(action)
            result = self.moderate(action)
            self.executed[action.idempotency_key] = result
            report = result.moderation
            gone = [d.message_id for d in report.deletions if d.outcome == "deleted"] if report else []
            if gone:
                await self.pipeline.delete(*gone, chat_id=action.chat_id)
            return result
        if isinstance(action, ReactAction):
            self.reactions.append(action)
        result = ActionResult(idempotency_key=action.idempotency_key, ok=True, outcome="done")
        self.executed[action.idempotency_key] = result
        return result


def banned_everything(action: ModerateAction) -> ActionResult:
    """The platform side of a ban that went through: banned, every listed message deleted."""
    report = ModerationReport(
        banned=True,
        deletions=tuple(MessageDeletion(message_id=m.message_id, outcome="deleted") for m in action.messages),
    )
    return ActionResult(idempotency_key=action.idempotency_key, ok=True, outcome="done", moderation=report)


class FakeMedia:
    """A media worker answering ``media.read_image``: ``images`` maps a file id to the image it returns
    (and an optional alt text); any other file id fails with ``code="download"``."""

    def __init__(self, bus: Bus) -> None:
        self.images: dict[str, tuple[ImagePart, str | None]] = {}
        self.requests: list[ReadImageRequest] = []
        self.endpoint: Endpoint[ReadImageRequest] = Endpoint(
            bus,
            SUBJECT_MEDIA_READ_IMAGE,
            QUEUE_MEDIA,
            model_decoder(ReadImageRequest),
            self._handle,
            lambda _d, exc: ReadImageResponse(
                request_id="unknown",
                ok=False,
                error=MediaError(code="unsupported", message=type(exc).__name__, retryable=False),
            ),
        )

    async def _handle(self, request: ReadImageRequest) -> BaseModel:
        self.requests.append(request)
        found = self.images.get(request.file_id)
        if found is None:
            return ReadImageResponse(
                request_id=request.request_id,
                ok=False,
                error=MediaError(code="download", message="no such file", retryable=False),
            )
        image, alt = found
        return ReadImageResponse(
            request_id=request.request_id,
            ok=True,
            image=image.model_copy(update={"detail": request.detail}),
            alt_text=alt,
        )
