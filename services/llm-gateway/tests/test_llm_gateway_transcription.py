"""``llm.transcribe``: the audio read from the object store, sent as OpenAI's multipart form to
``/audio/transcriptions`` (the fake provider answers deterministically), typed errors, retries, fallbacks,
masking, and speech-to-text endpoints kept apart from chat ones."""

from __future__ import annotations

import io
import time
import wave
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest

from larkbot.canonical.llm import LLMError
from larkbot.canonical.names import OBJECT_STORE_BLOBS, SUBJECT_LLM_TRANSCRIBE, Service
from larkbot.canonical.transcription import (
    TRANSCRIPTION_REPLY_ADAPTER,
    TranscriptionRequest,
    TranscriptionResponse,
)
from larkbot.llm_gateway.app import GatewayService
from larkbot.llm_gateway.core.transcription import decode_reply, encode_form
from larkbot.llm_gateway.errors import AudioUnavailable, WireError
from larkbot.llm_gateway.fake import Fail, FakeProvider, TranscriptionCall, fake_transcript
from larkbot.llm_gateway.gateway import Gateway
from larkbot.llm_gateway.transcribe import Transcriber
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LarkbotConfig, LlmSettings
from larkbot.runtime.service import built

from .test_llm_gateway_contract import FAST, KEY, StaticImages, request


def wav(seconds: float, rate: int = 16_000) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"\x00\x01" * int(seconds * rate))
    return out.getvalue()


AUDIO = wav(2.0)


def ask(
    endpoint: str = "whisper", *, language: str | None = "de", request_id: str = "tr-1"
) -> TranscriptionRequest:
    return TranscriptionRequest(
        request_id=request_id,
        endpoint=endpoint,
        blob_key="sha256:voice",
        mime="audio/wav",
        filename="voice.wav",
        language=language,
        deadline_ms=time.time_ns() // 1_000_000 + 20_000,
        chat_key="telegram:-100",
    )


class Audio:
    def __init__(self, blobs: dict[str, bytes]) -> None:
        self.blobs = blobs

    async def read(self, key: str) -> bytes:
        if key not in self.blobs:
            raise AudioUnavailable(f"audio {key} is not in the blobs store")
        return self.blobs[key]


def endpoint(url: str, **extra: Any) -> dict[str, Any]:
    return {
        "format": "openai-transcription",
        "base_url": url,
        "model": "whisper-1",
        "api_key": KEY,
        "fake": True,
        **extra,
    }


@asynccontextmanager
async def transcribers(
    scripts: dict[str, Any], *, fallbacks: dict[str, list[str]] | None = None, **extra: Any
) -> AsyncIterator[tuple[Transcriber, dict[str, FakeProvider]]]:
    async with AsyncExitStack() as stack:
        fakes: dict[str, FakeProvider] = {}
        endpoints: dict[str, Any] = {}
        for name, script in scripts.items():
            fakes[name] = await stack.enter_async_context(FakeProvider(api_key=KEY, transcribe=script))
            endpoints[name] = endpoint(fakes[name].url, **extra)
        endpoints["chat"] = {"format": "openai-chat", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
        settings = LlmSettings.model_validate({"endpoints": endpoints, "fallbacks": fallbacks or {}})
        gateway = Gateway(settings, StaticImages(), policy=FAST, min_attempt_s=0.05)
        try:
            yield Transcriber(gateway, Audio({"sha256:voice": AUDIO})), fakes
        finally:
            await gateway.aclose()


async def test_the_audio_goes_as_a_multipart_form_and_the_transcript_comes_back() -> None:
    async with transcribers({"whisper": fake_transcript}, response_format="verbose_json") as (t, fakes):
        reply = await t.transcribe(ask())
    assert isinstance(reply, TranscriptionResponse), reply
    call = fakes["whisper"].transcriptions[0]
    assert (call.model, call.response_format, call.language) == ("whisper-1", "verbose_json", "de")
    assert (call.filename, call.mime, call.audio) == ("voice.wav", "audio/wav", AUDIO)
    assert call.headers["authorization"] == f"Bearer {KEY}"
    assert reply.text == fake_transcript(call)
    assert reply.text.startswith("Fake transcript (de) of 2.0 s of audio ")
    assert (reply.language, reply.duration_s) == ("de", 2.0)
    assert reply.model_identity.startswith("openai-transcription:127.0.0.1:")
    assert reply.model_identity.endswith("/whisper-1")


async def test_json_is_the_default_response_format_and_carries_text_only() -> None:
    async with transcribers({"whisper": lambda _call: "  hello \n there "}) as (t, fakes):
        reply = await t.transcribe(ask(language=None))
    assert isinstance(reply, TranscriptionResponse), reply
    assert fakes["whisper"].transcriptions[0].response_format == "json"
    assert fakes["whisper"].transcriptions[0].language is None
    assert (reply.text, reply.language, reply.duration_s) == ("hello there", None, None)


async def test_transient_failures_are_retried_then_fall_back() -> None:
    seen: list[int] = []

    def flaky(call: TranscriptionCall) -> str | Fail:
        seen.append(call.index)
        return Fail(503, "overloaded") if call.index == 0 else "second time"

    async with transcribers({"whisper": flaky}) as (t, _):
        retried = await t.transcribe(ask())
    assert isinstance(retried, TranscriptionResponse), retried
    assert (retried.text, seen) == ("second time", [0, 1])

    down = lambda _call: Fail(503, "overloaded")  # noqa: E731
    async with transcribers(
        {"whisper": down, "local": lambda _c: "from local"}, fallbacks={"transcription": ["local"]}
    ) as (
        t,
        _,
    ):
        fell = await t.transcribe(ask())
    assert isinstance(fell, TranscriptionResponse), fell
    assert (fell.text, fell.fallback_from, fell.endpoint) == ("from local", ("whisper",), "local")


@pytest.mark.parametrize(
    ("changes", "category", "says"),
    [
        ({"endpoint": "nope"}, "config", "no LLM endpoint named 'nope'"),
        ({"endpoint": "chat"}, "config", "not a speech-to-text endpoint"),
        ({"blob_key": "sha256:gone"}, "invalid_request", "sha256:gone"),
        ({"deadline_ms": 1}, "deadline", "deadline"),
    ],
)
async def test_typed_errors(changes: dict[str, Any], category: str, says: str) -> None:
    # Built here, not at collection: the deadline is 20 s from now.
    async with transcribers({"whisper": fake_transcript}) as (t, fakes):
        reply = await t.transcribe(ask().model_copy(update=changes))
    assert isinstance(reply, LLMError), reply
    assert reply.category == category
    assert says in reply.message
    assert fakes["whisper"].transcriptions == []


async def test_a_refused_key_is_config_and_never_echoed() -> None:
    async with FakeProvider(api_key="sk-the-right-key-000000") as fake:
        settings = LlmSettings.model_validate({"endpoints": {"whisper": endpoint(fake.url)}})
        gateway = Gateway(settings, StaticImages(), policy=FAST, min_attempt_s=0.05)
        try:
            reply = await Transcriber(gateway, Audio({"sha256:voice": AUDIO})).transcribe(ask())
        finally:
            await gateway.aclose()
    assert isinstance(reply, LLMError)
    assert reply.category == "config"
    assert KEY not in reply.message


async def test_a_speech_to_text_endpoint_answers_generate_with_config() -> None:
    async with transcribers({"whisper": fake_transcript}) as (t, _):
        reply = await t.gateway.generate(request().model_copy(update={"endpoint": "whisper"}))
    assert isinstance(reply, LLMError)
    assert reply.category == "config"
    assert "speech-to-text" in reply.message


def test_the_form_is_deterministic_and_the_reply_read_leniently() -> None:
    one = encode_form(
        model="m", audio=AUDIO, mime="audio/wav", filename='a"b.wav', language=None, response_format="json"
    )
    assert one == encode_form(
        model="m", audio=AUDIO, mime="audio/wav", filename='a"b.wav', language=None, response_format="json"
    )
    body, content_type = one
    boundary = content_type.split("boundary=")[1]
    assert body.endswith(f"--{boundary}--\r\n".encode())
    assert b'filename="a\\"b.wav"' in body
    assert b'name="language"' not in body
    found = decode_reply({"text": "hi", "language": "german", "duration": 3.5, "segments": []})
    assert (found.text, found.language, found.duration_s) == ("hi", "german", 3.5)
    assert decode_reply({"text": "x", "duration": "NaN"}).duration_s is None
    with pytest.raises(WireError):
        decode_reply({"transcript": "x"})


async def test_transcribe_over_the_bus_with_object_store_audio(bus: Bus, nats_url: str) -> None:
    store = await bus.js.object_store(OBJECT_STORE_BLOBS)
    await store.put("sha256:voice", AUDIO)
    async with FakeProvider() as fake:
        config = LarkbotConfig(
            llm=LlmSettings.model_validate({"endpoints": {"whisper": endpoint(fake.url, api_key=None)}})
        )
        async with built(Service.LLM_GATEWAY, GatewayService(config), config, nats_url=nats_url):
            reply = await bus.request_as(
                SUBJECT_LLM_TRANSCRIBE, ask(), TRANSCRIPTION_REPLY_ADAPTER, timeout_s=20
            )
            raw = await bus.nc.request(SUBJECT_LLM_TRANSCRIBE, b'{"request_id":"bad-2"}', timeout=20)
    assert isinstance(reply, TranscriptionResponse), reply
    assert reply.text == fake_transcript(fake.transcriptions[0])
    bad = TRANSCRIPTION_REPLY_ADAPTER.validate_json(raw.data)
    assert isinstance(bad, LLMError)
    assert (bad.request_id, bad.category) == ("bad-2", "invalid_request")
