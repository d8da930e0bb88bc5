"""The backup and restore procedures of docs/operations.md, run as written: PostgreSQL with ``pg_dump`` /
``pg_restore`` (a service's database, its schema and rows), JetStream with the server stopped and its
store directory archived and unpacked on a new server (every stream, message and sequence)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from sqlalchemy import func, insert, select
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from larkbot.canonical.names import STREAM_EVENTS
from larkbot.pipeline.adapters.tables import partition_offsets
from larkbot.pipeline.app import MIGRATIONS
from larkbot.runtime.bootstrap import bootstrap
from larkbot.runtime.bus import connect
from larkbot.runtime.config import NatsSettings
from larkbot.runtime.db import migrate
from larkbot.runtime.natsserver import EmbeddedNats

from .harness.world import postgres_databases


async def _run(command: list[str]) -> None:
    await asyncio.to_thread(subprocess.run, command, check=True, timeout=120)


def _libpq(url: str) -> str:
    """What pg_dump and pg_restore take: the URL without SQLAlchemy's driver name."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def test_a_service_database_dumped_and_restored_keeps_its_schema_and_rows(tmp_path: Path) -> None:
    base = os.environ.get("TEST_DATABASE_URL")
    if not base:
        pytest.skip("PostgreSQL backups need TEST_DATABASE_URL (.ci/run sets it when a local server answers)")
    if shutil.which("pg_dump") is None or shutil.which("pg_restore") is None:
        pytest.skip(
            "pg_dump / pg_restore are not installed (Debian's postgresql-client; .ci/run installs it)"
        )
    async with postgres_databases(base, ("pipeline", "restored")) as urls:
        engine = create_async_engine(urls["pipeline"])
        try:
            await migrate(engine, MIGRATIONS)
            async with engine.begin() as conn:
                await conn.execute(
                    insert(partition_offsets),
                    [
                        {"consumer": "pipeline", "partition": p, "resume_seq": 1000 + p, "updated_at_ms": 1}
                        for p in range(16)
                    ],
                )
        finally:
            await engine.dispose()
        dump = tmp_path / "pipeline.dump"
        # docs/operations.md "Backup and restore": the commands as an operator runs them.
        await _run(["pg_dump", "-Fc", "-f", str(dump), _libpq(urls["pipeline"])])
        await _run(
            ["pg_restore", "--no-owner", "--clean", "--if-exists", "-d", _libpq(urls["restored"]), str(dump)]
        )
        restored = create_async_engine(urls["restored"])
        try:
            async with restored.connect() as conn:
                rows = (
                    await conn.execute(select(partition_offsets.c.partition, partition_offsets.c.resume_seq))
                ).all()
                version = (await conn.exec_driver_sql("SELECT version_num FROM alembic_version")).scalar_one()
            # The restored database is current: a service starting on it has nothing to migrate.
            await migrate(restored, MIGRATIONS)
            async with restored.connect() as conn:
                assert (
                    await conn.exec_driver_sql("SELECT version_num FROM alembic_version")
                ).scalar_one() == version
                count = (await conn.execute(select(func.count()).select_from(partition_offsets))).scalar_one()
        finally:
            await restored.dispose()
        assert sorted(rows) == [(p, 1000 + p) for p in range(16)]
        assert count == 16


async def test_a_jetstream_store_archived_while_stopped_restores_every_message(tmp_path: Path) -> None:
    server = EmbeddedNats(tmp_path / "nats")
    url = server.start()
    try:
        bus = await connect(NatsSettings(), "backup-test", url=url, give_up_after_s=30)
        try:
            await bootstrap(bus.js)
            for n in range(50):
                await bus.js.publish(
                    f"events.telegram.-100{n % 5}", f"event {n}".encode(), stream=STREAM_EVENTS
                )
            before = await bus.js.stream_info(STREAM_EVENTS)
        finally:
            await bus.close()
    finally:
        server.stop()
    # docs/operations.md: with the server stopped, archive its store directory; unpack it on the new one.
    archive = tmp_path / "jetstream.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "nats" / "jetstream", arcname="jetstream")
    (tmp_path / "new").mkdir()
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "new", filter="data")
    restored = EmbeddedNats(tmp_path / "new")
    url = restored.start()
    try:
        bus = await connect(NatsSettings(), "backup-test", url=url, give_up_after_s=30)
        try:
            after = await bus.js.stream_info(STREAM_EVENTS)
            assert (after.state.messages, after.state.last_seq) == (
                before.state.messages,
                before.state.last_seq,
            )
            assert after.state.messages == 50
            last = await bus.js.get_msg(STREAM_EVENTS, after.state.last_seq)
            assert last.data == b"event 49"
            # The streams and buckets bootstrap declares are all there, and a bootstrap changes nothing.
            await bootstrap(bus.js)
            assert (await bus.js.stream_info(STREAM_EVENTS)).state.messages == 50
        finally:
            await bus.close()
    finally:
        restored.stop()
