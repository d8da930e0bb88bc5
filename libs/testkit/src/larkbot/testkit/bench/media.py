"""Thumbnail benchmark for ``larkbot bench``: realistic 12 MP camera JPEGs (4000×3000, ~3.7 MB).

- ``transform``: the pure thumbnail transform, one thread, then one thread per core (Pillow releases the
  GIL while decoding and encoding).
- ``worker``: the whole media service on the given bus: ``thumbnail`` jobs on the ``MEDIA`` work queue
  whose sources are already in the object store, each answered on ``media.results`` — fetch from the
  store, decode, resize, encode, store the output, publish. This is ``media_thumbnails_per_s``.

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
from larkbot.canonical.media import MediaJob, MediaResult
from larkbot.canonical.names import OBJECT_STORE_BLOBS, Platform, Service, media_job_subject
from larkbot.media.app import MediaService
from larkbot.media.core import images
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


async def _worker(nats_url: str, photos: list[bytes], jobs: int) -> dict[str, Any]:
    bus = await connect(NatsSettings(), "media-bench", url=nats_url, give_up_after_s=30)
    config = parse_config({"services": {"media": {"http_host": "127.0.0.1"}}})
    chat = f"bench-{uuid.uuid4().hex[:8]}"
    done: set[str] = set()
    failed: list[str] = []
    all_done = asyncio.Event()

    async def on_result(msg: Msg) -> None:
        result = decode(msg.data, MediaResult, dict(msg.headers or {}))
        if result.error is not None:
            failed.append(result.error.code)
        done.add(result.job_id)
        if len(done) >= jobs:
            all_done.set()

    try:
        async with built(Service.MEDIA, MediaService(config), config, nats_url=nats_url):
            store = await bus.js.object_store(OBJECT_STORE_BLOBS)
            keys = []
            for photo in photos:
                key = images.content_key(photo)
                await store.put(key, photo)
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
                    transform="thumbnail",
                    file_id=f"img_{n}",
                    blob_key=keys[n % len(keys)],
                )
                await bus.publish(media_job_subject("thumbnail"), job, msg_id=job.job_id)
            await asyncio.wait_for(all_done.wait(), timeout=300)
            elapsed = time.perf_counter() - started
            await sub.unsubscribe()
    finally:
        await bus.close()
    if failed:
        raise RuntimeError(f"{len(failed)} thumbnail jobs failed: {sorted(set(failed))}")
    return {"thumbnails_per_s": round(jobs / elapsed, 1), "jobs": jobs}


async def measure(nats_url: str, quick: bool, *, photo_size: tuple[int, int] = PHOTO_SIZE) -> dict[str, Any]:
    photos = await asyncio.to_thread(_photos, 2 if quick else 4, photo_size)
    transform = await asyncio.to_thread(_transform, photos, 2 if quick else 5)
    worker = await _worker(nats_url, photos, 8 if quick else 40)
    return {
        "media_thumbnails_per_s": worker["thumbnails_per_s"],
        "media": {
            "photo": f"{photo_size[0]}x{photo_size[1]} JPEG",
            "photo_bytes_avg": sum(map(len, photos)) // len(photos),
            "transform": transform,
            "worker": worker,
        },
    }
