"""Voice through the whole system: the fake Bot API and the fake Feishu serve voice notes and audio
files, the ingress downloads them (Feishu: the message resource of type ``file``), the real media worker
converts them to 16 kHz mono WAV and transcribes them through the real gateway's ``llm.transcribe``
against the fake provider's ``/audio/transcriptions``, and the rendered context shows each transcript
inside its attachment. A second identical voice note is answered from the transcript cache."""

from __future__ import annotations

import time

from tests.harness.world import World

from larkbot.canonical.names import Platform
from larkbot.media.core.audio import speech
from larkbot.testkit.botscript import BotScript
from larkbot.testkit.media import samples
from larkbot.testkit.media.fakes import heard as fake_heard
from larkbot.testkit.payloads import feishu_audio, feishu_message_id, telegram_chat, telegram_user
from larkbot.testkit.stack import until

from .conftest import FEISHU_VOICE, MEMBER, TELEGRAM_VOICE

VOICE = samples.voice_note(2.0)
SONG = samples.audio_file(1.5)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def heard(data: bytes, language: str | None) -> str:
    """What the fake provider answers for ``data`` once the worker has converted it."""
    return fake_heard(speech(data, 300).wav, language)


def telegram_message(message_id: int, kind: str, media: dict[str, object]) -> dict[str, object]:
    return {
        "message": {
            "message_id": message_id,
            "from": telegram_user(6),
            "chat": telegram_chat(TELEGRAM_VOICE),
            "date": now_ms() // 1000,
            kind: media,
        }
    }


async def test_telegram_voice_and_audio_are_transcribed_into_the_context(
    e2e: tuple[World, BotScript],
) -> None:
    w, _script = e2e
    w.telegram.add_file("voice_e2e", VOICE, "voice/file_1.oga")
    w.telegram.add_file("voice_e2e_again", VOICE, "voice/file_2.oga")
    w.telegram.add_file("song_e2e", SONG, "music/file_3.m4a")
    hits = await w.metric("media", "larkbot_media_transcript_cache_lookups_total", result="hit")
    voice = {"file_unique_id": "u_voice", "duration": 2, "mime_type": "audio/ogg", "file_size": len(VOICE)}
    w.telegram.enqueue(telegram_message(61, "voice", {"file_id": "voice_e2e", **voice}))
    w.telegram.enqueue(
        telegram_message(
            62,
            "audio",
            {
                "file_id": "song_e2e",
                "file_unique_id": "u_song",
                "duration": 2,
                "performer": "Lark",
                "title": "Tone",
                "mime_type": "audio/mp4",
                "file_size": len(SONG),
            },
        )
    )

    async def transcribed(count: int) -> bool:
        snap = await w.snapshot(Platform.TELEGRAM, str(TELEGRAM_VOICE))
        return sum("<transcript>" in s.xml for s in snap.segments) >= count

    await until(lambda: transcribed(2), "two transcripts in the rendered context", timeout_s=180)
    # The same voice note again (a forward): the same transcript, from the cache.
    w.telegram.enqueue(telegram_message(63, "voice", {"file_id": "voice_e2e_again", **voice}))
    await until(lambda: transcribed(3), "the third transcript", timeout_s=180)

    snap = await w.snapshot(Platform.TELEGRAM, str(TELEGRAM_VOICE))
    xml = "\n".join(s.xml for s in snap.segments)
    said = heard(VOICE, "en")  # the chat's language hint (chats.<key>.media.transcription.language)
    assert said.startswith("Fake transcript (en) of 2.0 s of audio")
    assert (
        f'<attachment type="voice" mime="audio/ogg" duration="2s" file-id="61:0"><transcript>{said}'
        "</transcript></attachment>"
    ) in xml
    assert (
        '<attachment type="audio" mime="audio/mp4" name="Lark - Tone" duration="2s" file-id="62:0">'
        f"<transcript>{heard(SONG, 'en')}</transcript></attachment>"
    ) in xml
    assert f'file-id="63:0"><transcript>{said}</transcript>' in xml
    assert len(w.llm.transcriptions) == 2  # the third was not transcribed again
    assert {call.language for call in w.llm.transcriptions} == {"en"}
    assert await w.metric("media", "larkbot_media_transcript_cache_lookups_total", result="hit") == hits + 1


async def test_feishu_audio_is_downloaded_as_a_file_resource_and_transcribed(
    e2e: tuple[World, BotScript],
) -> None:
    w, _script = e2e
    key = "file_v3_e2e_voice"
    data = samples.voice_note(1.0, frequency=550.0)
    w.feishu.resources[key] = data
    message_id = feishu_message_id(FEISHU_VOICE, 1)
    w.feishu.message_chats[message_id] = FEISHU_VOICE
    envelope = feishu_audio(FEISHU_VOICE, 1, key, 1000, sender=MEMBER, create_time_ms=now_ms())
    assert await w.feishu.long_connection.push(envelope) == 200

    async def rendered() -> bool:
        snap = await w.snapshot(Platform.FEISHU, FEISHU_VOICE)
        return any(s.message_id == message_id and "<transcript>" in s.xml for s in snap.segments)

    await until(rendered, "the Feishu voice message's transcript", timeout_s=180)
    snap = await w.snapshot(Platform.FEISHU, FEISHU_VOICE)
    (segment,) = [s for s in snap.segments if s.message_id == message_id]
    assert 'type="voice" duration="1s"' in segment.xml
    assert f"<transcript>{heard(data, None)}</transcript>" in segment.xml
    downloads = [r for r in w.feishu.requests if r.path.endswith(f"/resources/{key}")]
    assert downloads
    assert {r.query.get("type") for r in downloads} == {"file"}
