"""Media benchmark for ``larkbot bench``: thumbnails of realistic 12 MP camera JPEGs (4000×3000,
~3.7 MB) and frames of moving pictures.

- ``transform``: the pure thumbnail transform, one thread, then one thread per core (Pillow releases the
  GIL while decoding and encoding).
- ``worker``: the whole media service on the given bus: ``thumbnail`` jobs on the ``MEDIA`` work queue
  whose sources are already in the object store, each answered on ``media.results`` — fetch from the
  store, decode, resize, encode, store the output, publish. This is ``media_thumbnails_per_s``.
- ``frames``: ``frames`` jobs through the same worker (no vision endpoint: frames and thumbnail only) over
  a mix of a 2 s 480×270 H.264 MP4, a 512×512 VP9 WebM sticker with alpha and a 512×512 TGS sticker,
  every one changing on every frame (no pick is deduplicated away). ``media_frames_per_s`` counts the
  frames the results carry (≤ 5 a file) per second; ``files_per_s`` and one transform's time per kind
  are reported beside it.

- ``transcription``: ``transcript`` jobs through the same worker and the real gateway, against the fake
  provider's ``/audio/transcriptions`` (no model time): 10 s OGG/Opus voice notes, each distinct (no cache
  hit), one at a time. ``transcription_overhead_ms`` is the median job time — fetch, decode to 16 kHz
  WAV, store, ``llm.transcribe``, the gateway's read and form, the result — minus the provider's HTTP
  time the gateway measured; ``conversion_ms`` is the pure decode beside it.

Against a shared bus (``NATS_URL``) the worker also takes any real job waiting in ``MEDIA``; run it on the
embedded server (the default) or an idle bus.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from nats.aio.msg import Msg

from larkbot.canonical.codec import decode
from larkbot.canonical.content import AttachmentType
from larkbot.canonical.media import MediaJob, MediaResult, Transform
from larkbot.canonical.names import OBJECT_STORE_BLOBS, Platform, Service, media_job_subject
from larkbot.llm_gateway.app import GatewayService
from larkbot.llm_gateway.fake import FakeProvider
from larkbot.llm_gateway.outcome import Outcome
from larkbot.media.app import MediaService
from larkbot.media.core import audio, images, motion
from larkbot.runtime.bus import connect
from larkbot.runtime.config import NatsSettings, parse_config
from larkbot.runtime.service import built

from ..media import samples

PHOTO_SIZE = (4000, 3000)


def _photos(count: int, size: tuple[int, int]) -> list[bytes]:
    return [samples.photo(*size, seed=seed) for seed in range(count)]


def _transform(photos: list[bytes], rounds: int) -> dict[str, Any]:
    images.thumbnail(photos[0])  # warm the codecs
    latencies: list[float] = []
    started = time.perf_counter()
    for _ in range(rounds):
        for photo in photos:
            t0 = time.perf_counter()
            images.thumbnail(photo)
            latencies.append(time.perf_counter() - t0)
    serial = len(latencies) / (time.perf_counter() - started)
    workers = os.cpu_count() or 1
    work = [photo for _ in range(rounds) for photo in photos]
    with ThreadPoolExecutor(workers) as pool:
        started = time.perf_counter()
        list(pool.map(images.thumbnail, work))
        parallel = len(work) / (time.perf_counter() - started)
    return {
        "thumbnails_per_s_one_thread": round(serial, 1),
        "thumbnails_per_s_all_cores": round(parallel, 1),
        "thumbnail_ms_p50": round(statistics.median(latencies) * 1000, 1),
        "threads": workers,
    }


def _clips() -> dict[str, bytes]:
    colours = [(i * 4 % 256, 255 - i * 4 % 256, i * 37 % 256) for i in range(60)]
    return {
        "mp4": samples.mp4(colours, size=(480, 270), fps=30),
        "webm": samples.webm_sticker(frames=20, size=512, fps=30),
        "tgs": samples.tgs_of(samples.lottie_square(frames=60, size=512, rate=60)),
    }


def _frames_transform(clips: dict[str, bytes]) -> dict[str, float]:
    timings = {}
    for kind, data in clips.items():
        started = time.perf_counter()
        motion.frames(data)
        timings[f"{kind}_ms"] = round((time.perf_counter() - started) * 1000, 1)
    return timings


async def _worker(
    nats_url: str,
    sources: list[bytes],
    jobs: int,
    *,
    transform: Transform = "thumbnail",
    attachment_type: AttachmentType | None = None,
) -> tuple[float, list[MediaResult]]:
    """Seconds from the first job published to the last result, and the results."""
    bus = await connect(NatsSettings(), "media-bench", url=nats_url, give_up_after_s=30)
    config = parse_config({"services": {"media": {"http_host": "127.0.0.1"}}})
    chat = f"bench-{uuid.uuid4().hex[:8]}"
    done: dict[str, MediaResult] = {}
    failed: list[str] = []
    all_done = asyncio.Event()

    async def on_result(msg: Msg) -> None:
        result = decode(msg.data, MediaResult, dict(msg.headers or {}))
        if result.error is not None:
            failed.append(result.error.code)
        done[result.job_id] = result
        if len(done) >= jobs:
            all_done.set()

    try:
        async with built(Service.MEDIA, MediaService(config), config, nats_url=nats_url):
            store = await bus.js.object_store(OBJECT_STORE_BLOBS)
            keys = []
            for source in sources:
                key = images.content_key(source)
                await store.put(key, source)
                keys.append(key)
            sub = await bus.nc.subscribe(f"media.results.feishu.{chat}", cb=on_result)
            started = time.perf_counter()
            for n in range(jobs):
                job = MediaJob(
                    job_id=f"{chat}-{n}",
                    platform=Platform.FEISHU,
                    chat_id=chat,
                    message_id=f"om_{n}",
                    dedup_key=f"om_{n}",
                    attachment_index=0,
                    transform=transform,
                    attachment_type=attachment_type,
                    file_id=f"file_{n}",
                    blob_key=keys[n % len(keys)],
                )
                await bus.publish(media_job_subject(transform), job, msg_id=job.job_id)
            await asyncio.wait_for(all_done.wait(), timeout=300)
            elapsed = time.perf_counter() - started
            await sub.unsubscribe()
    finally:
        await bus.close()
    if failed:
        raise RuntimeError(f"{len(failed)} {transform} jobs failed: {sorted(set(failed))}")
    return elapsed, list(done.values())


async def _frames(nats_url: str, quick: bool) -> dict[str, Any]:
    clips = await asyncio.to_thread(_clips)
    transform = await asyncio.to_thread(_frames_transform, clips)
    jobs = 6 if quick else 30
    elapsed, results = await _worker(
        nats_url, list(clips.values()), jobs, transform="frames", attachment_type=AttachmentType.STICKER
    )
    frames = sum(len(result.frame_keys) for result in results)
    return {
        "frames_per_s": round(frames / elapsed, 1),
        "files_per_s": round(jobs / elapsed, 1),
        "jobs": jobs,
        "frames": frames,
        "clip_bytes": {kind: len(data) for kind, data in clips.items()},
        "transform": transform,
    }


async def _transcription(nats_url: str, quick: bool) -> dict[str, Any]:
    count = 4 if quick else 12
    notes = await asyncio.to_thread(
        lambda: [samples.voice_note(10.0, frequency=180.0 + 25.0 * n) for n in range(count + 1)]
    )
    started = time.perf_counter()
    await asyncio.to_thread(audio.speech, notes[0], 300)
    conversion_ms = (time.perf_counter() - started) * 1000
    provider: list[float] = []

    def seen(outcome: Outcome) -> None:
        if outcome.purpose == "transcription":
            provider.append(sum(outcome.provider_s))

    bus = await connect(NatsSettings(), "media-bench", url=nats_url, give_up_after_s=30)
    chat = f"bench-{uuid.uuid4().hex[:8]}"
    results: asyncio.Queue[MediaResult] = asyncio.Queue()

    async def on_result(msg: Msg) -> None:
        await results.put(decode(msg.data, MediaResult, dict(msg.headers or {})))

    latencies: list[float] = []
    try:
        async with FakeProvider() as fake:
            endpoint = {
                "format": "openai-transcription",
                "base_url": fake.url,
                "model": "bench",
                "fake": True,
            }
            config = parse_config(
                {
                    "llm": {"endpoints": {"stt": endpoint}, "transcription": "stt"},
                    "services": {
                        "media": {"http_host": "127.0.0.1"},
                        "llm-gateway": {"http_host": "127.0.0.1"},
                    },
                }
            )
            gateway = GatewayService(config, on_outcome=seen)
            async with (
                built(Service.LLM_GATEWAY, gateway, config, nats_url=nats_url),
                built(Service.MEDIA, MediaService(config), config, nats_url=nats_url),
            ):
                store = await bus.js.object_store(OBJECT_STORE_BLOBS)
                sub = await bus.nc.subscribe(f"media.results.telegram.{chat}", cb=on_result)
                for n, note in enumerate(notes):  # the first one warms the codecs and connections
                    key = images.content_key(note)
                    await store.put(key, note)
                    job = MediaJob(
                        job_id=f"{chat}-{n}",
                        platform=Platform.TELEGRAM,
                        chat_id=chat,
                        message_id=str(n),
                        dedup_key=str(n),
                        attachment_index=0,
                        transform="transcript",
                        attachment_type=AttachmentType.VOICE,
                        file_id=f"voice_{n}",
                        blob_key=key,
                    )
                    started = time.perf_counter()
                    await bus.publish(media_job_subject("transcript"), job, msg_id=job.job_id)
                    result = await asyncio.wait_for(results.get(), timeout=120)
                    if result.error is not None:
                        raise RuntimeError(f"a transcript job failed: {result.error.code}")
                    latencies.append(time.perf_counter() - started)
                await sub.unsubscribe()
    finally:
        await bus.close()
    overheads = [job - http for job, http in zip(latencies[1:], provider[1:], strict=True)]
    return {
        "overhead_ms_p50": round(statistics.median(overheads) * 1000, 1),
        "job_ms_p50": round(statistics.median(latencies[1:]) * 1000, 1),
        "provider_ms_p50": round(statistics.median(provider[1:]) * 1000, 1),
        "conversion_ms": round(conversion_ms, 1),
        "audio_s": 10.0,
        "jobs": count,
    }


async def measure(nats_url: str, quick: bool, *, photo_size: tuple[int, int] = PHOTO_SIZE) -> dict[str, Any]:
    photos = await asyncio.to_thread(_photos, 2 if quick else 4, photo_size)
    transform = await asyncio.to_thread(_transform, photos, 2 if quick else 5)
    jobs = 8 if quick else 40
    elapsed, _ = await _worker(nats_url, photos, jobs)
    worker = {"thumbnails_per_s": round(jobs / elapsed, 1), "jobs": jobs}
    frames = await _frames(nats_url, quick)
    transcription = await _transcription(nats_url, quick)
    return {
        "media_thumbnails_per_s": worker["thumbnails_per_s"],
        "media_frames_per_s": frames["frames_per_s"],
        "transcription_overhead_ms": transcription["overhead_ms_p50"],
        "media": {
            "photo": f"{photo_size[0]}x{photo_size[1]} JPEG",
            "photo_bytes_avg": sum(map(len, photos)) // len(photos),
            "transform": transform,
            "worker": worker,
            "frames": frames,
            "transcription": transcription,
        },
    }
