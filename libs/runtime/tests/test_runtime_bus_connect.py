"""Connecting to NATS: one server or a cluster's list, and what the service shows of the connection."""

from __future__ import annotations

import socket

import pytest
from prometheus_client import REGISTRY

from larkbot.canonical.errors import ConfigError
from larkbot.runtime.bus import BusUnavailable, connect, server_address
from larkbot.runtime.config import NatsSettings, parse_config
from larkbot.runtime.metrics import set_bus_server


def _closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_server_list_connects_through_the_one_server_that_is_up(nats_url: str) -> None:
    down = [f"nats://127.0.0.1:{_closed_port()}" for _ in range(2)]
    # nats-py shuffles the list; with two of three servers down, most orders try a dead one first.
    servers = ",".join([*down, nats_url])
    bus = await connect(NatsSettings(connect_timeout_s=1.0), "test", url=servers, give_up_after_s=30.0)
    try:
        assert bus.connected
        assert bus.server == server_address(nats_url)
        await bus.nc.flush(timeout=5)
    finally:
        await bus.close(5.0)


async def test_nats_servers_as_a_list_are_used_when_no_url_overrides_them(nats_url: str) -> None:
    settings = NatsSettings(servers=(f"nats://127.0.0.1:{_closed_port()}", nats_url), connect_timeout_s=1.0)
    bus = await connect(settings, "test", give_up_after_s=30.0)
    try:
        assert bus.server == server_address(nats_url)
    finally:
        await bus.close(5.0)


async def test_a_list_of_dead_servers_is_unavailable_naming_each_without_credentials() -> None:
    servers = ",".join(f"nats://ops:hunter2@127.0.0.1:{_closed_port()}" for _ in range(2))
    with pytest.raises(BusUnavailable) as caught:
        await connect(NatsSettings(connect_timeout_s=0.5), "test", url=servers, give_up_after_s=1.0)
    assert "127.0.0.1:" in str(caught.value)
    assert "hunter2" not in str(caught.value)
    assert "ops" not in str(caught.value)


@pytest.mark.parametrize(
    ("nats", "key"),
    [
        ({"url": "a:4222"}, "nats.url"),
        ({"url": "nats://a:4222,http://b:4222"}, "nats.url"),
        ({"url": " , "}, "nats.url"),
        ({"servers": ["nats://a:4222", "nats://:4222"]}, "nats.servers.1"),
        ({"url": "nats://a:4222", "servers": ["nats://b:4222"]}, "nats.servers"),
    ],
)
def test_a_bad_server_list_is_refused_naming_its_key(nats: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"nats": nats}, {})
    assert key in str(caught.value)


def test_a_comma_separated_url_is_the_list_of_its_servers() -> None:
    settings = NatsSettings(url="nats://a:4222, tls://b:4223,nats://u:p@c:4224")
    assert settings.server_urls() == ("nats://a:4222", "tls://b:4223", "nats://u:p@c:4224")
    assert settings.server_urls("nats://x:1,nats://y:2") == ("nats://x:1", "nats://y:2")
    assert server_address("nats://u:p@c:4224") == "c:4224"


def test_the_current_server_is_the_one_labelled_and_a_change_moves_the_label() -> None:
    def shown() -> dict[str, float]:
        return {
            sample.labels["server"]: sample.value
            for metric in REGISTRY.collect()
            if metric.name == "larkbot_bus_server_info"
            for sample in metric.samples
            if sample.labels["component"] == "test-metric"
        }

    set_bus_server("test-metric", "a:4222")
    assert shown() == {"a:4222": 1.0}
    set_bus_server("test-metric", "b:4222")
    assert shown() == {"b:4222": 1.0}
    set_bus_server("test-metric", "")
    assert shown() == {}
