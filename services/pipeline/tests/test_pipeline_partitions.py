"""Partitioned consumption on the real bus and real databases: ownership, rebalancing, crash order.

Every test here runs the pipeline with a ``leases`` bucket whose TTL is 3 s (renewed every second), so that
hand-overs after a crash take seconds, not the production 15 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
import yaml
from prometheus_client import REGISTRY

from larkbot.canonical.codec import encode, headers_for
from larkbot.canonical.context import ContextSnapshot, SnapshotRequest
from larkbot.canonical.events import CanonicalEvent
from larkbot.canonical.media import MediaJob, MediaResult
from larkbot.canonical.names import (
    HEADER_MSG_ID,
    KV_LEASES,
    PARTITIONS,
    SUBJECT_PIPELINE_SNAPSHOT,
    Platform,
    Service,
    events_subject,
    partition_of,
)
from larkbot.pipeline.adapters.partitions import lease_key
from larkbot.pipeline.adapters.repository import EventRepository
from larkbot.pipeline.adapters.routing import direct_subject
from larkbot.pipeline.adapters.writes import decode_event
from larkbot.pipeline.app import MIGRATIONS, Pipeline, PipelineOptions, PipelineService
from larkbot.pipeline.core import replay_chat
from larkbot.runtime.bus import Bus, NoResponders, RequestTimedOut, ServiceUnavailable
from larkbot.runtime.config import LarkbotConfig
from larkbot.runtime.db import create_engine, migrate
from larkbot.runtime.service import ServiceContext, built
from larkbot.testkit.pipeline import synthetic as s
from larkbot.testkit.pipeline.fakes import FakeMediaWorker, fail, succeed
from larkbot.testkit.pipeline.watch import caught_up

from .test_pipeline_service import TIMEOUT, config, eventually

FEISHU = Platform.FEISHU
LEASE_TTL_S = 3.0


async def short_leases(bus: Bus) -> None:
    """Replace the bootstrap's ``leases`` bucket (TTL 15 s) by one with a 3 s TTL; the services' own
    bootstrap leaves an existing bucket alone."""
    await bus.js.delete_key_value(KV_LEASES)
    await bus.js.create_key_value(bucket=KV_LEASES, ttl=LEASE_TTL_S)


def chats_config(database_url: str, chats: list[str], **extra: Any) -> LarkbotConfig:
    return config(database_url, chats={"default": {}, **{f"feishu:{c}": {} for c in chats}}, **extra)


@contextlib.asynccontextmanager
async def replica(
    nats_url: str, cfg: LarkbotConfig, name: str, **options: Any
) -> AsyncIterator[tuple[Pipeline, ServiceContext]]:
    recipe = PipelineService(cfg, PipelineOptions(replica=name, fetch_timeout_s=0.2, **options))
    async with built(Service.PIPELINE, recipe, cfg, nats_url=nats_url) as service:
        await asyncio.wait_for(service.components.ready.wait(), TIMEOUT)
        yield service.components, service.ctx


async def publish_all(bus: Bus, events: list[CanonicalEvent]) -> list[int]:
    """Publish pipelined, each with a unique ``Nats-Msg-Id`` (redeliveries reach the pipeline, as after
    the stream's duplicate window); returns the stream sequences."""
    futures = []
    for n, event in enumerate(events):
        headers = headers_for(event, {HEADER_MSG_ID: f"{event.dedup_key}#{n}"})
        subject = events_subject(event.platform.value, event.chat_id)
        futures.append(await bus.js.publish_async(subject, encode(event), headers=headers))
    return [ack.seq for ack in await asyncio.gather(*futures)]


async def stored(repo: EventRepository, chat: str) -> list[str]:
    """The chat's dedup keys in the order of record."""
    return [decode_event(payload).dedup_key async for _, payload in repo.chat_events("feishu", chat)]


def first_occurrences(events: list[CanonicalEvent], chat: str) -> list[str]:
    out: list[str] = []
    for event in events:
        if event.chat_id == chat and event.dedup_key not in out:
            out.append(event.dedup_key)
    return out


async def wait_stored(repo: EventRepository, expected: dict[str, list[str]]) -> None:
    async def done() -> bool:
        return [await repo.count("feishu", c) for c in expected] == [len(v) for v in expected.values()]

    loop = asyncio.get_running_loop()
    deadline = loop.time() + TIMEOUT * 2
    while not await done():
        assert loop.time() < deadline, "events not committed in time"
        await asyncio.sleep(0.05)


async def snapshot(bus: Bus, chat: str) -> ContextSnapshot:
    request = SnapshotRequest(platform=FEISHU, chat_id=chat)
    return await bus.request(SUBJECT_PIPELINE_SNAPSHOT, request, ContextSnapshot, timeout_s=TIMEOUT)


def round_of(chats: list[str], tag: str, per_chat: int) -> list[CanonicalEvent]:
    return [s.message(f"om_{tag}_{c}_{n}", f"{tag} {n}", chat=c) for n in range(per_chat) for c in chats]


async def test_two_replicas_share_the_partitions_and_rebalance_on_join_and_leave(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    await short_leases(bus)
    chats = [f"oc_{i}" for i in range(12)]
    assert len({partition_of("feishu", c) for c in chats}) > 4
    cfg = chats_config(database_url, chats)
    published: list[CanonicalEvent] = []
    sequences: list[int] = []

    async def send(tag: str, repo: EventRepository) -> None:
        events = round_of(chats, tag, 5)
        published.extend(events)
        sequences.extend(await publish_all(bus, events))
        await wait_stored(repo, {c: first_occurrences(published, c) for c in chats})

    async with replica(nats_url, cfg, "a") as (a, _):
        assert a.ownership.owned() == list(range(PARTITIONS))
        await send("one", a.repo)
        async with replica(nats_url, cfg, "b") as (b, _):
            ownership_a, ownership_b = a.ownership, b.ownership
            await eventually(
                lambda: (
                    len(ownership_a.owned()) == len(ownership_b.owned()) == PARTITIONS // 2
                    and ownership_a.serving_all.is_set()
                    and ownership_b.serving_all.is_set()
                )
            )
            assert set(ownership_a.owned()).isdisjoint(ownership_b.owned())
            handled_a, handled_b = a.intake.handled, b.intake.handled
            await send("two", a.repo)
            assert a.intake.handled > handled_a
            assert b.intake.handled > handled_b
            # Whichever replica takes a request, the owner of the chat's partition answers it.
            for chat in chats:
                assert len((await snapshot(bus, chat)).segments) == 10, chat
        # b left cleanly: its partitions come back to a without waiting for the TTL.
        await eventually(lambda: len(ownership_a.owned()) == PARTITIONS and ownership_a.serving_all.is_set())
        await send("three", a.repo)
        for chat in chats:
            assert [seg.segment_id for seg in (await snapshot(bus, chat)).segments] == [
                f"msg:om_{tag}_{chat}_{n}" for tag in ("one", "two", "three") for n in range(5)
            ]
            # Exactly once and in publish order for every chat, across two hand-overs.
            assert await stored(a.repo, chat) == first_occurrences(published, chat)
        # Each partition resumes one past its last message; partitions without traffic record nothing.
        last: dict[int, int] = {}
        for event, seq in zip(published, sequences, strict=True):
            last[partition_of("feishu", event.chat_id)] = seq
        assert await a.repo.offsets() == {p: seq + 1 for p, seq in last.items()}


def _subprocess_env(tmp_path: Path, cfg: dict[str, Any], nats_url: str) -> dict[str, str]:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    env = dict(os.environ)
    env.update(LARKBOT_CONFIG=str(path), NATS_URL=nats_url, LARKBOT_HTTP_PORT="0")
    return env


async def test_a_replica_killed_mid_stream_is_resumed_with_every_chat_in_order(
    bus: Bus, nats_url: str, database_url: str, tmp_path: Path
) -> None:
    await short_leases(bus)
    chats = [f"oc_k{i}" for i in range(8)]
    raw = {
        "utc_offset_min": 480,
        "maintainers": ["ou_alice"],
        "services": {"pipeline": {"database_url": database_url, "http_host": "127.0.0.1"}},
        "chats": {"default": {}, **{f"feishu:{c}": {} for c in chats}},
    }
    streams = [list(s.chat_traffic(c, 400, seed=3)) for c in chats]
    traffic = [e for round_ in zip(*streams, strict=True) for e in round_]
    engine = create_engine(database_url)
    await migrate(engine, MIGRATIONS)
    repo = EventRepository(engine)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "larkbot.cli", "run", "pipeline"),
        env=_subprocess_env(tmp_path, raw, nats_url),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        half = len(traffic) // 2
        await publish_all(bus, traffic[:half])

        async def committed() -> int:
            return sum([await repo.count("feishu", c) for c in chats])

        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while await committed() < 200:
            assert proc.returncode is None, "the pipeline subprocess exited"
            assert loop.time() < deadline, "the pipeline subprocess committed nothing"
            await asyncio.sleep(0.02)
        # Keep it busy with the second half, and kill it while it works.
        sending = asyncio.create_task(publish_all(bus, traffic[half:]))
        await asyncio.sleep(0)
        proc.send_signal(signal.SIGKILL)
        await asyncio.wait_for(proc.wait(), TIMEOUT)
        await sending
        killed_at = await committed()
        expected = {c: first_occurrences(traffic, c) for c in chats}
        assert killed_at < sum(map(len, expected.values()))  # killed in the middle
        cfg = chats_config(database_url, chats)
        # The dead replica's leases expire after their TTL; the new one takes over and resumes.
        async with replica(nats_url, cfg, "restarted") as (app, _):
            await wait_stored(repo, expected)
            await eventually(lambda: caught_up(app))
            for chat in chats:
                assert await stored(repo, chat) == expected[chat], chat
                params = app.params_for(FEISHU, chat)
                assert params is not None
                snap = await snapshot(bus, chat)
                assert "\n".join(seg.xml for seg in snap.segments) == replay_chat(traffic, params), chat
    finally:
        if proc.returncode is None:
            proc.kill()
            await asyncio.wait_for(proc.wait(), TIMEOUT)
        await engine.dispose()


def same_partition_as(chat: str, prefix: str) -> str:
    target = partition_of("feishu", chat)
    return next(f"{prefix}{i}" for i in range(10_000) if partition_of("feishu", f"{prefix}{i}") == target)


async def test_a_waiting_media_head_holds_the_resume_point_and_survives_a_restart(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    await short_leases(bus)
    other = same_partition_as("oc_chat", "oc_n")
    partition = partition_of("feishu", "oc_chat")
    cfg = chats_config(database_url, ["oc_chat", other])

    async def never(job: MediaJob, _attempt: int) -> MediaResult:
        return fail(job)

    async def works(job: MediaJob, _attempt: int) -> MediaResult:
        return succeed(job, "a cat")

    worker = FakeMediaWorker(bus, never)
    task = asyncio.create_task(worker.run())
    events = [
        s.message("om_1", "look", attachments=(s.photo(),)),
        s.message("om_2", "behind the photo"),
        s.message("om_3", "same partition, other chat", chat=other),
        s.message("om_4", "and more", chat=other),
    ]
    options = {"media_retry_base_s": 0.05}
    try:
        async with replica(nats_url, cfg, "first", **options) as (app, _):
            repo = app.repo
            (warm_up,) = await publish_all(bus, [s.message("om_0", "first", chat=other)])
            await wait_stored(repo, {other: ["om_0"]})
            assert await repo.resume_seq(partition) == warm_up + 1
            seqs = await publish_all(bus, events)
            await wait_stored(repo, {other: ["om_0", "om_3", "om_4"]})
            await worker.wait_for_jobs(2)
            await eventually(lambda: bool(app.intake and app.intake.admission.blocked()))
            # om_3 and om_4 committed after om_1, but om_1 still waits: the partition resumes at om_1.
            assert await repo.resume_seq(partition) == seqs[0]
            assert await repo.count("feishu", "oc_chat") == 0
    finally:
        worker.stop()
        await asyncio.wait_for(task, TIMEOUT)
    worker = FakeMediaWorker(bus, works)
    task = asyncio.create_task(worker.run())
    try:
        async with replica(nats_url, cfg, "second", **options) as (app, _):
            repo = app.repo
            await wait_stored(repo, {"oc_chat": ["om_1", "om_2"], other: ["om_0", "om_3", "om_4"]})
            await eventually(lambda: caught_up(app))
            assert await stored(repo, "oc_chat") == ["om_1", "om_2"]
            # Redelivered from om_1 on: om_3 and om_4 are skipped by the unique key, stored once.
            assert await stored(repo, other) == ["om_0", "om_3", "om_4"]
            assert await repo.resume_seq(partition) == seqs[-1] + 1
            first, second = (await snapshot(bus, "oc_chat")).segments
            assert ">a cat</image>" in first.xml
            assert "behind the photo" in second.xml
    finally:
        worker.stop()
        await asyncio.wait_for(task, TIMEOUT)


async def test_a_failing_partition_restarts_from_its_resume_point(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    await short_leases(bus)
    chats = ["oc_chat", same_partition_as("oc_chat", "oc_f")]
    partition = partition_of("feishu", "oc_chat")
    cfg = chats_config(database_url, chats)
    async with replica(nats_url, cfg, "solo") as (app, _):
        first = round_of(chats, "before", 20)
        await publish_all(bus, first)
        await wait_stored(app.repo, {c: first_occurrences(first, c) for c in chats})
        reader, _task = app.ownership.readers[partition]
        # The consumer vanishes under the reader (as after a server-side expiry): the reader fails, and
        # restarts from the database's resume point instead of skipping anything.
        await bus.js.delete_consumer("EVENTS", reader.consumer)
        second = round_of(chats, "after", 20)
        await publish_all(bus, second)
        everything = first + second
        await wait_stored(app.repo, {c: first_occurrences(everything, c) for c in chats})
        assert reader.restarts >= 1
        for chat in chats:
            assert await stored(app.repo, chat) == first_occurrences(everything, chat)


async def lease_holder(bus: Bus, partition: int) -> str | None:
    kv = await bus.js.key_value(KV_LEASES)
    try:
        entry = await kv.get(lease_key(partition))
    except nats.js.errors.KeyNotFoundError:
        return None
    return entry.value.decode() if entry.value else None


def forwarded(outcome: str) -> float:
    labels = {"op": "snapshot", "outcome": outcome}
    return REGISTRY.get_sample_value("larkbot_pipeline_forwarded_requests_total", labels) or 0.0


async def test_a_killed_replicas_partitions_answer_a_typed_error_until_they_move(
    bus: Bus, nats_url: str, database_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """While a SIGKILLed replica's leases live on, a request for its partitions gets the typed
    ``owner_unavailable`` error (not a reply that fails to decode), the silent replica is addressed once and
    logged once, and once the leases expire the partitions are served by the survivor."""
    ttl_s = 12.0  # renewed every 4 s: the dead replica's leases outlive it by 8 to 12 s
    await bus.js.delete_key_value(KV_LEASES)
    await bus.js.create_key_value(bucket=KV_LEASES, ttl=ttl_s)
    raw = {
        "utc_offset_min": 480,
        "services": {"pipeline": {"database_url": database_url, "http_host": "127.0.0.1"}},
        "chats": {"default": {}, "feishu:oc_chat": {}},
    }
    engine = create_engine(database_url)
    await migrate(engine, MIGRATIONS)
    await engine.dispose()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "larkbot.cli", "run", "pipeline"),
        env=_subprocess_env(tmp_path, raw, nats_url),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while (doomed := await lease_holder(bus, PARTITIONS - 1)) is None:
            assert proc.returncode is None, "the pipeline subprocess exited"
            assert loop.time() < deadline, "the pipeline subprocess took no partition"
            await asyncio.sleep(0.05)
        async with replica(nats_url, chats_config(database_url, ["oc_chat"]), "survivor") as (survivor, _):
            theirs = [p for p in range(PARTITIONS) if await lease_holder(bus, p) == doomed]
            assert theirs
            assert not set(theirs) & set(survivor.ownership.owned())
            chat = next(f"oc_d{i}" for i in range(10_000) if partition_of("feishu", f"oc_d{i}") == theirs[0])
            assert (await snapshot(bus, chat)).seq == 0  # forwarded to its owner, who answers

            proc.send_signal(signal.SIGKILL)
            await asyncio.wait_for(proc.wait(), TIMEOUT)
            # Its subscriptions are gone once the server saw the connection close: no responders. Until
            # then a request can still be routed to the dead connection and go unanswered.
            direct = direct_subject(doomed, "snapshot")
            request = SnapshotRequest(platform=FEISHU, chat_id=chat)
            deadline = loop.time() + TIMEOUT
            while True:
                try:
                    await bus.request(direct, request, ContextSnapshot, timeout_s=1.0)
                except NoResponders:
                    break
                except RequestTimedOut:
                    pass
                assert loop.time() < deadline, "the server never saw the killed replica's connection close"
            # Only the survivor answers now; the dead replica still holds the lease.
            addressed, skipped = forwarded("no_responders"), forwarded("owner_silent")
            with caplog.at_level(logging.INFO, logger="larkbot.pipeline.adapters.routing"):
                for _ in range(5):
                    with pytest.raises(ServiceUnavailable) as info:
                        await snapshot(bus, chat)
                    assert info.value.error.code == "owner_unavailable"
                    assert doomed in info.value.error.message
            assert await lease_holder(bus, theirs[0]) == doomed  # all five within the lease's life
            assert (forwarded("no_responders"), forwarded("owner_silent")) == (addressed + 1, skipped + 4)
            warned = [r for r in caplog.records if r.levelno == logging.WARNING and doomed in r.getMessage()]
            assert len(warned) == 1
            assert "no service answers on" in warned[0].getMessage()

            # The leases expire and the survivor takes the partitions: the chat is served again.
            meanwhile: set[str] = set()

            async def served() -> bool:
                try:
                    await snapshot(bus, chat)
                except ServiceUnavailable as exc:
                    meanwhile.add(exc.error.code)
                    return False
                return True

            deadline = loop.time() + ttl_s + TIMEOUT
            while not await served():
                assert loop.time() < deadline, "the dead replica's partitions never moved"
                await asyncio.sleep(0.2)
            assert meanwhile <= {"owner_unavailable", "not_served"}
            # One chat served means its partition moved; the others are taken one after another.
            while survivor.ownership.owned() != list(range(PARTITIONS)):
                assert loop.time() < deadline, f"the survivor holds only {survivor.ownership.owned()}"
                await asyncio.sleep(0.05)
    finally:
        if proc.returncode is None:
            proc.kill()
            await asyncio.wait_for(proc.wait(), TIMEOUT)
