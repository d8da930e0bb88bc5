"""The bootstrap on a real 3-node JetStream cluster: replicas raised, never lowered, elections waited out."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

import nats
import pytest
from prometheus_client import REGISTRY

from larkbot.canonical.names import KV_LEASES, STREAM_EVENTS, STREAM_MEDIA
from larkbot.runtime.bootstrap import BootstrapRefused, bootstrap
from larkbot.runtime.bus import Bus, connect
from larkbot.runtime.config import JetStreamSettings, NatsSettings
from larkbot.runtime.natsserver import EmbeddedCluster

R1 = JetStreamSettings(replicas=1)
R3 = JetStreamSettings(replicas=3)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    root = tmp_path_factory.mktemp("cluster")
    nodes = EmbeddedCluster(root, 3, log_dir=root)
    nodes.start()
    try:
        yield nodes
    finally:
        nodes.stop()


@pytest.fixture
async def bus(cluster: EmbeddedCluster) -> AsyncIterator[Bus]:
    connected = await connect(NatsSettings(), "test", url=cluster.url, give_up_after_s=60)
    try:
        yield connected
    finally:
        await connected.close(5.0)


async def replicas(bus: Bus, stream: str) -> int:
    return int((await bus.js.stream_info(stream)).config.num_replicas or 1)


async def settled(bus: Bus, stream: str, timeout_s: float = 60.0) -> None:
    """Until ``stream`` has a leader and every replica is current. The server reports this only when
    asked, so it is asked every 0.2 s (a poll of the cluster's state, bounded by ``timeout_s``)."""
    async with asyncio.timeout(timeout_s):
        while True:
            try:
                info = await bus.js.stream_info(stream)
            except (nats.errors.TimeoutError, nats.js.errors.ServiceUnavailableError):
                info = None
            group = info.cluster if info is not None else None
            peers = (group.replicas or []) if group is not None else []
            expected = int(info.config.num_replicas or 1) - 1 if info is not None else -1
            if (
                group is not None
                and group.leader
                and len(peers) == expected
                and all(p.current for p in peers)
            ):
                return
            await asyncio.sleep(0.2)


def kept(asset: str, setting: str) -> float:
    value = REGISTRY.get_sample_value("larkbot_bootstrap_kept_total", {"asset": asset, "setting": setting})
    return value or 0.0


async def test_replicas_are_raised_when_configured_and_never_lowered(bus: Bus) -> None:
    # A cluster just formed elects its meta leader first: the bootstrap waits that out too.
    await bootstrap(bus.js, R1)
    assert await replicas(bus, STREAM_EVENTS) == 1

    await bootstrap(bus.js, R3)
    for stream in (STREAM_EVENTS, STREAM_MEDIA, f"KV_{KV_LEASES}", "OBJ_blobs"):
        assert await replicas(bus, stream) == 3, stream

    before = kept(STREAM_EVENTS, "num_replicas")
    await bootstrap(bus.js, R1)  # a service started with the single-node default
    assert await replicas(bus, STREAM_EVENTS) == 3
    assert await replicas(bus, f"KV_{KV_LEASES}") == 3
    assert kept(STREAM_EVENTS, "num_replicas") == before + 1


async def test_a_limit_an_operator_set_on_a_replicated_stream_survives_the_next_start(bus: Bus) -> None:
    await bootstrap(bus.js, R3)
    await settled(bus, STREAM_MEDIA)
    media = (await bus.js.stream_info(STREAM_MEDIA)).config
    await bus.js.update_stream(replace(media, max_bytes=32 * 1024**2))
    await bootstrap(bus.js, R3)
    media = (await bus.js.stream_info(STREAM_MEDIA)).config
    assert (media.max_bytes, media.num_replicas) == (32 * 1024**2, 3)


async def test_the_bootstrap_waits_out_the_election_after_the_leader_is_killed(
    bus: Bus, cluster: EmbeddedCluster
) -> None:
    await bootstrap(bus.js, R3)
    await settled(bus, STREAM_EVENTS)
    leader = (await bus.js.stream_info(STREAM_EVENTS)).cluster
    assert leader is not None
    assert leader.leader
    killed = cluster.by_name(leader.leader)
    killed.kill()
    try:
        started = time.monotonic()
        await bootstrap(bus.js, R3)  # while EVENTS elects a new leader among the two left
        waited = time.monotonic() - started
        info = await bus.js.stream_info(STREAM_EVENTS)
        assert info.cluster is not None
        assert info.cluster.leader
        assert info.cluster.leader != leader.leader
        assert info.config.num_replicas == 3
        print(f"bootstrap through the election of a new EVENTS leader: {waited:.1f} s")
    finally:
        killed.start()


async def test_more_replicas_than_the_cluster_has_servers_is_refused_naming_the_asset(bus: Bus) -> None:
    await bootstrap(bus.js, R3)
    with pytest.raises(BootstrapRefused) as caught:
        await bootstrap(bus.js, JetStreamSettings(replicas=5, election_wait_s=3.0))
    assert caught.value.asset == STREAM_EVENTS
    assert "fewer servers than replicas" in str(caught.value)
    assert await replicas(bus, STREAM_EVENTS) == 3
