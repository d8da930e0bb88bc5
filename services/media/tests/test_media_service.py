"""The media workers on a real JetStream server, with doubles answering ``actions.feishu`` and
``llm.generate``: jobs in, typed results out, content-addressed outputs, the alt-text cache."""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from nats.aio.msg import Msg
from PIL import Image
from prometheus_client import REGISTRY

from larkbot.canonical.codec import decode, headers_for
from larkbot.canonical.errors import ConfigError
from larkbot.canonical.media import MediaJob, MediaResult, ReadImageRequest, ReadImageResponse
from larkbot.canonical.names import (
    CONSUMER_MEDIA,
    HEADER_DL_REASON,
    OBJECT_STORE_BLOBS,
    STREAM_DEAD_LETTER,
    STREAM_MEDIA,
    SUBJECT_MEDIA_READ_IMAGE,
    Platform,
    Service,
    dead_letter_subject,
    media_job_subject,
)
from larkbot.media.app import MediaService, MediaWorkers
from larkbot.media.core import images
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LarkbotConfig, parse_config
from larkbot.runtime.service import ServiceContext, built
from larkbot.testkit.media import samples
from larkbot.testkit.media.fakes import FakeIngress, FakeVision

TIMEOUT = 30.0
PHOTO = samples.photo(1600, 1200, seed=7)
GIF = samples.animation(12, (320, 240))


def config(*, vision: bool = True) -> LarkbotConfig:
    llm: dict[str, Any] = {
        "endpoints": {"vision-ep": {"format": "openai-chat", "base_url": "http://127.0.0.1:9", "model": "m"}}
    }
    if vision:
        llm["vision"] = "vision-ep"
    return parse_config({"llm": llm, "services": {"media": {"http_host": "127.0.0.1"}}})


class Results:
    """Every ``MediaResult`` published on ``media.results.>``, by job id."""

    def __init__(self) -> None:
        self.by_job: dict[str, list[MediaResult]] = {}
        self.changed = asyncio.Condition()

    async def on_msg(self, msg: Msg) -> None:
        result = decode(msg.data, MediaResult, dict(msg.headers or {}))
        async with self.changed:
            self.by_job.setdefault(result.job_id, []).append(result)
            self.changed.notify_all()

    async def get(self, job_id: str, count: int = 1) -> MediaResult:
        async with self.changed:
            await asyncio.wait_for(
                self.changed.wait_for(lambda: len(self.by_job.get(job_id, [])) >= count), TIMEOUT
            )
        return self.by_job[job_id][count - 1]


@dataclass
class Stack:
    bus: Bus
    workers: MediaWorkers
    ctx: ServiceContext
    ingress: FakeIngress
    vision: FakeVision
    results: Results
    submitted: int = 0

    async def run(self, job: MediaJob) -> MediaResult:
        """Submit ``job`` as the pipeline does and wait for its next result."""
        self.submitted += 1
        count = len(self.results.by_job.get(job.job_id, [])) + 1
        await self.bus.publish(media_job_subject(job.transform), job, msg_id=f"{job.job_id}:{self.submitted}")
        return await self.results.get(job.job_id, count)

    async def blob(self, key: str) -> bytes:
        store = await self.bus.js.object_store(OBJECT_STORE_BLOBS)
        return bytes((await store.get(key)).data or b"")


@contextlib.asynccontextmanager
async def media(
    bus: Bus,
    nats_url: str,
    *,
    vision: bool = True,
    files: dict[str, bytes] | None = None,
    download_timeout_s: float = 60.0,
) -> AsyncIterator[Stack]:
    cfg = config(vision=vision)
    results = Results()
    sub = await bus.nc.subscribe("media.results.>", cb=results.on_msg)
    ingress = await FakeIngress(bus, Platform.FEISHU, files or {"img_1": PHOTO, "gif_1": GIF}).start()
    model = await FakeVision(bus).start()
    recipe = MediaService(cfg, concurrency=2, download_timeout_s=download_timeout_s)
    try:
        async with built(Service.MEDIA, recipe, cfg, nats_url=nats_url) as service:
            yield Stack(bus, service.components, service.ctx, ingress, model, results)
    finally:
        await model.stop()
        await ingress.stop()
        await sub.unsubscribe()


def job(
    job_id: str = "job-1", transform: str = "alt_text", file_id: str = "img_1", **fields: Any
) -> MediaJob:
    fields.setdefault("attachment_type", "photo" if transform in ("alt_text", "thumbnail") else "animation")
    return MediaJob.model_validate(
        {
            "job_id": job_id,
            "platform": fields.pop("platform", "feishu"),
            "chat_id": fields.pop("chat_id", "oc_chat"),
            "message_id": "om_1",
            "dedup_key": "om_1",
            "attachment_index": None if transform == "custom_emoji" else 0,
            "transform": transform,
            "file_id": file_id,
            **fields,
        }
    )


def counter(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def opened(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


async def test_alt_text_downloads_describes_once_and_answers_from_the_cache(bus: Bus, nats_url: str) -> None:
    hits = counter("larkbot_media_alt_text_cache_lookups_total", result="hit")
    async with media(bus, nats_url) as stack:
        result = await stack.run(job())
        assert result.ok, result.error
        assert result.content_hash == images.content_key(PHOTO)
        assert result.thumbnail_key == images.content_key(images.thumbnail(PHOTO))
        thumb = opened(await stack.blob(result.thumbnail_key))
        assert thumb.format == "WEBP"
        assert thumb.width * thumb.height <= 75_000
        assert result.alt_text is not None
        assert result.alt_text.startswith("1 image(s): 512x384")  # the model saw the 512 px PNG

        (download,) = stack.ingress.downloads
        assert (download.message_id, download.file_id, download.attachment_type) == ("om_1", "img_1", "photo")
        assert download.max_bytes == 20 * 1024 * 1024
        (request,) = stack.vision.requests
        assert (request.purpose, request.endpoint, request.chat_key) == (
            "vision",
            "vision-ep",
            "feishu:oc_chat",
        )

        # The same picture elsewhere, already in the store: no download, no second description.
        again = await stack.run(job("job-2", chat_id="oc_other", content_hash=result.content_hash))
        assert again.ok
        assert (again.alt_text, again.thumbnail_key) == (result.alt_text, result.thumbnail_key)
        assert len(stack.ingress.downloads) == 1
        assert len(stack.vision.requests) == 1
    assert counter("larkbot_media_alt_text_cache_lookups_total", result="hit") == hits + 1


async def test_without_a_vision_endpoint_alt_text_is_unsupported_and_thumbnails_still_work(
    bus: Bus, nats_url: str
) -> None:
    async with media(bus, nats_url, vision=False) as stack:
        result = await stack.run(job())
        assert result.ok is False
        assert result.error is not None
        assert (result.error.code, result.error.retryable) == ("unsupported", False)
        assert stack.ingress.downloads == []  # refused before spending a platform download

        thumb = await stack.run(job("job-t", transform="thumbnail"))
        assert thumb.ok
        assert thumb.alt_text is None
        assert thumb.thumbnail_key == images.content_key(images.thumbnail(PHOTO))

        frames = await stack.run(job("job-f", transform="frames", file_id="gif_1"))
        assert frames.ok  # frames are outputs of their own; only the description needs a model
        assert (len(frames.frame_keys), frames.alt_text) == (5, None)
        assert stack.vision.requests == []


async def test_animations_give_equidistant_frames_described_together(bus: Bus, nats_url: str) -> None:
    async with media(bus, nats_url) as stack:
        result = await stack.run(job(transform="frames", file_id="gif_1", attachment_type="sticker"))
        assert result.ok, result.error
        assert result.content_hash == images.content_key(GIF)
        assert len(result.frame_keys) == len(set(result.frame_keys)) == 5
        levels = [opened(await stack.blob(key)).convert("L").tobytes()[0] for key in result.frame_keys]
        wanted = [samples.level(i, 12) for i in (0, 2, 5, 8, 11)]  # equidistant picks, first and last
        assert all(abs(got - want) <= 3 for got, want in zip(levels, wanted, strict=True)), levels
        assert result.alt_text == "5 image(s): " + ", ".join(["320x240 grey"] * 5)
        assert result.frame_times_ms == (0, 200, 500, 800, 1100)
        (request,) = stack.vision.requests
        assert "5 frames, in order, of one sticker" in str(request.messages[0])
        assert "Frame 5 at 1.1 s:" in str(request.messages[0])

        fewer = await stack.run(job("job-2", transform="frames", file_id="gif_1", max_frames=2))
        assert len(fewer.frame_keys) == 2
        assert fewer.alt_text == result.alt_text  # cached under the file's hash
        assert len(stack.vision.requests) == 1


RED, GREEN, BLUE = (255, 0, 0), (0, 255, 0), (0, 0, 255)


async def test_a_video_gives_timed_distinct_frames_and_a_second_identical_job_hits_the_cache(
    bus: Bus, nats_url: str
) -> None:
    clip = samples.mp4([RED] * 3 + [GREEN] * 3 + [BLUE] * 3, fps=10)  # picks: red red green blue blue
    async with media(bus, nats_url, files={"vid_1": clip}) as stack:
        lookups = counter("larkbot_media_alt_text_cache_lookups_total", result="hit")
        first = await stack.run(job(transform="frames", file_id="vid_1", attachment_type="video"))
        assert first.ok, first.error
        assert first.content_hash == images.content_key(clip)
        assert first.frame_times_ms == (0, 400, 600)
        assert first.alt_text == "3 image(s): 64x48 red, 64x48 green, 64x48 blue"
        (request,) = stack.vision.requests
        said = str(request.messages[0])
        assert "3 frames, in order, of one video" in said
        assert "Frame 1 at 0.0 s:" in said
        assert "Frame 3 at 0.6 s:" in said

        again = await stack.run(job("job-2", transform="frames", file_id="vid_1", attachment_type="video"))
        assert (again.alt_text, again.frame_keys, again.frame_times_ms) == (
            first.alt_text,
            first.frame_keys,
            first.frame_times_ms,
        )
        assert len(stack.vision.requests) == 1  # described once: the file's hash hit the cache
        assert counter("larkbot_media_alt_text_cache_lookups_total", result="hit") == lookups + 1


async def test_video_stickers_keep_their_alpha_and_tgs_stickers_are_rendered(bus: Bus, nats_url: str) -> None:
    files = {
        "webm_1": samples.webm_sticker(frames=6, size=64),
        "tgs_1": samples.tgs_of(samples.lottie_square(frames=30, size=64, colour=BLUE)),
    }
    async with media(bus, nats_url, files=files) as stack:
        webm = await stack.run(job(transform="frames", file_id="webm_1", attachment_type="sticker"))
        assert webm.ok, webm.error
        assert webm.frame_times_ms == (0, 100, 200, 300, 500)
        frames = [opened(await stack.blob(key)) for key in webm.frame_keys]
        assert all(frame.mode == "RGBA" for frame in frames)
        assert frames[0].getpixel((2, 2)) == (0, 0, 0, 0)
        assert opened(await stack.blob(webm.thumbnail_key or "")).mode == "RGBA"

        tgs = await stack.run(job("job-2", transform="frames", file_id="tgs_1", attachment_type="sticker"))
        assert tgs.ok, tgs.error
        assert tgs.frame_times_ms == (0, 233, 467, 700, 967)
        assert (tgs.alt_text or "").startswith("5 image(s): 64x64 ")
        assert "of one sticker" in str(stack.vision.requests[-1].messages[0])


async def test_a_corrupt_video_fails_typed_and_the_worker_goes_on(bus: Bus, nats_url: str) -> None:
    files = {"bad": samples.mp4([RED, GREEN, BLUE])[:700], "good": samples.mp4([RED, GREEN])}
    async with media(bus, nats_url, files=files) as stack:
        crashes = counter("larkbot_media_jobs_total", transform="frames", outcome="internal")
        bad = await stack.run(job(transform="frames", file_id="bad", attachment_type="video"))
        assert bad.error is not None
        assert (bad.error.code, bad.error.retryable) == ("unreadable", False)
        good = await stack.run(job("job-2", transform="frames", file_id="good", attachment_type="video"))
        assert good.ok
        assert good.frame_times_ms == (0, 100)
        assert counter("larkbot_media_jobs_total", transform="frames", outcome="internal") == crashes
        assert all(not loop.done() for loop in stack.workers.loops)


async def test_the_worker_frame_count_comes_from_services_media(bus: Bus, nats_url: str) -> None:
    cfg = parse_config({"services": {"media": {"http_host": "127.0.0.1", "max_frames": 2}}})
    results = Results()
    sub = await bus.nc.subscribe("media.results.>", cb=results.on_msg)
    ingress = await FakeIngress(bus, Platform.FEISHU, {"gif_1": GIF}).start()
    try:
        async with built(Service.MEDIA, MediaService(cfg, concurrency=1), cfg, nats_url=nats_url):
            frames_job = job("job-max", transform="frames", file_id="gif_1")
            await bus.publish(media_job_subject("frames"), frames_job, msg_id="job-max:1")
            result = await results.get("job-max")
    finally:
        await ingress.stop()
        await sub.unsubscribe()
    assert result.frame_times_ms == (0, 1100)  # first and last of 12


@pytest.mark.parametrize(
    ("data", "transform", "code", "reason"),
    [
        (samples.mp4_header(), "frames", "unreadable", "not a readable video"),
        (samples.webm_header(), "frames", "unreadable", "not a readable video"),
        (samples.gzip_bomb(9 * 1024 * 1024), "frames", "too_large", "inflates past"),
        (samples.mp4(), "alt_text", "unsupported", "frames transform"),
        (b"garbage, not a picture", "alt_text", "unreadable", "not a readable image"),
        (b"\x00" * (20 * 1024 * 1024 + 1), "alt_text", "too_large", "larger than"),
    ],
)
async def test_final_failures_are_typed_and_not_retryable(
    bus: Bus, nats_url: str, data: bytes, transform: str, code: str, reason: str
) -> None:
    async with media(bus, nats_url, files={"f": data}) as stack:
        result = await stack.run(job(transform=transform, file_id="f"))
        assert result.error is not None
        assert (result.ok, result.error.code, result.error.retryable) == (False, code, False)
        assert reason in result.error.message
        assert stack.vision.requests == []


async def test_a_stored_blob_over_the_limit_is_refused_without_reading_it(bus: Bus, nats_url: str) -> None:
    big = b"\xff\xd8" + b"\x00" * (20 * 1024 * 1024)
    key = images.content_key(big)
    store = await bus.js.object_store(OBJECT_STORE_BLOBS)
    await store.put(key, big)
    async with media(bus, nats_url) as stack:
        result = await stack.run(job(blob_key=key))
        assert result.error is not None
        assert result.error.code == "too_large"
        assert stack.ingress.downloads == []


async def test_transient_failures_are_retryable_and_a_resubmission_succeeds(bus: Bus, nats_url: str) -> None:
    async with media(bus, nats_url) as stack:
        stack.ingress.errors.append(("rate_limited", True))
        first = await stack.run(job())
        assert first.error is not None
        assert (first.error.code, first.error.retryable) == ("download", True)

        stack.vision.errors.append("transient")
        second = await stack.run(job())
        assert second.error is not None
        assert (second.error.code, second.error.retryable) == ("vision", True)

        third = await stack.run(job())
        assert third.ok
        assert third.alt_text is not None
        assert len(stack.vision.requests) == 2

        stack.ingress.errors.append(("forbidden", False))
        final = await stack.run(job("job-x", file_id="other"))
        assert final.error is not None
        assert (final.error.code, final.error.retryable) == ("download", False)


async def test_no_ingress_for_the_platform_is_retryable(bus: Bus, nats_url: str) -> None:
    async with media(bus, nats_url, download_timeout_s=1.0) as stack:
        result = await stack.run(job(platform="telegram", chat_id="-100"))
        assert result.error is not None
        assert (result.error.code, result.error.retryable) == ("download", True)
        assert result.chat_id == "-100"


async def test_an_undecodable_job_is_dead_lettered_and_work_goes_on(bus: Bus, nats_url: str) -> None:
    async with media(bus, nats_url) as stack:
        dead = await bus.js.subscribe(
            dead_letter_subject(STREAM_MEDIA, CONSUMER_MEDIA), stream=STREAM_DEAD_LETTER
        )
        await bus.js.publish(
            media_job_subject("alt_text"), b'{"job_id": "half a job"}', headers=headers_for(job())
        )
        msg = await dead.next_msg(timeout=TIMEOUT)
        assert (msg.headers or {})[HEADER_DL_REASON] == "undecodable"
        await dead.unsubscribe()
        assert (await stack.run(job(transform="thumbnail"))).ok


async def test_readyz_names_the_consumer_and_the_buckets(bus: Bus, nats_url: str) -> None:
    async with (
        media(bus, nats_url) as stack,
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{stack.ctx.ops.bound_port}/readyz") as resp,
    ):
        body = await resp.json()
    assert resp.status == 200, body
    checks = body["checks"]
    assert checks["consumer"]["ok"] is True
    assert checks["consumer"]["detail"].startswith("2/2 loops")
    assert checks["blobs"]["ok"] is True
    assert checks["alt_text_cache"]["ok"] is True
    assert checks["vision"]["detail"] == "vision-ep"


async def test_sigterm_finishes_the_job_in_hand(bus: Bus, nats_url: str) -> None:
    async with media(bus, nats_url) as stack:
        stack.vision.hold = asyncio.Event()
        await bus.publish(media_job_subject("alt_text"), job(), msg_id="job-1:1")
        await stack.vision.wait_for_requests(1)
        stack.ctx.stopping.set()  # what SIGTERM does
        stack.vision.hold.set()
        result = await stack.results.get("job-1")
        assert result.ok
    info = await bus.js.consumer_info(STREAM_MEDIA, CONSUMER_MEDIA)
    assert (info.num_pending, info.num_ack_pending) == (0, 0)


async def test_read_image_answers_an_image_part_per_detail_with_the_cached_alt_text(
    bus: Bus, nats_url: str
) -> None:
    def request(detail: str, **fields: Any) -> ReadImageRequest:
        return ReadImageRequest.model_validate(
            {
                "request_id": f"r-{detail}",
                "platform": "feishu",
                "chat_id": "oc_chat",
                "message_id": "om_1",
                "file_id": "img_1",
                "attachment_type": "photo",
                "detail": detail,
                **fields,
            }
        )

    async def ask(req: ReadImageRequest) -> ReadImageResponse:
        return await bus.request(SUBJECT_MEDIA_READ_IMAGE, req, ReadImageResponse, timeout_s=TIMEOUT)

    async with media(bus, nats_url) as stack:
        before = await ask(request("low"))
        assert before.ok
        assert before.alt_text is None  # nothing described yet
        described = await stack.run(job())
        low, high = await ask(request("low")), await ask(request("high"))
        assert (low.request_id, low.alt_text) == ("r-low", described.alt_text)
        assert low.image is not None
        assert high.image is not None
        assert (low.image.mime, low.image.detail, high.image.detail) == ("image/png", "low", "high")
        assert opened(await stack.blob(low.image.blob_key)).size == (512, 384)
        assert opened(await stack.blob(high.image.blob_key)).size == (1024, 768)
        assert len(stack.vision.requests) == 1  # reading an image never calls the model

        missing = await ask(request("low", file_id="nope"))
        assert (missing.ok, missing.error and missing.error.code) == (False, "download")
        late = await ask(request("high", deadline_ms=1))
        assert (late.ok, late.error and late.error.code) == (False, "deadline")
        raw = await bus.nc.request(SUBJECT_MEDIA_READ_IMAGE, b'{"request_id": "r-bad"}', timeout=TIMEOUT)
        bad = decode(raw.data, ReadImageResponse, dict(raw.headers or {}))
        assert (bad.request_id, bad.ok, bad.error and bad.error.code) == ("r-bad", False, "bad_request")


def test_a_vision_setting_naming_no_endpoint_stops_the_start() -> None:
    with pytest.raises(ConfigError) as caught:
        MediaService(parse_config({"llm": {"vision": "nope"}}))
    assert caught.value.path == "llm.vision"
