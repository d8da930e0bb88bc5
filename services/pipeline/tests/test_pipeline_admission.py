"""Media admission: contiguous ready prefix per chat, backoff on a failing head, jobs on the real bus."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from larkbot.canonical.context import HistoryRequest, HistoryResponse
from larkbot.canonical.media import MediaJob, MediaResult
from larkbot.canonical.names import SUBJECT_PIPELINE_HISTORY, Platform
from larkbot.pipeline.core.admission import Admission
from larkbot.runtime.bus import Bus
from larkbot.testkit.pipeline import synthetic as s
from larkbot.testkit.pipeline.fakes import FakeMediaWorker, fail, succeed

from .test_pipeline_service import config, pipeline, publish, watching

A, B = ("feishu", "oc_a"), ("feishu", "oc_b")


def test_only_the_contiguous_ready_prefix_of_a_chat_leaves_and_other_chats_flow() -> None:
    admission: Admission[str] = Admission(retry_base_s=2.0, job_timeout_s=60.0)
    (job,) = admission.admit(A, s.message("om_1", attachments=(s.photo(),), chat="oc_a"), "t1", now=0.0)
    assert admission.admit(A, s.message("om_2", "text", chat="oc_a"), "t2", now=0.0) == []
    admission.admit(B, s.message("om_3", "other chat", chat="oc_b"), "t3", now=0.0)
    assert [p.token for p in admission.take_ready()] == ["t3"]  # om_2 is ready but behind its head
    assert admission.result(fail(job), now=1.0) is False
    assert admission.blocked() == [A]
    assert admission.due(now=2.9) == []
    assert admission.due(now=3.0) == [job]  # backoff 2 s after the first failure
    assert admission.result(fail(job), now=3.0) is False
    assert admission.due(now=6.9) == []  # doubled
    assert admission.result(succeed(job, "a cat"), now=7.0) is True
    ready = admission.take_ready()
    assert [p.token for p in ready] == ["t1", "t2"]
    event, alts = ready[0].completed()
    assert event.attachments[0].thumbnail_key == f"thumb-{job.job_id}"  # type: ignore[union-attr]
    assert alts == [(f"thumb-{job.job_id}", "a cat")]
    assert len(admission) == 0


def test_unanswered_jobs_are_resubmitted_and_rejections_let_the_event_through() -> None:
    admission: Admission[str] = Admission(job_timeout_s=10.0)
    (job,) = admission.admit(A, s.message("om_1", attachments=(s.photo(),), chat="oc_a"), "t1", now=0.0)
    assert admission.due(now=9.0) == []
    assert admission.due(now=10.0) == [job]
    assert admission.result(fail(job, "too_large", retryable=False), now=11.0) is True
    (pending,) = admission.take_ready()
    event, alts = pending.completed()
    assert event.attachments[0].thumbnail_key is None  # type: ignore[union-attr]
    assert alts == []


def test_archived_chats_and_disabled_media_need_no_jobs() -> None:
    admission: Admission[str] = Admission()
    event = s.message("om_1", attachments=(s.photo(),), chat="oc_a")
    assert admission.admit(A, event, "t", now=0.0, transforms=False) == []
    assert [p.token for p in admission.take_ready()] == ["t"]


async def test_media_head_blocks_only_its_chat_until_the_worker_succeeds(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    if "postgres" in database_url:
        pytest.skip("admission does not depend on the database; the sqlite run covers it")
    release = asyncio.Event()

    async def behaviour(job: MediaJob, attempt: int) -> MediaResult:
        if attempt == 1:
            return fail(job)
        await release.wait()
        return succeed(job, "a cat on a mat")

    worker = FakeMediaWorker(bus, behaviour)
    task = asyncio.create_task(worker.run())
    cfg = config(database_url, chats={"default": {}, "feishu:oc_chat": {}, "feishu:oc_b": {}})
    try:
        async with (
            watching(bus) as updates,
            pipeline(bus, nats_url, cfg, media_retry_base_s=0.05) as (app, ctx),
        ):
            await publish(
                bus,
                s.message("om_1", "look", attachments=(s.photo(),)),
                s.message("om_2", "behind the photo"),
                s.message("om_3", "elsewhere", chat="oc_b"),
            )
            await updates.until(lambda: "oc_b" in updates.copies)
            await worker.wait_for_jobs(2)  # the failed first attempt was retried: the chat is blocked
            assert "oc_chat" not in updates.copies
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"http://127.0.0.1:{ctx.ops.bound_port}/readyz") as resp,
            ):
                body = await resp.json()
            assert body["checks"]["media"]["ok"] is False
            assert "feishu:oc_chat" in body["checks"]["media"]["detail"]
            release.set()
            await updates.until(lambda: len(updates.copies.get("oc_chat", [])) == 2)
            first, second = updates.copies["oc_chat"]
            assert ">a cat on a mat</image>" in first.xml
            assert first.image_parts == ()
            assert "behind the photo" in second.xml
            assert app.repo is not None
            stored = [p async for _, p in app.repo.chat_events("feishu", "oc_chat")]
            assert '"thumbnail_key":"thumb-' in stored[0]
            assert "a cat on a mat" not in stored[0]  # alt text is cached, never stored in the event
            # The driver's read_image names the platform file (and the stored original) through the refs,
            # live and in persisted history alike.
            (ref,) = first.attachments
            assert (ref.index, ref.file_id, ref.blob_key) == (0, "img_1", f"sha256:{worker.jobs[0].job_id}")
            request = HistoryRequest(platform=Platform.FEISHU, chat_id="oc_chat", message_ids=("om_1",))
            history = await bus.request(SUBJECT_PIPELINE_HISTORY, request, HistoryResponse, timeout_s=30)
            assert history.found[0].attachments == first.attachments
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)


async def test_a_chats_vision_route_rides_on_its_media_jobs(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    """``llm.routes`` with purpose ``vision``: the media jobs of the chats it matches name its endpoint,
    the others none (the workers' ``llm.vision``)."""
    if "postgres" in database_url:
        pytest.skip("admission does not depend on the database; the sqlite run covers it")

    async def behaviour(job: MediaJob, attempt: int) -> MediaResult:
        return succeed(job, "a described picture")

    endpoint = {"format": "openai-chat", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    llm = {
        "endpoints": {"eyes": endpoint, "sharp-eyes": endpoint},
        "vision": "eyes",
        "routes": [{"chats": ["feishu:oc_b*"], "purpose": "vision", "endpoint": "sharp-eyes"}],
    }
    worker = FakeMediaWorker(bus, behaviour)
    task = asyncio.create_task(worker.run())
    cfg = config(database_url, chats={"default": {}, "feishu:oc_chat": {}, "feishu:oc_b": {}}, llm=llm)
    try:
        async with watching(bus) as updates, pipeline(bus, nats_url, cfg):
            await publish(
                bus,
                s.message("om_1", "look", attachments=(s.photo(),)),
                s.message("om_2", "and here", attachments=(s.photo("img_2"),), chat="oc_b"),
            )
            await updates.until(lambda: "oc_chat" in updates.copies and "oc_b" in updates.copies)
        routed = {job.chat_id: job.vision_endpoint for job in worker.jobs}
        assert routed == {"oc_chat": None, "oc_b": "sharp-eyes"}
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)
