"""Test doubles of what the media workers talk to, on the real bus: shipped for tests, the benchmark and
the playground.

- :class:`FakeIngress` answers ``download`` actions on ``fetch.<platform>`` (queue group ``ingress``; the
  runtime's fetch endpoint refuses any action that is not read-only, as for the real ingresses) from an
  in-memory file table, storing the bytes in the ``blobs`` object store under ``sha256:<hex>`` exactly as
  the real ingresses do, and refusing files over the action's ``max_bytes`` as ``too_large``; and
  ``custom_emoji`` actions from its emoji table (the stickers' bytes are files of the file table).
- :class:`FakeVision` answers ``llm.generate`` (queue group ``llm-gateway``) like the gateway does: it
  reads every image part from the object store, and describes what it got — size and dominant colour —
  so a test can tell which pixels reached the model. It can hold its answers (``hold``) and answer
  scripted errors first (``errors``).
- :class:`FakeSpeech` answers ``llm.transcribe`` like the gateway with the fake provider behind it: it
  reads the audio from the object store and answers the fake provider's deterministic transcript
  (:func:`larkbot.llm_gateway.fake.fake_transcript`), or scripted errors first (``errors``).
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable

from PIL import Image, ImageStat

from larkbot.canonical.actions import (
    ActionRequest,
    ActionResult,
    CustomEmojiAction,
    CustomEmojiSticker,
    DownloadAction,
)
from larkbot.canonical.content import StickerFormat
from larkbot.canonical.llm import (
    AssistantMessage,
    ImagePart,
    LLMError,
    LLMRequest,
    LLMResponse,
    TextPart,
    Usage,
    UserMessage,
)
from larkbot.canonical.names import (
    OBJECT_STORE_BLOBS,
    QUEUE_LLM,
    SUBJECT_LLM_GENERATE,
    SUBJECT_LLM_TRANSCRIBE,
    Platform,
)
from larkbot.canonical.transcription import TranscriptionRequest, TranscriptionResponse
from larkbot.llm_gateway.fake import TranscriptionCall, fake_transcript, wav_seconds
from larkbot.media.core.images import content_key
from larkbot.runtime.bus import Bus
from larkbot.runtime.ingress import failed, fetch_endpoint
from larkbot.runtime.serve import Endpoint, model_decoder


def _request_id(data: bytes, field: str) -> str:
    try:
        parsed = json.loads(data)
    except ValueError:
        return "unknown"
    value = parsed.get(field) if isinstance(parsed, dict) else None
    return value if isinstance(value, str) and value else "unknown"


class FakeIngress:
    def __init__(
        self, bus: Bus, platform: Platform = Platform.FEISHU, files: dict[str, bytes] | None = None
    ) -> None:
        self.bus = bus
        self.platform = platform
        self.files: dict[str, bytes] = dict(files or {})
        #: ``(code, retryable)`` answered to the next downloads, in order, before any success.
        self.errors: list[tuple[str, bool]] = []
        self.downloads: list[DownloadAction] = []
        #: emoji id → the sticker that draws it (its ``file_id`` a key of :attr:`files`).
        self.emoji: dict[str, CustomEmojiSticker] = {}
        self.emoji_lookups: list[CustomEmojiAction] = []
        self._endpoint = fetch_endpoint(bus, platform.value, self._handle)

    async def start(self) -> FakeIngress:
        await self._endpoint.start()
        await self.bus.flush()
        return self

    async def stop(self) -> None:
        await self._endpoint.stop()

    def add_emoji(self, emoji_id: str, data: bytes, *, pack: str | None = None) -> CustomEmojiSticker:
        """A custom emoji drawn by a static sticker of these bytes."""
        sticker = CustomEmojiSticker(
            emoji_id=emoji_id, file_id=f"emoji_{emoji_id}", set_name=pack, format=StickerFormat.STATIC
        )
        self.files[sticker.file_id] = data
        self.emoji[emoji_id] = sticker
        return sticker

    async def _handle(self, action: ActionRequest) -> ActionResult:
        key = action.idempotency_key
        if isinstance(action, CustomEmojiAction):
            self.emoji_lookups.append(action)
            found = tuple(self.emoji[i] for i in action.emoji_ids if i in self.emoji)
            return ActionResult(idempotency_key=key, ok=True, outcome="done", custom_emoji=found)
        if not isinstance(action, DownloadAction):
            raise AssertionError(f"the fetch endpoint let a {action.kind} action through")
        self.downloads.append(action)
        if self.errors:
            code, retryable = self.errors.pop(0)
            return failed(key, code, f"scripted {code}", retryable=retryable)
        data = self.files.get(action.file_id)
        if data is None:
            return failed(key, "not_found", "no such file")
        if len(data) > action.max_bytes:
            return failed(key, "too_large", f"the file is larger than {action.max_bytes} bytes")
        blob_key = content_key(data)
        store = await self.bus.js.object_store(OBJECT_STORE_BLOBS)
        await store.put(blob_key, data)
        return ActionResult(idempotency_key=key, ok=True, outcome="done", blob_key=blob_key)


def colour_name(image: Image.Image) -> str:
    red, green, blue = ImageStat.Stat(image.convert("RGB")).mean
    if max(red, green, blue) - min(red, green, blue) < 24:
        return "grey"
    return max((red, "red"), (green, "green"), (blue, "blue"))[1]


def describe_sizes(_request: LLMRequest, images: list[Image.Image]) -> str:
    """The default description: ``"<n> image(s): 512x384 red, …"``."""
    shown = ", ".join(f"{i.width}x{i.height} {colour_name(i)}" for i in images)
    return f"{len(images)} image(s): {shown}"


class FakeVision:
    def __init__(
        self,
        bus: Bus,
        describe: Callable[[LLMRequest, list[Image.Image]], str] = describe_sizes,
        *,
        model: str = "fake-vision-1",
    ) -> None:
        self.bus = bus
        self.describe = describe
        self.model = model
        self.requests: list[LLMRequest] = []
        #: ``LLMError.category`` values answered to the next requests, in order.
        self.errors: list[str] = []
        #: When set, answers wait until it is set (a slow model).
        self.hold: asyncio.Event | None = None
        self.answered = asyncio.Condition()
        self._endpoint = Endpoint(
            bus,
            SUBJECT_LLM_GENERATE,
            QUEUE_LLM,
            model_decoder(LLMRequest),
            self._handle,
            lambda data, exc: LLMError(
                request_id=_request_id(data, "request_id"), category="invalid_request", message="bad request"
            ),
        )

    async def start(self) -> FakeVision:
        await self._endpoint.start()
        await self.bus.flush()
        return self

    async def stop(self) -> None:
        if self.hold is not None:
            self.hold.set()
        await self._endpoint.stop()

    async def wait_for_requests(self, count: int, timeout_s: float = 30.0) -> None:
        async with self.answered:
            await asyncio.wait_for(self.answered.wait_for(lambda: len(self.requests) >= count), timeout_s)

    async def _handle(self, request: LLMRequest) -> LLMResponse | LLMError:
        async with self.answered:
            self.requests.append(request)
            self.answered.notify_all()
        if self.hold is not None:
            await self.hold.wait()
        if self.errors:
            category = self.errors.pop(0)
            return LLMError(request_id=request.request_id, category=category, message=f"scripted {category}")
        images = [await self._image(part) for part in _image_parts(request)]
        text = self.describe(request, images)
        return LLMResponse(
            request_id=request.request_id,
            model_identity=self.model,
            message=AssistantMessage(parts=(TextPart(text=text),), model_identity=self.model),
            stop_reason="end_turn",
            usage=Usage(input_tokens=100 * len(images) + 50, output_tokens=len(text) // 4 + 1),
            provider_latency_ms=0,
        )

    async def _image(self, part: ImagePart) -> Image.Image:
        store = await self.bus.js.object_store(OBJECT_STORE_BLOBS)
        blob = await store.get(part.blob_key)
        image = Image.open(io.BytesIO(blob.data or b""))
        image.load()
        return image


def _image_parts(request: LLMRequest) -> list[ImagePart]:
    return [
        part
        for message in request.messages
        if isinstance(message, UserMessage)
        for part in message.parts
        if isinstance(part, ImagePart)
    ]


def heard(wav: bytes, language: str | None = None) -> str:
    """The fake provider's transcript of ``wav`` (what :class:`FakeSpeech` and the real gateway in front
    of the fake provider answer)."""
    call = TranscriptionCall(0, {}, "", "json", language, "speech.wav", "audio/wav", wav)
    return fake_transcript(call)


class FakeSpeech:
    def __init__(self, bus: Bus, *, model: str = "fake-whisper-1") -> None:
        self.bus = bus
        self.model = model
        self.requests: list[TranscriptionRequest] = []
        #: What reached the model: the audio of each request, in order.
        self.audio: list[bytes] = []
        #: ``LLMError.category`` values answered to the next requests, in order.
        self.errors: list[str] = []
        self._endpoint = Endpoint(
            bus,
            SUBJECT_LLM_TRANSCRIBE,
            QUEUE_LLM,
            model_decoder(TranscriptionRequest),
            self._handle,
            lambda data, exc: LLMError(
                request_id=_request_id(data, "request_id"), category="invalid_request", message="bad request"
            ),
        )

    async def start(self) -> FakeSpeech:
        await self._endpoint.start()
        await self.bus.flush()
        return self

    async def stop(self) -> None:
        await self._endpoint.stop()

    async def _handle(self, request: TranscriptionRequest) -> TranscriptionResponse | LLMError:
        self.requests.append(request)
        if self.errors:
            category = self.errors.pop(0)
            return LLMError(request_id=request.request_id, category=category, message=f"scripted {category}")
        store = await self.bus.js.object_store(OBJECT_STORE_BLOBS)
        audio = bytes((await store.get(request.blob_key)).data or b"")
        self.audio.append(audio)
        call = TranscriptionCall(
            len(self.audio) - 1,
            {},
            self.model,
            "json",
            request.language,
            request.filename,
            request.mime,
            audio,
        )
        return TranscriptionResponse(
            request_id=request.request_id,
            model_identity=self.model,
            text=fake_transcript(call),
            duration_s=wav_seconds(audio),
            provider_latency_ms=0,
        )
