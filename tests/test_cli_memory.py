"""``larkbot memory export|forget|stats`` end to end on the driver's database (SQLite, and PostgreSQL when
``TEST_DATABASE_URL`` is set): memories saved through the store, then the operator's commands."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import select

from larkbot.cli.main import main
from larkbot.driver.memory.core.memory import NewMemory, PatchChange
from larkbot.driver.memory.memories import MemoryStore
from larkbot.driver.tables import memory_forgets
from larkbot.runtime.db import create_engine, migrate

MIGRATIONS = Path(__file__).parents[1] / "services" / "driver" / "src" / "larkbot" / "driver" / "migrations"
SECRET = "Alice is allergic to peanuts"


async def larkbot(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The command line, on a thread of its own (it runs its own event loop)."""
    capsys.readouterr()
    status = await asyncio.to_thread(main, list(argv))
    out, err = capsys.readouterr()
    return status, out, err


async def seed(url: str) -> list[int]:
    engine = create_engine(url)
    try:
        await migrate(engine, MIGRATIONS)
        store = MemoryStore(engine)
        alice = [
            await store.save(
                NewMemory("feishu", "ou_alice", SECRET, ("om_1",), "oc_1", "group", "high"), now_ms=1_000
            ),
            await store.save(
                NewMemory("feishu", "ou_alice", "爱喝咖啡", ("om_2",), "oc_1", "private", "normal"),
                now_ms=2_000,
            ),
        ]
        await store.save(
            NewMemory("feishu", "ou_bob", "likes tea", ("om_3",), "oc_1", "global", "normal"), now_ms=3
        )
        await store.save(
            NewMemory("telegram", "ou_alice", "same id, other platform", ("9",), "-100", "group", "normal"),
            now_ms=4,
        )
        await store.patch(
            alice[0].id,
            PatchChange(scope="global"),
            reason="says it everywhere",
            actor="tool",
            chat_id="oc_1",
            now_ms=5_000,
        )
        return [m.id for m in alice]
    finally:
        await engine.dispose()


def write_config(tmp_path: Path, url: str) -> Path:
    config = tmp_path / "config.yaml"
    config.write_text(f"data_dir: {tmp_path / 'data'}\nservices:\n  driver:\n    database_url: '{url}'\n")
    return config


async def test_export_forget_and_stats(
    database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    alice = await seed(database_url)
    config = str(write_config(tmp_path, database_url))

    status, out, _ = await larkbot(
        capsys, "memory", "export", "--person", "ou_alice", "--platform", "feishu", "--config", config
    )
    assert status == 0
    exported = json.loads(out)
    assert exported["person_id"] == "ou_alice"
    assert [m["id"] for m in exported["memories"]] == alice
    first, second = exported["memories"]
    assert (first["content"], first["scope"], first["importance"], first["evidence"]) == (
        SECRET,
        "global",
        "high",
        ["om_1"],
    )
    assert first["patches"] == [
        {
            "id": 1,
            "memory_id": alice[0],
            "change": {"scope": "global"},
            "reason": "says it everywhere",
            "actor": "tool",
            "chat_id": "oc_1",
            "created_at_ms": 5_000,
        }
    ]
    assert (second["content"], second["patches"]) == ("爱喝咖啡", [])

    status, out, _ = await larkbot(capsys, "memory", "export", "--person", "ou_alice", "--config", config)
    assert {m["platform"] for m in json.loads(out)["memories"]} == {"feishu", "telegram"}

    status, out, err = await larkbot(
        capsys, "memory", "forget", "--person", "ou_alice", "--platform", "feishu", "--config", config
    )
    assert status == 2
    assert "--yes" in err

    status, out, _ = await larkbot(
        capsys,
        "memory",
        "forget",
        "--person",
        "ou_alice",
        "--platform",
        "feishu",
        "--yes",
        "--config",
        config,
    )
    assert status == 0
    assert "feishu: forgot 2 memories of ou_alice" in out

    status, out, _ = await larkbot(
        capsys, "memory", "export", "--person", "ou_alice", "--platform", "feishu", "--config", config
    )
    assert json.loads(out) == {"person_id": "ou_alice", "memories": []}

    status, out, _ = await larkbot(capsys, "memory", "stats", "--config", config)
    assert status == 0
    assert json.loads(out) == {
        "total": 2,
        "enabled": 2,
        "persons": 2,
        "by_scope": {"global": 1, "group": 1},
        "by_importance": {"normal": 2},
        "patches": 0,
        "forgets": 1,
    }

    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn:
            log = (await conn.execute(select(memory_forgets))).mappings().all()
    finally:
        await engine.dispose()
    assert [(r["platform"], r["person_id"], r["count"], r["actor"]) for r in log] == [
        ("feishu", "ou_alice", 2, "operator")
    ]
    assert SECRET not in json.dumps([{k: str(v) for k, v in r.items()} for r in log])

    # Without --platform, every platform.
    status, out, _ = await larkbot(
        capsys, "memory", "forget", "--person", "ou_alice", "--yes", "--config", config
    )
    assert out.splitlines() == [
        "feishu: forgot 0 memories of ou_alice",
        "telegram: forgot 1 memories of ou_alice",
    ]


async def test_the_commands_find_the_driver_database_under_the_data_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LARKBOT_DATA_DIR", raising=False)
    config = tmp_path / "config.yaml"
    config.write_text(f"data_dir: {tmp_path / 'data'}\n")
    await seed(f"sqlite+aiosqlite:///{tmp_path / 'data' / 'driver.db'}")
    status, out, _ = await larkbot(capsys, "memory", "stats", "--config", str(config))
    assert (status, json.loads(out)["total"]) == (0, 4)

    # A fresh data directory: only the driver creates its tables (at start-up); the commands say so.
    monkeypatch.setenv("LARKBOT_DATA_DIR", str(tmp_path / "fresh"))
    for command in (["export", "--person", "ou_x"], ["forget", "--person", "ou_x", "--yes"], ["stats"]):
        status, out, err = await larkbot(capsys, "memory", *command, "--config", str(config))
        assert (status, out) == (1, ""), command
        assert "larkbot memory: the driver's database is not ready" in err
        assert "start the driver" in err
    assert tables(tmp_path / "fresh" / "driver.db") == []


def tables(sqlite_file: Path) -> list[str]:
    """The tables of a SQLite file (none when it does not exist)."""
    if not sqlite_file.exists():
        return []
    with contextlib.closing(sqlite3.connect(sqlite_file)) as db:
        return [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]


async def test_a_broken_configuration_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("services:\n  driver:\n    database_url: 5\n    nope: 1\n")
    status, _, err = await larkbot(capsys, "memory", "stats", "--config", str(bad))
    assert status == 2
    assert "services.driver" in err
