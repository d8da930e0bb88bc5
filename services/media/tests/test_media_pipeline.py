"""The real admission path: the pipeline service and the media workers in-process on one bus.

A photo message commits only once its alt text exists, the messages behind it wait with it, and the alt
text is what the rendered context shows in place of the picture. A final refusal lets the event through.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nats.aio.msg import Msg

from larkbot.canonical.codec import decode
from larkbot.canonical.content import Attachment, AttachmentType
from larkbot.canonical.context import AppendOp, ContextSnapshot, ContextUpdate, Segment, SnapshotRequest
from larkbot.canonical.events import CanonicalEvent, MessageEvent
from larkbot.canonical.names import (
    CONSUMER_PIPELINE,
    HEADER_DL_REASON,
    OBJECT_STORE_BLOBS,
    STREAM_DEAD_LETTER,
    STREAM_MEDIA,
    SUBJECT_PIPELINE_SNAPSHOT,
    Platform,
    Service,
    context_subject,
    dead_letter_subject,
    events_subject,
    msg_id,
)
from larkbot.media.app import MediaService
from larkbot.media.core import images
from larkbot.pipeline.app import Pipeline, PipelineService
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LarkbotConfig, parse_config
from larkbot.runtime.service import built
from larkbot.testkit.media import samples
from larkbot.testkit.media.fakes import FakeIngress, FakeVision
from larkbot.testkit.pipeline import synthetic as s

from .test_media_service import GIF, PHOTO, TIMEOUT, opened

# Telegram: a Feishu sticker gets no media job (Feishu serves bots no sticker), a Telegram one does.
CHAT = "-1001000000042"
CLIP = samples.mp4([(255, 0, 0)] * 2 + [(0, 0, 255)] * 2, fps=10)


def config(tmp_path: Path, *, vision: bool) -> LarkbotConfig:
    llm: dict[str, object] = {
        "endpoints": {"vision-ep": {"format": "openai-chat", "base_url": "http://127.0.0.1:9", "model": "m"}}
    }
    if vision:
        llm["vision"] = "vision-ep"
    database = f"sqlite+aiosqlite:///{tmp_path / 'pipeline.db'}"
    return parse_config(
        {
            "utc_offset_min": 480,
            "llm": llm,
            "services": {
                "pipeline": {"database_url": database, "http_host": "127.0.0.1"},
                "media": {"http_host": "127.0.0.1"},
            },
            "chats": {"default": {}, f"telegram:{CHAT}": {}},
        }
    )


class Context:
    """Segments appended to the chat's rendered context, as a consumer of ``context.>`` sees them."""

    def __init__(self) -> None:
        self.segments: list[Segment] = []
        self.changed = asyncio.Condition()

    async def on_msg(self, msg: Msg) -> None:
        update = decode(msg.data, ContextUpdate, dict(msg.headers or {}))
        async with self.changed:
            for op in update.ops:
                assert isinstance(op, AppendOp), op  # these scenarios only ever append
                self.segments.extend(op.segments)
            self.changed.notify_all()

    async def until(self, count: int) -> list[Segment]:
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(lambda: len(self.segments) >= count), TIMEOUT)
        return self.segments


@dataclass
class Stack:
    bus: Bus
    context: Context
    ingress: FakeIngress
    vision: FakeVision
    pipeline: Pipeline

    async def publish(self, *events: CanonicalEvent) -> None:
        for event in events:
            subject = events_subject(event.platform.value, event.chat_id)
            await self.bus.publish(subject, event, msg_id=msg_id(event.platform.value, event.dedup_key))

    async def snapshot(self) -> ContextSnapshot:
        request = SnapshotRequest(platform=Platform.TELEGRAM, chat_id=CHAT)
        return await self.bus.request(SUBJECT_PIPELINE_SNAPSHOT, request, ContextSnapshot, timeout_s=TIMEOUT)

    async def blob(self, key: str) -> bytes:
        store = await self.bus.js.object_store(OBJECT_STORE_BLOBS)
        return bytes((await store.get(key)).data or b"")


@contextlib.asynccontextmanager
async def stack(bus: Bus, nats_url: str, tmp_path: Path, *, vision: bool) -> AsyncIterator[Stack]:
    cfg = config(tmp_path, vision=vision)
    context = Context()
    sub = await bus.nc.subscribe(context_subject("telegram", CHAT), cb=context.on_msg)
    files = {
        "img_1": PHOTO,
        "gif_1": GIF,
        "tgs_1": samples.tgs(),
        "bad_1": samples.webm_header(),
        "vid_1": CLIP,
    }
    ingress = await FakeIngress(bus, Platform.TELEGRAM, files).start()
    model = await FakeVision(bus).start()
    try:
        async with (
            built(Service.MEDIA, MediaService(cfg, concurrency=2), cfg, nats_url=nats_url),
            built(Service.PIPELINE, PipelineService(cfg), cfg, nats_url=nats_url) as pipeline,
        ):
            await asyncio.wait_for(pipeline.components.ready.wait(), TIMEOUT)
            yield Stack(bus, context, ingress, model, pipeline.components)
    finally:
        await model.stop()
        await ingress.stop()
        await sub.unsubscribe()


def message(message_id: str, text: str = "", **fields: Any) -> MessageEvent:
    return s.message(message_id, text, platform=Platform.TELEGRAM, chat=CHAT, **fields)


def sticker(file_id: str) -> Attachment:
    return Attachment(type=AttachmentType.STICKER, file_id=file_id, sticker_emoji="😺")


async def test_a_photo_commits_only_once_its_alt_text_is_ready(
    bus: Bus, nats_url: str, tmp_path: Path
) -> None:
    async with stack(bus, nats_url, tmp_path, vision=True) as st:
        st.vision.hold = asyncio.Event()
        await st.publish(
            message("om_1", "look at this", attachments=(s.photo("img_1"),)),
            message("om_2", "behind the photo"),
        )
        await st.vision.wait_for_requests(1)  # downloaded, thumbnailed, now with the model
        assert (await st.snapshot()).segments == ()  # neither the photo nor what follows it committed
        assert st.context.segments == []

        st.vision.hold.set()
        first, second = await st.context.until(2)
        alt = "1 image(s): 512x384"
        assert '>look at this<image mime="image/jpeg"' in first.xml.replace("\n", "")
        assert alt in first.xml
        assert first.xml.index(alt) > first.xml.index("<image")
        assert first.image_parts == ()  # the alt text replaces the picture
        assert "behind the photo" in second.xml
        snap = await st.snapshot()
        assert [seg.xml for seg in snap.segments] == [first.xml, second.xml]

        stored = [p async for _, p in st.pipeline.repo.chat_events("telegram", CHAT)]
        thumbnail_key = images.content_key(images.thumbnail(PHOTO))
        assert f'"thumbnail_key":"{thumbnail_key}"' in stored[0]
        assert f'"content_hash":"{images.content_key(PHOTO)}"' in stored[0]
        assert alt not in stored[0]  # alt text is cached, never stored in the event
        assert opened(await st.blob(thumbnail_key)).format == "WEBP"


async def test_stickers_show_their_thumbnail_and_refusals_let_events_through(
    bus: Bus, nats_url: str, tmp_path: Path
) -> None:
    async with stack(bus, nats_url, tmp_path, vision=False) as st:
        dead = await bus.js.subscribe(
            dead_letter_subject(STREAM_MEDIA, CONSUMER_PIPELINE), stream=STREAM_DEAD_LETTER
        )
        await st.publish(
            message("om_1", attachments=(sticker("gif_1"),)),
            message("om_2", attachments=(sticker("tgs_1"),)),
            message("om_3", attachments=(s.photo("img_1"),)),
            message("om_4", attachments=(sticker("bad_1"),)),
        )
        gif, tgs, photo, bad = await st.context.until(4)

        (part,) = gif.image_parts  # no model: the thumbnail of the middle frame stands in
        assert part.mime == "image/webp"
        thumb = opened(await st.blob(part.blob_key))
        assert thumb.width * thumb.height <= 75_000
        assert "<sticker" in gif.xml

        (tgs_part,) = tgs.image_parts  # rendered by rlottie: its thumbnail stands in too
        assert opened(await st.blob(tgs_part.blob_key)).mode == "RGBA"
        assert "<sticker" in tgs.xml
        assert photo.image_parts == ()  # no vision endpoint: alt_text unsupported, event committed
        assert bad.image_parts == ()  # an unreadable WebM: committed from metadata alone
        assert ">😺</sticker>" in bad.xml
        reasons = []
        for _ in range(2):
            msg = await dead.next_msg(timeout=TIMEOUT)
            reasons.append((msg.headers or {})[HEADER_DL_REASON])
        assert sorted(reasons) == ["media:unreadable", "media:unsupported"]
        await dead.unsubscribe()
        # none for the photo
        assert sorted(d.file_id for d in st.ingress.downloads) == ["bad_1", "gif_1", "tgs_1"]


async def test_a_video_commits_with_the_description_of_its_frames(
    bus: Bus, nats_url: str, tmp_path: Path
) -> None:
    async with stack(bus, nats_url, tmp_path, vision=True) as st:
        video = Attachment(type=AttachmentType.VIDEO, file_id="vid_1", mime="video/mp4", duration_s=1)
        await st.publish(message("om_1", "watch", attachments=(video,)), message("om_2", "after it"))
        first, second = await st.context.until(2)
        alt = "2 image(s): 64x48 red, 64x48 blue"  # 4 frames, red red blue blue: two distinct picks
        assert alt in first.xml
        assert '<attachment type="video"' in first.xml
        assert first.image_parts == ()  # the description replaces the frames
        assert "after it" in second.xml
        (request,) = st.vision.requests
        assert "Frame 2 at 0.2 s:" in str(request.messages[0])
        assert "of one video" in str(request.messages[0])
