"""Fixtures shared by every test in the workspace: a real NATS JetStream server and real databases.

NATS, in this order (DESIGN §7): ``NATS_URL`` → testcontainers when a Docker engine answers → the embedded
``nats-server`` binary on a free loopback port. One server per test session, with an isolated store.

Databases: SQLite always; PostgreSQL too when ``TEST_DATABASE_URL`` is set (a fresh database per test,
dropped afterwards).
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from larkbot.runtime.bootstrap import bootstrap
from larkbot.runtime.bus import Bus, connect
from larkbot.runtime.config import NatsSettings
from larkbot.runtime.natsserver import EmbeddedNats
from larkbot.testkit.databases import fresh_postgres


def _docker_engine_answers() -> bool:
    sock_path = "/var/run/docker.sock"
    if os.environ.get("DOCKER_HOST"):
        return True
    if not os.path.exists(sock_path):
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(1)
        try:
            sock.connect(sock_path)
        except OSError:
            return False
    return True


@pytest.fixture(scope="session")
def nats_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if os.environ.get("NATS_URL"):
        yield os.environ["NATS_URL"]
        return
    if _docker_engine_answers():
        from testcontainers.nats import NatsContainer

        with NatsContainer("nats:2.11", jetstream=True) as container:  # pragma: no cover - needs Docker
            yield container.nats_uri()
        return
    server = EmbeddedNats(tmp_path_factory.mktemp("nats"))
    url = server.start()
    try:
        yield url
    finally:
        server.stop()


@pytest.fixture
async def bus(nats_url: str) -> AsyncIterator[Bus]:
    """A connection to a bus holding exactly the bootstrap's declarations, with empty streams."""
    b = await connect(NatsSettings(), "test", url=nats_url, give_up_after_s=30)
    await reset_bus(b)
    try:
        yield b
    finally:
        await b.close(drain_timeout_s=5)


async def reset_bus(b: Bus) -> None:
    """Delete every stream (KV buckets and object stores are streams too) and declare afresh."""
    names = [info.config.name for info in await b.js.streams_info()]
    for name in names:
        await b.js.delete_stream(name)
    await bootstrap(b.js)


@pytest.fixture(params=["sqlite", "postgres"])
async def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'test.db'}"
        return
    base = os.environ.get("TEST_DATABASE_URL")
    if not base:
        pytest.skip("PostgreSQL tests need TEST_DATABASE_URL (.ci/run sets it when a local server answers)")
    async with fresh_postgres(base, ("t",), prefix="larkbot") as urls:
        yield urls["t"]
