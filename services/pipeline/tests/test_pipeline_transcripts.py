"""Voice, audio and video notes: transcript jobs carry the chat's media settings, the transcript renders
inside the attachment (prefix-stable: it is there before the event commits, and replay equals live), and a
chat's limits travel on every media job."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from larkbot.canonical.content import Attachment, AttachmentType
from larkbot.canonical.media import MediaJob, MediaResult
from larkbot.canonical.names import Platform
from larkbot.pipeline.core import Projection, RenderParams, replay
from larkbot.pipeline.core.admission import Admission, MediaPolicy, jobs_for
from larkbot.pipeline.settings import media_policy
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import MEDIA_MAX_BYTES, parse_config
from larkbot.testkit.pipeline import synthetic as s
from larkbot.testkit.pipeline.fakes import FakeMediaWorker, fail, succeed

from .test_pipeline_service import config, pipeline, publish, watching

TG = RenderParams(Platform.TELEGRAM, "-100", bot_user_id="42", deployment_utc_offset_min=480)
POLICY = MediaPolicy(
    vision_endpoint="eyes", transcription_endpoint="whisper", max_frames=3, max_bytes=1000, language="de"
)
WHISPER = {"format": "openai-transcription", "base_url": "http://127.0.0.1:9/v1", "model": "w"}
CHAT = {"format": "openai-chat", "base_url": "http://127.0.0.1:9/v1", "model": "m"}


def video_note() -> Attachment:
    return Attachment(type=AttachmentType.VIDEO_NOTE, file_id="vn_1", mime="video/mp4", duration_s=5.0)


def test_voice_and_video_notes_get_transcript_jobs_carrying_the_chats_policy() -> None:
    event = s.message(
        "5", attachments=(s.voice(), video_note(), s.photo()), chat="-100", platform=Platform.TELEGRAM
    )
    jobs = {(job.attachment_index, job.transform): job for job in jobs_for(event, POLICY)}
    assert set(jobs) == {(0, "transcript"), (1, "frames"), (1, "transcript"), (2, "alt_text")}
    voice = jobs[0, "transcript"]
    assert (voice.transcription_endpoint, voice.language, voice.vision_endpoint) == ("whisper", "de", None)
    assert (voice.size_bytes, voice.duration_s, voice.max_bytes, voice.max_frames) == (
        19_000,
        2.0,
        1000,
        None,
    )
    frames = jobs[1, "frames"]
    assert (frames.max_frames, frames.vision_endpoint, frames.transcription_endpoint) == (3, "eyes", None)
    assert frames.duration_s is None
    assert jobs[2, "alt_text"].max_bytes == 1000
    # Without a transcription endpoint (or with transcription off) nothing is asked to be heard.
    quiet = jobs_for(event, MediaPolicy(vision_endpoint="eyes"))
    assert [(job.attachment_index, job.transform) for job in quiet] == [(1, "frames"), (2, "alt_text")]


def test_the_transcript_renders_inside_the_attachment_and_replay_equals_live() -> None:
    admission: Admission[str] = Admission()
    chat = ("telegram", "-100")
    event = s.message(
        "5", "listen", attachments=(s.voice(), video_note()), chat="-100", platform=Platform.TELEGRAM
    )
    jobs = {
        (j.attachment_index, j.transform): j for j in admission.admit(chat, event, "t", 0.0, policy=POLICY)
    }
    admission.result(succeed(jobs[0, "transcript"], 'Meet at 8 <sharp> & "on time"'), 1.0)
    admission.result(succeed(jobs[1, "frames"], "a face talking"), 1.0)
    admission.result(succeed(jobs[1, "transcript"], "hello from the circle"), 1.0)
    (pending,) = admission.take_ready()
    completed, alts = pending.completed()
    voice_hash = f"sha256:{jobs[0, 'transcript'].job_id}"
    assert (f"transcript:{voice_hash}", 'Meet at 8 <sharp> & "on time"') in alts
    live = Projection(TG, alt_texts=dict(alts))
    live.apply(completed, 1)
    xml = live.xml()
    assert (
        '<attachment type="voice" mime="audio/ogg" duration="2s" file-id="5:0">'
        '<transcript>Meet at 8 &lt;sharp&gt; &amp; "on time"</transcript></attachment>'
    ) in xml
    assert "a face talking<transcript>hello from the circle</transcript></attachment>" in xml
    assert replay([(1, completed)], TG, alt_texts=dict(alts)).xml() == xml


def test_a_failed_transcript_lets_the_message_through_without_one() -> None:
    admission: Admission[str] = Admission()
    event = s.message("5", attachments=(s.voice(),), chat="-100", platform=Platform.TELEGRAM)
    (job,) = admission.admit(("telegram", "-100"), event, "t", 0.0, policy=POLICY)
    assert admission.result(fail(job, "too_long", retryable=False), 1.0) is True
    (pending,) = admission.take_ready()
    completed, alts = pending.completed()
    assert alts == []
    projection = Projection(TG)
    projection.apply(completed, 1)
    assert '<attachment type="voice" mime="audio/ogg" duration="2s" file-id="5:0"/>' in projection.xml()


def test_media_policy_reads_the_chats_settings_and_routes() -> None:
    cfg = parse_config(
        {
            "llm": {
                "endpoints": {"whisper": WHISPER, "local": WHISPER, "eyes": CHAT},
                "transcription": "whisper",
                "routes": [{"chats": ["telegram:-2*"], "purpose": "transcription", "endpoint": "local"}],
            },
            "chats": {
                "default": {"media": {"transcription": {"language": "de"}}},
                "telegram:-100": {"media": {"max_frames": 2, "max_bytes": 5_000_000}},
                "telegram:-200": {},
                "telegram:-300": {"media": {"transcription": {"enabled": False}}},
            },
        },
        {},
    )
    assert media_policy(cfg, "telegram", "-100") == MediaPolicy(
        None, "whisper", max_frames=2, max_bytes=5_000_000, language="de", max_duration_s=300
    )
    assert media_policy(cfg, "telegram", "-200").transcription_endpoint == "local"
    assert media_policy(cfg, "telegram", "-300").transcription_endpoint is None
    assert media_policy(cfg, "telegram", "-999") == MediaPolicy()
    assert media_policy(cfg, "telegram", "-200").max_bytes == MEDIA_MAX_BYTES


async def test_a_voice_note_waits_for_its_transcript_and_renders_it(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    if "postgres" in database_url:
        pytest.skip("admission does not depend on the database; the sqlite run covers it")

    async def behaviour(job: MediaJob, attempt: int) -> MediaResult:
        return succeed(job, f"transcript of {job.file_id}")

    llm: dict[str, Any] = {"endpoints": {"whisper": WHISPER}, "transcription": "whisper"}
    chats = {
        "default": {"media": {"transcription": {"language": "en", "max_duration_s": 60}}},
        "telegram:-100": {},
        "telegram:-300": {"media": {"transcription": {"enabled": False}}},
    }
    worker = FakeMediaWorker(bus, behaviour)
    task = asyncio.create_task(worker.run())
    cfg = config(database_url, chats=chats, llm=llm)
    try:
        async with watching(bus) as updates, pipeline(bus, nats_url, cfg):
            await publish(
                bus,
                s.message(
                    "7", "hear this", attachments=(s.voice(),), chat="-100", platform=Platform.TELEGRAM
                ),
                s.message(
                    "8", "not heard", attachments=(s.voice("v2"),), chat="-300", platform=Platform.TELEGRAM
                ),
            )
            await updates.until(lambda: "-100" in updates.copies and "-300" in updates.copies)
            (heard,) = updates.copies["-100"]
            (unheard,) = updates.copies["-300"]
        assert "<transcript>transcript of voice_1</transcript></attachment>" in heard.xml
        assert "<transcript>" not in unheard.xml
        (job,) = worker.jobs
        assert (job.chat_id, job.transform, job.transcription_endpoint) == ("-100", "transcript", "whisper")
        assert (job.language, job.max_duration_s, job.duration_s) == ("en", 60, 2.0)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)
