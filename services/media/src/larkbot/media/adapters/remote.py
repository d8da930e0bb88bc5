"""What the media workers ask of other services: downloads and custom emoji (``fetch.<platform>``),
descriptions (``llm.generate``) and transcripts (``llm.transcribe``). Their failures become typed
:class:`MediaFailure` s here, once.

Decisions:

- Downloads and custom emoji are read-only actions, asked on ``fetch.<platform>``, never on
  ``actions.<platform>``: with a NATS user per service the worker may publish only there, so it can fetch
  what it describes but never send, react or delete (``larkbot.runtime.permissions``).
- A job's ``blob_key`` is used when the object is still stored; otherwise (absent or purged) the ingress
  downloads the file again through a ``download`` action capped at 20 MB. The action's idempotency key
  names the attachment, so a retried download is the same request.
- A download the ingress refuses as ``too_large`` is final; any other failure is retryable
  (``DownloadUnavailable``) or final (``DownloadRefused``) as the ingress's own ``retryable`` says, and an
  ``unknown`` outcome or no answer at all is retryable.
- A custom emoji is resolved to its sticker by the ingress (``custom_emoji``); an id the platform does not
  know is final (``DownloadRefused``), failures otherwise as for downloads.
- Vision calls carry an absolute deadline; the bus waits a little longer than it, so the gateway's own
  ``deadline`` answer (retryable) arrives before our timeout would.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from prometheus_client import Counter, Histogram
from pydantic import BaseModel, TypeAdapter

from larkbot.canonical.actions import (
    ActionResult,
    CustomEmojiAction,
    CustomEmojiSticker,
    DownloadAction,
    ReadOnlyAction,
)
from larkbot.canonical.content import AttachmentType
from larkbot.canonical.errors import ContractError
from larkbot.canonical.llm import LLM_REPLY_ADAPTER
from larkbot.canonical.media import ReadFileRequest, ReadImageRequest
from larkbot.canonical.names import (
    SUBJECT_LLM_GENERATE,
    SUBJECT_LLM_TRANSCRIBE,
    Platform,
    fetch_subject,
)
from larkbot.canonical.transcription import TRANSCRIPTION_REPLY_ADAPTER
from larkbot.runtime.bus import Bus, BusUnavailable

from .. import metrics
from ..core.errors import (
    DownloadRefused,
    DownloadUnavailable,
    MediaFailure,
    TooLarge,
    TranscriptionFailed,
    TranscriptionUnavailable,
    VisionFailed,
    VisionUnavailable,
)
from ..core.images import MAX_SOURCE_BYTES
from ..core.jobs import description_from, vision_request
from ..core.transcripts import transcript_from, transcription_request
from .store import Blobs

R = TypeVar("R")
T = TypeVar("T")


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class SourceRef:
    """Where an attachment's bytes come from."""

    platform: Platform
    chat_id: str
    message_id: str | None
    file_id: str
    attachment_type: AttachmentType
    blob_key: str | None = None

    @classmethod
    def of(cls, request: ReadImageRequest | ReadFileRequest) -> SourceRef:
        """The file a driver's request names (the stored original when it knows one)."""
        return cls(
            request.platform,
            request.chat_id,
            request.message_id,
            request.file_id,
            request.attachment_type,
            request.blob_key,
        )


class Sources:
    def __init__(
        self,
        bus: Bus,
        blobs: Blobs,
        *,
        timeout_s: float = 60.0,
        max_bytes: int = MAX_SOURCE_BYTES,
        clock_ms: Callable[[], int] = _now_ms,
    ) -> None:
        self.bus = bus
        self.blobs = blobs
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self.clock_ms = clock_ms

    async def fetch(self, ref: SourceRef, max_bytes: int | None = None) -> bytes:
        """The file's bytes; :class:`TooLarge` above ``max_bytes`` (never above the worker's own limit)."""
        limit = self.max_bytes if max_bytes is None else min(max_bytes, self.max_bytes)
        if ref.blob_key is not None:
            data = await self.blobs.read(ref.blob_key, max_bytes=limit)
            if data is not None:
                return data
        blob_key = await self._download(ref, limit)
        data = await self.blobs.read(blob_key, max_bytes=limit)
        if data is None:
            raise DownloadUnavailable("the ingress reported a download that is not in the object store")
        return data

    async def _download(self, ref: SourceRef, limit: int) -> str:
        platform = ref.platform.value
        action = DownloadAction(
            platform=ref.platform,
            idempotency_key=f"media-download:{ref.chat_id}:{ref.message_id or '-'}:{ref.file_id}",
            deadline_ms=self.clock_ms() + int(self.timeout_s * 1000),
            chat_id=ref.chat_id,
            message_id=ref.message_id,
            file_id=ref.file_id,
            attachment_type=ref.attachment_type,
            max_bytes=limit,
        )
        result = await self._ask(action)
        if result.ok and result.blob_key is not None:
            metrics.DOWNLOADS.labels(platform, "ok").inc()
            return result.blob_key
        code = _code(result)
        metrics.DOWNLOADS.labels(platform, code if code in _CODES else "failed").inc()
        if code == "too_large":
            raise TooLarge(f"the {platform} ingress refused the download: larger than {limit} bytes")
        raise _failure(result, "download", "the download answered without a blob")

    async def custom_emoji(self, platform: Platform, chat_id: str, emoji_id: str) -> CustomEmojiSticker:
        """The sticker that draws a custom emoji, resolved by the ingress."""
        action = CustomEmojiAction(
            platform=platform,
            idempotency_key=f"media-emoji:{emoji_id}",
            deadline_ms=self.clock_ms() + int(self.timeout_s * 1000),
            chat_id=chat_id,
            emoji_ids=(emoji_id,),
        )
        result = await self._ask(action)
        if not result.ok:
            metrics.EMOJI_RESOLUTIONS.labels("failed").inc()
            raise _failure(result, "custom emoji", "the custom emoji was not resolved")
        found = next((s for s in result.custom_emoji if s.emoji_id == emoji_id), None)
        if found is None:
            metrics.EMOJI_RESOLUTIONS.labels("unknown").inc()
            raise DownloadRefused(f"the {platform.value} platform knows no custom emoji {emoji_id}")
        metrics.EMOJI_RESOLUTIONS.labels("ok").inc()
        return found

    async def _ask(self, action: ReadOnlyAction) -> ActionResult:
        platform = action.platform.value
        try:
            return await self.bus.request(
                fetch_subject(platform), action, ActionResult, timeout_s=self.timeout_s + 5
            )
        except BusUnavailable as exc:
            metrics.DOWNLOADS.labels(platform, "unavailable").inc()
            raise DownloadUnavailable(f"no {action.kind} from the {platform} ingress: {exc}") from None
        except ContractError as exc:
            metrics.DOWNLOADS.labels(platform, "bad_reply").inc()
            raise DownloadUnavailable(
                f"the {platform} ingress answered a {action.kind} badly: {exc}"
            ) from None


def _code(result: ActionResult) -> str:
    return result.error.code if result.error is not None else result.outcome


def _failure(result: ActionResult, what: str, missing: str) -> DownloadUnavailable | DownloadRefused:
    """A failed action as the worker's failure: the wire's ``retryable`` (the ingress's verdict) picks
    the type; an ``unknown`` outcome may still come true, so it is retryable whatever the flag says."""
    error = result.error
    code = _code(result)
    message = error.message if error is not None else missing
    retryable = error.retryable if error is not None else True
    failure = DownloadUnavailable if retryable or code == "unknown" else DownloadRefused
    return failure(f"{what} failed ({code}): {message}")


_CODES = frozenset({"too_large", "not_found", "forbidden", "rate_limited", "deadline", "platform", "unknown"})


class _ModelClient:
    """A model reached through the gateway: the configured endpoint (``None``: not configured) and the
    time a call may take, as an absolute deadline on the request."""

    def __init__(
        self,
        bus: Bus,
        endpoint: str | None,
        *,
        timeout_s: float = 60.0,
        clock_ms: Callable[[], int] = _now_ms,
    ) -> None:
        self.bus = bus
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.clock_ms = clock_ms


class Vision(_ModelClient):
    """Describes pictures through ``llm.generate`` with the configured vision endpoint."""

    async def describe(
        self,
        endpoint: str,
        image_keys: Sequence[str],
        attachment_type: AttachmentType | None,
        *,
        request_id: str,
        chat_key: str | None,
        times_ms: Sequence[int] = (),
        what: str | None = None,
    ) -> tuple[str, str]:
        """``(alt text, model identity)``; raises :class:`VisionFailed`."""
        request = vision_request(
            times_ms=times_ms,
            what=what,
            request_id=request_id,
            endpoint=endpoint,
            image_keys=image_keys,
            attachment_type=attachment_type,
            deadline_ms=self.clock_ms() + int(self.timeout_s * 1000),
            chat_key=chat_key,
        )
        return await _ask_model(
            self.bus,
            SUBJECT_LLM_GENERATE,
            request,
            LLM_REPLY_ADAPTER,
            description_from,
            timeout_s=self.timeout_s + 5,
            calls=metrics.VISION_CALLS,
            seconds=metrics.VISION_SECONDS,
            unavailable=VisionUnavailable,
            failure=VisionFailed,
        )


class Speech(_ModelClient):
    """Transcribes audio through ``llm.transcribe`` with the configured speech-to-text endpoint."""

    async def transcribe(
        self, endpoint: str, blob_key: str, *, language: str | None, request_id: str, chat_key: str
    ) -> tuple[str, str]:
        """``(transcript, model identity)``; raises :class:`TranscriptionFailed`."""
        request = transcription_request(
            request_id=request_id,
            endpoint=endpoint,
            blob_key=blob_key,
            language=language,
            deadline_ms=self.clock_ms() + int(self.timeout_s * 1000),
            chat_key=chat_key,
        )
        return await _ask_model(
            self.bus,
            SUBJECT_LLM_TRANSCRIBE,
            request,
            TRANSCRIPTION_REPLY_ADAPTER,
            transcript_from,
            timeout_s=self.timeout_s + 5,
            calls=metrics.TRANSCRIPTIONS,
            seconds=metrics.TRANSCRIPTION_SECONDS,
            unavailable=TranscriptionUnavailable,
            failure=TranscriptionFailed,
        )


async def _ask_model(
    bus: Bus,
    subject: str,
    request: BaseModel,
    adapter: TypeAdapter[R],
    read: Callable[[R], T],
    *,
    timeout_s: float,
    calls: Counter,
    seconds: Histogram,
    unavailable: Callable[[str], MediaFailure],
    failure: type[MediaFailure],
) -> T:
    """One model call through the gateway, counted by outcome (ok, unavailable, bad_reply, failed) and
    timed; no answer or a bad one is ``unavailable`` (retryable), an error answer what ``read`` raises."""
    started = time.perf_counter()
    try:
        reply = await bus.request_as(subject, request, adapter, timeout_s=timeout_s)
    except BusUnavailable as exc:
        calls.labels("unavailable").inc()
        raise unavailable(f"no answer from {subject}: {exc}") from None
    except ContractError as exc:
        calls.labels("bad_reply").inc()
        raise unavailable(f"{subject} answered badly: {exc}") from None
    finally:
        seconds.observe(time.perf_counter() - started)
    try:
        found = read(reply)
    except failure:
        calls.labels("failed").inc()
        raise
    calls.labels("ok").inc()
    return found
