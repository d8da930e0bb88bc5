"""A stand-in for the media worker on the real bus, for the pipeline's tests.

It binds the shared ``media-workers`` pull consumer of the ``MEDIA`` work queue, answers every job through a
``behaviour`` (default: success with a deterministic thumbnail key and alt text) and publishes the result on
``media.results.<platform>.<chat>`` exactly as a worker does. Results are built by the worker's own
``larkbot.media.core.jobs.succeeded`` / ``failed``; only what they carry is made up.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import nats

from larkbot.canonical.codec import decode
from larkbot.canonical.media import MediaError, MediaJob, MediaResult
from larkbot.canonical.names import CONSUMER_MEDIA, STREAM_MEDIA, media_result_subject
from larkbot.media.core.jobs import failed, succeeded
from larkbot.runtime.bus import Bus

Behaviour = Callable[[MediaJob, int], Awaitable[MediaResult]]


def succeed(job: MediaJob, alt_text: str = "a picture") -> MediaResult:
    """A made-up success; a ``transcript`` job answers ``alt_text`` as its transcript (no thumbnail)."""
    if job.transform == "transcript":
        return succeeded(job, content_hash=f"sha256:{job.job_id}", alt_text=alt_text, duration_ms=2000)
    return succeeded(
        job, content_hash=f"sha256:{job.job_id}", thumbnail_key=f"thumb-{job.job_id}", alt_text=alt_text
    )


def fail(job: MediaJob, code: str = "download", *, retryable: bool = True) -> MediaResult:
    return failed(job, MediaError(code=code, message=f"{code} failed", retryable=retryable))


async def _always_succeed(job: MediaJob, _attempt: int) -> MediaResult:
    return succeed(job)


class FakeMediaWorker:
    def __init__(self, bus: Bus, behaviour: Behaviour = _always_succeed) -> None:
        self.bus = bus
        self.behaviour = behaviour
        self.attempts: dict[str, int] = {}
        self.jobs: list[MediaJob] = []
        self.seen = asyncio.Condition()
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        sub = await self.bus.js.pull_subscribe_bind(CONSUMER_MEDIA, stream=STREAM_MEDIA)
        try:
            while not self._stopping.is_set():
                try:
                    msgs = await sub.fetch(10, timeout=0.5)
                except (nats.errors.TimeoutError, TimeoutError):
                    continue
                for msg in msgs:
                    job = decode(msg.data, MediaJob, dict(msg.headers or {}))
                    await msg.ack()
                    attempt = self.attempts.get(job.job_id, 0) + 1
                    self.attempts[job.job_id] = attempt
                    async with self.seen:
                        self.jobs.append(job)
                        self.seen.notify_all()
                    result = await self.behaviour(job, attempt)
                    await self.bus.publish_core(media_result_subject(job.platform.value, job.chat_id), result)
        finally:
            with contextlib.suppress(nats.errors.Error):
                await sub.unsubscribe()

    async def wait_for_jobs(self, count: int, timeout_s: float = 30.0) -> None:
        async with self.seen:
            await asyncio.wait_for(self.seen.wait_for(lambda: len(self.jobs) >= count), timeout_s)

    def stop(self) -> None:
        self._stopping.set()
