"""The pipeline's side of partition take-overs on the real bus and database: a take-over that fails is tried
again and readiness names it meanwhile; a lease lost under a running replica is handed back and taken again
without losing or doubling an event."""

from __future__ import annotations

import asyncio
from typing import Any

import nats
import pytest
from prometheus_client import REGISTRY

from larkbot.canonical.names import KV_LEASES, Service, partition_of
from larkbot.pipeline.adapters import partitions
from larkbot.pipeline.adapters.partitions import lease_key
from larkbot.pipeline.app import PipelineOptions, PipelineService
from larkbot.runtime.bus import Bus
from larkbot.runtime.reader import PartitionReader
from larkbot.runtime.service import built

from .test_pipeline_partitions import (
    chats_config,
    first_occurrences,
    publish_all,
    replica,
    round_of,
    short_leases,
    stored,
    wait_stored,
)
from .test_pipeline_service import TIMEOUT, eventually


def _takeover_failures() -> float:
    labels = {"group": "pipeline"}
    return REGISTRY.get_sample_value("larkbot_partition_takeover_failures_total", labels) or 0.0


async def test_a_failed_take_over_is_tried_again_and_readiness_names_it_meanwhile(
    bus: Bus, nats_url: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await short_leases(bus)
    chat = "oc_chat"
    partition = partition_of("feishu", chat)
    cfg = chats_config(database_url, [chat])
    away = True

    def reader(*args: Any, **kwargs: Any) -> PartitionReader:
        # The take-over's first step fails for one partition while the bus does not answer.
        if away and args[2] == partition:
            raise nats.errors.TimeoutError
        return PartitionReader(*args, **kwargs)

    monkeypatch.setattr(partitions, "PartitionReader", reader)
    before = _takeover_failures()
    recipe = PipelineService(cfg, PipelineOptions(replica="solo", fetch_timeout_s=0.2))
    async with built(Service.PIPELINE, recipe, cfg, nats_url=nats_url) as service:
        app = service.components
        await eventually(lambda: partition in app.ownership.leases.failing)
        assert _takeover_failures() > before
        check = await app.partitions_ready()
        assert not check.ok
        assert f"take-over failing: {partition} (TimeoutError)" in check.detail
        assert partition not in app.ownership.owned()
        assert not app.ready.is_set()

        away = False
        await asyncio.wait_for(app.ready.wait(), TIMEOUT)
        assert (await app.partitions_ready()).ok
        assert partition in app.ownership.owned()
        events = round_of([chat], "after", 5)
        await publish_all(bus, events)
        await wait_stored(app.repo, {chat: first_occurrences(events, chat)})


async def test_a_lease_lost_under_a_running_replica_is_handed_back_and_taken_again(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    await short_leases(bus)
    chat = "oc_chat"
    partition = partition_of("feishu", chat)
    cfg = chats_config(database_url, [chat])
    async with replica(nats_url, cfg, "solo") as (app, _):
        first = round_of([chat], "before", 10)
        await publish_all(bus, first)
        await wait_stored(app.repo, {chat: first_occurrences(first, chat)})
        reader, _task = app.ownership.readers[partition]

        # The lease disappears under the replica (it expired during a pause, say): its renewal finds it
        # lost, the partition is handed back, and a later round takes it over again with a new reader.
        kv = await bus.js.key_value(KV_LEASES)
        await kv.delete(lease_key(partition))
        await eventually(
            lambda: (
                app.ownership.readers.get(partition, (reader,))[0] is not reader
                and app.ownership.serving_all.is_set()
            )
        )
        second = round_of([chat], "after", 10)
        await publish_all(bus, second)
        everything = first + second
        await wait_stored(app.repo, {chat: first_occurrences(everything, chat)})
        assert await stored(app.repo, chat) == first_occurrences(everything, chat)
