"""``transcript`` jobs on a real JetStream server: a voice note generated here (OGG/Opus) is converted to
16 kHz mono WAV, transcribed through ``llm.transcribe`` (a double answering the fake provider's
deterministic transcript) and cached by the file's hash; corrupt, oversized and overlong audio get typed
failures and the worker keeps serving."""

from __future__ import annotations

import contextlib
import io
import wave
from collections.abc import AsyncIterator
from typing import Any

import pytest

from larkbot.canonical.names import Platform, Service
from larkbot.media.app import MediaService
from larkbot.media.core import audio, images
from larkbot.media.core.errors import TooLong, Unreadable
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import parse_config
from larkbot.runtime.service import built
from larkbot.testkit.media import samples
from larkbot.testkit.media.fakes import FakeIngress, FakeSpeech, FakeVision, heard

from .test_media_service import Results, Stack, counter, job

VOICE = samples.voice_note(2.0)
M4A = samples.audio_file(1.5)


def expected(wav: bytes, language: str | None = None) -> str:
    return heard(wav, language)


@contextlib.asynccontextmanager
async def media(
    bus: Bus, nats_url: str, *, transcription: bool = True
) -> AsyncIterator[tuple[Stack, FakeSpeech]]:
    llm: dict[str, Any] = {
        "endpoints": {
            "whisper": {"format": "openai-transcription", "base_url": "http://127.0.0.1:9/v1", "model": "w"},
        }
    }
    if transcription:
        llm["transcription"] = "whisper"
    cfg = parse_config({"llm": llm, "services": {"media": {"http_host": "127.0.0.1"}}})
    results = Results()
    sub = await bus.nc.subscribe("media.results.>", cb=results.on_msg)
    files = {
        "voice_1": VOICE,
        "m4a_1": M4A,
        "garbage": b"OggS" + bytes(range(256)) * 8,
        "video": samples.mp4(),
    }
    ingress = await FakeIngress(bus, Platform.TELEGRAM, files).start()
    vision = await FakeVision(bus).start()
    speech = await FakeSpeech(bus).start()
    try:
        async with built(Service.MEDIA, MediaService(cfg, concurrency=2), cfg, nats_url=nats_url) as service:
            yield Stack(bus, service.components, service.ctx, ingress, vision, results), speech
    finally:
        await speech.stop()
        await vision.stop()
        await ingress.stop()
        await sub.unsubscribe()


def voice_job(job_id: str = "tr-1", file_id: str = "voice_1", **fields: Any) -> Any:
    fields.setdefault("attachment_type", "voice")
    fields.setdefault("chat_id", "-100")
    return job(job_id, "transcript", file_id, platform="telegram", **fields)


async def test_a_voice_note_is_transcribed_once_and_then_answered_from_the_cache(
    bus: Bus, nats_url: str
) -> None:
    wav = audio.speech(VOICE, 300).wav
    hits = counter("larkbot_media_transcript_cache_lookups_total", result="hit")
    ok = counter("larkbot_media_transcriptions_total", outcome="ok")
    async with media(bus, nats_url) as (stack, speech):
        result = await stack.run(voice_job(language="de", duration_s=2.0, size_bytes=len(VOICE)))
        assert result.ok, result.error
        assert result.alt_text == expected(wav, "de")
        assert result.alt_text.startswith("Fake transcript (de) of 2.0 s of audio")
        assert (result.duration_ms, result.content_hash) == (2000, images.content_key(VOICE))
        (request,) = speech.requests
        assert (request.endpoint, request.mime, request.language, request.chat_key) == (
            "whisper",
            "audio/wav",
            "de",
            "telegram:-100",
        )
        assert speech.audio == [wav]
        with wave.open(io.BytesIO(wav)) as heard:
            assert (heard.getnchannels(), heard.getframerate(), heard.getsampwidth()) == (1, 16_000, 2)
        (download,) = stack.ingress.downloads
        assert (download.file_id, download.attachment_type) == ("voice_1", "voice")

        # The same file again (a forward into another chat): no decode, no model call, same answer.
        again = await stack.run(voice_job("tr-2", chat_id="-200", content_hash=result.content_hash))
        assert again.ok
        assert (again.alt_text, again.duration_ms) == (result.alt_text, 2000)
        assert len(speech.requests) == 1
        assert len(stack.ingress.downloads) == 1
    assert counter("larkbot_media_transcript_cache_lookups_total", result="hit") == hits + 1
    assert counter("larkbot_media_transcriptions_total", outcome="ok") == ok + 1


async def test_audio_files_and_the_chats_endpoint(bus: Bus, nats_url: str) -> None:
    async with media(bus, nats_url) as (stack, speech):
        result = await stack.run(
            voice_job("tr-m4a", "m4a_1", attachment_type="audio", transcription_endpoint="chat-whisper")
        )
        assert result.ok, result.error
        assert result.alt_text == expected(audio.speech(M4A, 300).wav)
        assert speech.requests[0].endpoint == "chat-whisper"


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"file_id": "garbage"}, "unreadable"),
        ({"file_id": "video"}, "unreadable"),  # a video without sound
        ({"size_bytes": 21 * 1024 * 1024}, "too_large"),  # over the Bot API's 20 MB: never downloaded
        ({"max_bytes": 1000}, "too_large"),  # the chat's limit, found by the download
        ({"duration_s": 400.0}, "too_long"),  # the declared duration, over the default 300 s
        ({"max_duration_s": 1}, "too_long"),  # the real duration, over the chat's limit
    ],
)
async def test_bad_and_oversized_audio_get_typed_failures_and_the_worker_keeps_serving(
    bus: Bus, nats_url: str, fields: dict[str, Any], code: str
) -> None:
    async with media(bus, nats_url) as (stack, speech):
        failed = await stack.run(voice_job("tr-bad", **fields))
        assert failed.ok is False
        assert failed.error is not None
        assert (failed.error.code, failed.error.retryable) == (code, False)
        if "size_bytes" in fields or "duration_s" in fields:
            assert stack.ingress.downloads == []
        assert speech.requests == []
        fine = await stack.run(voice_job("tr-fine"))
        assert fine.ok, fine.error


async def test_model_errors_are_retryable_only_when_retrying_can_help(bus: Bus, nats_url: str) -> None:
    async with media(bus, nats_url) as (stack, speech):
        speech.errors = ["transient", "invalid_request"]
        first = await stack.run(voice_job("tr-e1"))
        second = await stack.run(voice_job("tr-e2"))
        third = await stack.run(voice_job("tr-e3"))
    assert first.error is not None
    assert (first.error.code, first.error.retryable) == ("transcription", True)
    assert second.error is not None
    assert (second.error.code, second.error.retryable) == ("transcription", False)
    assert third.ok
    assert third.alt_text


async def test_without_a_transcription_endpoint_nothing_is_downloaded(bus: Bus, nats_url: str) -> None:
    async with media(bus, nats_url, transcription=False) as (stack, speech):
        result = await stack.run(voice_job())
        assert result.error is not None
        assert (result.error.code, result.error.retryable) == ("unsupported", False)
        assert stack.ingress.downloads == []
        assert speech.requests == []


def test_speech_is_deterministic_bounded_and_typed() -> None:
    one = audio.speech(VOICE, 300)
    assert one == audio.speech(VOICE, 300)
    assert one.duration_ms == 2000
    assert len(one.wav) == 44 + 2 * 16_000 * 2
    with pytest.raises(TooLong):
        audio.speech(VOICE, 1)
    with pytest.raises(Unreadable):
        audio.speech(VOICE[: len(VOICE) // 8], 300)
    with pytest.raises(Unreadable):
        audio.speech(b"", 300)
