"""A job that outlives ``ack_wait`` is kept ours: the worker marks it in progress until it is answered."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import nats

from larkbot.canonical.codec import encode, headers_for
from larkbot.canonical.media import MediaJob, MediaResult
from larkbot.canonical.names import Platform
from larkbot.media.adapters.worker import JobWorker
from larkbot.media.core.jobs import succeeded
from larkbot.runtime.consume import Delivery

TIMEOUT = 10.0


class _Msg:
    """The JetStream message of the job: counts its in-progress marks, the second one fails."""

    def __init__(self, marks_wanted: int) -> None:
        self.marks = 0
        self.marked = asyncio.Event()
        self.marks_wanted = marks_wanted

    async def in_progress(self) -> None:
        self.marks += 1
        if self.marks >= self.marks_wanted:
            self.marked.set()
        if self.marks == 2:
            raise nats.errors.TimeoutError


class _SlowTransformer:
    """Answers a job only once the worker has marked it in progress often enough."""

    def __init__(self, msg: _Msg) -> None:
        self.msg = msg

    async def run(self, job: MediaJob) -> MediaResult:
        await asyncio.wait_for(self.msg.marked.wait(), TIMEOUT)
        return succeeded(job, content_hash="sha256:" + "0" * 64, thumbnail_key="t")


class _Bus:
    def __init__(self) -> None:
        self.published: list[tuple[str, MediaResult]] = []

    async def publish_core(self, subject: str, result: MediaResult) -> None:
        self.published.append((subject, result))


def _delivery(msg: _Msg, job: MediaJob) -> Delivery:
    return Delivery(
        msg=cast(Any, msg),
        stream="MEDIA",
        consumer="media-workers",
        subject="media.jobs.thumbnail",
        data=encode(job),
        headers=headers_for(job),
        stream_seq=1,
        num_delivered=1,
    )


async def test_a_long_job_is_marked_in_progress_until_answered_and_a_failed_mark_is_no_failure() -> None:
    job = MediaJob.model_validate(
        {
            "job_id": "j1",
            "platform": Platform.FEISHU,
            "chat_id": "oc_1",
            "message_id": "om_1",
            "dedup_key": "om_1",
            "attachment_index": 0,
            "transform": "thumbnail",
            "file_id": "img_1",
        }
    )
    msg = _Msg(marks_wanted=3)
    bus = _Bus()
    worker = JobWorker(cast(Any, bus), cast(Any, _SlowTransformer(msg)), keepalive_s=0.01)
    await worker.handle(_delivery(msg, job))
    assert msg.marks >= 3  # the second mark failed and marking went on
    assert [result.job_id for _subject, result in bus.published] == ["j1"]
    assert bus.published[0][1].ok
