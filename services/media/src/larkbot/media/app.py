"""Composition root of the media workers.

Start-up: open the ``blobs`` object store and the alt-text bucket → serve ``media.read_image`` and
``media.read_file`` (queue group ``media``) → consume the ``MEDIA`` work queue with ``concurrency`` pull
loops bound to the one shared durable ``media-workers`` (every replica binds it, so KEDA scales on
``num_pending + num_ack_pending``).

SIGTERM: stop fetching, let the jobs in hand finish (their results are published and acked), stop serving.
A job cut off by the stop timeout is not acked and comes back to another worker after ``ack_wait``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

import nats

from larkbot.canonical.errors import ConfigError
from larkbot.canonical.media import ReadFileRequest, ReadImageRequest
from larkbot.canonical.names import (
    CONSUMER_MEDIA,
    QUEUE_MEDIA,
    STREAM_MEDIA,
    SUBJECT_MEDIA_READ_FILE,
    SUBJECT_MEDIA_READ_IMAGE,
    Service,
)
from larkbot.runtime.config import LarkbotConfig
from larkbot.runtime.consume import PullConsumer
from larkbot.runtime.http import Check
from larkbot.runtime.serve import Endpoint, model_decoder
from larkbot.runtime.service import ServiceContext, run

from .adapters.files import ExtractCache, FileReader, ReadFiles, read_file_error
from .adapters.remote import Sources, Speech, Vision
from .adapters.store import AltTextCache, Blobs
from .adapters.transforms import Transformer
from .adapters.worker import JobWorker, ReadImages, read_image_error

log = logging.getLogger(__name__)


def default_concurrency() -> int:
    """Jobs in flight per worker: one per core it may use, plus one so that a job waiting on the network
    leaves no core idle."""
    return usable_cpus() + 1


def usable_cpus(cgroup_cpu_max: Path = Path("/sys/fs/cgroup/cpu.max")) -> int:
    """Cores this process may use: its CPU affinity, capped by a cgroup v2 CPU quota (a container's CPU
    limit, e.g. Kubernetes ``limits.cpu``; rounded up). ``os.cpu_count`` reports the whole node."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        quota, period = cgroup_cpu_max.read_text(encoding="ascii").split()[:2]
    except (OSError, ValueError):
        return max(1, cores)
    if quota == "max":
        return max(1, cores)
    try:
        limit = -(-int(quota) // int(period))
    except (ValueError, ZeroDivisionError):
        return max(1, cores)
    return max(1, min(cores, limit))


@dataclass(frozen=True, slots=True)
class MediaWorkers:
    """The wired media workers: the ``media.read_image`` endpoint and the job loops, each bound to the
    shared durable."""

    transformer: Transformer
    endpoint: Endpoint[ReadImageRequest]
    files: Endpoint[ReadFileRequest]
    consumers: tuple[PullConsumer, ...]
    loops: tuple[asyncio.Task[None], ...]

    async def stop(self) -> None:
        for consumer in self.consumers:
            consumer.stop()
        await asyncio.wait(self.loops)
        await self.endpoint.stop()
        await self.files.stop()


@dataclass(frozen=True, slots=True)
class MediaService:
    """The recipe of the media workers: the configuration and the worker's timings. ``concurrency`` is
    the number of job loops (and half the endpoint's requests in flight)."""

    config: LarkbotConfig
    concurrency: int = field(default_factory=default_concurrency)
    download_timeout_s: float = 60.0
    vision_timeout_s: float = 60.0
    transcription_timeout_s: float = 120.0
    keepalive_s: float = 30.0
    lag_interval_s: float = 5.0

    def __post_init__(self) -> None:
        vision = self.config.llm.vision
        if vision is not None and vision not in self.config.llm.endpoints:
            raise ConfigError("llm.vision", f"names no endpoint under llm.endpoints ({vision!r})")
        speech = self.config.llm.transcription
        if speech is not None and speech not in self.config.llm.endpoints:
            raise ConfigError("llm.transcription", f"names no endpoint under llm.endpoints ({speech!r})")

    async def build(self, ctx: ServiceContext) -> MediaWorkers:
        bus = ctx.bus
        blobs = Blobs(bus.js)
        cache = await AltTextCache.open(bus.js)
        sources = Sources(bus, blobs, timeout_s=self.download_timeout_s)
        vision = Vision(bus, self.config.llm.vision, timeout_s=self.vision_timeout_s)
        speech = Speech(bus, self.config.llm.transcription, timeout_s=self.transcription_timeout_s)
        transformer = Transformer(
            sources, blobs, cache, vision, speech, max_frames=self.config.services.media.max_frames
        )
        worker = JobWorker(bus, transformer, keepalive_s=self.keepalive_s)

        endpoint = Endpoint(
            bus,
            SUBJECT_MEDIA_READ_IMAGE,
            QUEUE_MEDIA,
            model_decoder(ReadImageRequest),
            ReadImages(transformer).handle,
            read_image_error,
            max_concurrency=self.concurrency * 2,
        )
        await endpoint.start()
        extracts = await ExtractCache.open(bus.js)
        # Extractions hold the GIL (pure-Python readers): one per core the worker may use.
        reader = FileReader(sources, extracts, slots=max(1, self.concurrency - 1))
        files = Endpoint(
            bus,
            SUBJECT_MEDIA_READ_FILE,
            QUEUE_MEDIA,
            model_decoder(ReadFileRequest),
            ReadFiles(reader).handle,
            read_file_error,
            max_concurrency=self.concurrency * 2,
        )
        await files.start()
        await bus.flush()

        consumers = tuple(
            PullConsumer(bus.js, STREAM_MEDIA, CONSUMER_MEDIA, worker.handle, batch=1)
            for _ in range(self.concurrency)
        )
        loops = tuple(
            ctx.spawn(consumer.run(), f"media-jobs-{index}") for index, consumer in enumerate(consumers)
        )
        ctx.every(
            self.lag_interval_s,
            consumers[0].report_lag,
            "media-lag",
            tolerate=(nats.errors.Error, TimeoutError),
        )

        async def consuming() -> Check:
            alive = sum(not loop.done() for loop in loops)
            info = await bus.js.consumer_info(STREAM_MEDIA, CONSUMER_MEDIA)
            detail = (
                f"{alive}/{len(loops)} loops; pending {info.num_pending}, in flight {info.num_ack_pending}"
            )
            return Check(alive == len(loops), detail)

        async def blobs_ready() -> Check:
            return Check(True, await blobs.status())

        async def cache_ready() -> Check:
            return Check(True, await cache.status())

        async def extracts_ready() -> Check:
            return Check(True, await extracts.status())

        async def vision_ready() -> Check:
            # Informational: without a vision endpoint, alt_text jobs are answered ``unsupported``.
            return Check(True, vision.endpoint or "not configured: alt_text jobs answer unsupported")

        ctx.add_check("consumer", consuming)
        ctx.add_check("blobs", blobs_ready)
        ctx.add_check("alt_text_cache", cache_ready)
        ctx.add_check("file_extract_cache", extracts_ready)

        async def transcription_ready() -> Check:
            # Informational, like vision: the pipeline asks for no transcript without an endpoint.
            return Check(True, speech.endpoint or "not configured: voice and audio get no transcript")

        ctx.add_check("vision", vision_ready)
        ctx.add_check("transcription", transcription_ready)
        log.info("media workers: %d loops, vision endpoint %s", self.concurrency, vision.endpoint)
        return MediaWorkers(transformer, endpoint, files, consumers, loops)


def main() -> int:
    return run(Service.MEDIA, MediaService)
