"""The driver's public read API (``larkbot.driver.read``) and the operator's forget, on SQLite and
PostgreSQL: reads through an engine the database refuses writes on, "not ready" before the driver has
created its tables (and no table created by asking), memories by person and by chat."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import insert, inspect, select
from sqlalchemy.exc import DBAPIError

import larkbot.driver.read as read
from larkbot.driver.app import MIGRATIONS
from larkbot.driver.forget import forget_person
from larkbot.driver.memory.core.memory import NewMemory, PatchChange
from larkbot.driver.memory.memories import MemoryStore
from larkbot.driver.read import DriverNotReady, DriverReads, open_reads
from larkbot.driver.read._engine import read_only_engine
from larkbot.driver.tables import memory_forgets
from larkbot.runtime.db import create_engine, migrate

Read = Callable[[DriverReads], Awaitable[Any]]

#: Every read of the API, each called as an operator tool would.
READS: dict[str, Read] = {
    "chats": lambda r: r.chats(),
    "latest_wakeups": lambda r: r.latest_wakeups("feishu", "oc_1", limit=5),
    "wakeups_since": lambda r: r.wakeups_since("feishu", "oc_1", since_ms=0),
    "wake": lambda r: r.wake("w1"),
    "wake_of_sent": lambda r: r.wake_of_sent("feishu", "oc_1", "om_1"),
    "compactions": lambda r: r.compactions("feishu", "oc_1"),
    "memories_of_chat": lambda r: r.memories_of_chat("feishu", "oc_1", limit=5),
    "memories_of_person": lambda r: r.memories_of_person("feishu", "ou_alice"),
    "memory_stats": lambda r: r.memory_stats(),
}


def test_the_package_exports_exactly_its_public_names() -> None:
    # Derived from the package's namespace, never a copied list.
    public = {name for name in vars(read) if not name.startswith("_")}
    assert sorted(read.__all__) == sorted(public)
    assert set(READS) == {n for n in vars(DriverReads) if not n.startswith("_")} - {"ping"}


async def _table_names(url: str) -> list[str]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(lambda sync: inspect(sync).get_table_names())
    finally:
        await engine.dispose()


async def test_before_the_driver_created_its_tables_every_read_is_not_ready(database_url: str) -> None:
    async with open_reads(database_url) as reads:
        await reads.ping()  # the database answers; its tables are not there
        for name, call in READS.items():
            with pytest.raises(DriverNotReady) as caught:
                await call(reads)
            assert caught.value.cause in ("OperationalError", "ProgrammingError"), name
    with pytest.raises(DriverNotReady):
        await forget_person(database_url, "feishu", "ou_alice", now_ms=1)
    assert await _table_names(database_url) == []  # asking created nothing


async def test_a_database_that_does_not_answer_is_not_ready() -> None:
    url = "postgresql+asyncpg://nobody@127.0.0.1:9/none"  # the discard port: nothing listens
    async with open_reads(url) as reads:
        with pytest.raises(DriverNotReady):
            await reads.ping()


async def test_the_read_engine_refuses_writes(database_url: str) -> None:
    writer = create_engine(database_url)
    try:
        await migrate(writer, MIGRATIONS)
    finally:
        await writer.dispose()
    row = {"platform": "feishu", "person_id": "ou_alice", "count": 0, "actor": "operator", "created_at_ms": 1}
    engine = read_only_engine(database_url)
    try:
        # Twice: a refused write rolls back, and the connection the pool hands out next refuses too.
        for _ in range(2):
            with pytest.raises(DBAPIError, match=r"(?i)read.?only"):
                async with engine.begin() as conn:
                    await conn.execute(insert(memory_forgets).values(**row))
        async with engine.connect() as conn:
            assert (await conn.execute(select(memory_forgets.c.id))).all() == []
    finally:
        await engine.dispose()


async def test_memories_by_person_carry_their_own_patches_and_by_chat_the_newest_first(
    database_url: str,
) -> None:
    engine = create_engine(database_url)
    try:
        await migrate(engine, MIGRATIONS)
        store = MemoryStore(engine)

        def alice(content: str, chat: str = "oc_1") -> NewMemory:
            return NewMemory("feishu", "ou_alice", content, ("om_1",), chat, "group", "normal")

        first = await store.save(alice("likes tea"), now_ms=1_000)
        second = await store.save(alice("moved to Lyon"), now_ms=2_000)
        elsewhere = await store.save(alice("in another chat", chat="oc_2"), now_ms=3_000)
        bob = await store.save(
            NewMemory("feishu", "ou_bob", "plays go", ("om_9",), "oc_1", "group", "high"), now_ms=4_000
        )
        for change, at in ((PatchChange(importance="high"), 5_000), (PatchChange(enabled=False), 6_000)):
            await store.patch(first.id, change, reason="why", actor="tool", chat_id="oc_1", now_ms=at)
        await store.patch(
            second.id, PatchChange(scope="global"), reason="said so", actor="tool", chat_id=None, now_ms=7_000
        )
    finally:
        await engine.dispose()

    async with open_reads(database_url) as reads:
        person = await reads.memories_of_person("feishu", "ou_alice")
        chat = await reads.memories_of_chat("feishu", "oc_1", limit=10)
        newest = await reads.memories_of_chat("feishu", "oc_1", limit=2)
        stats = await reads.memory_stats()

    assert [m.memory.id for m in person] == [first.id, second.id, elsewhere.id]
    assert [[p.change.as_dict() for p in m.patches] for m in person] == [
        [{"importance": "high"}, {"enabled": False}],
        [{"scope": "global"}],
        [],
    ]
    assert (person[0].memory.importance, person[0].memory.enabled) == ("high", False)
    assert [m.id for m in chat] == [bob.id, second.id, first.id]  # disabled ones too; not oc_2's
    assert [m.id for m in newest] == [bob.id, second.id]
    assert (stats.total, stats.enabled, stats.patches, stats.forgets) == (4, 3, 3, 0)


async def test_the_operators_forget_deletes_and_logs_through_the_drivers_store(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        await migrate(engine, MIGRATIONS)
        store = MemoryStore(engine)
        for content in ("likes tea", "moved to Lyon"):
            new = NewMemory("feishu", "ou_alice", content, ("om_1",), "oc_1", "group", "normal")
            await store.save(new, now_ms=1)
        assert await forget_person(database_url, "feishu", "ou_alice", now_ms=9_000) == 2
        assert await store.for_person("feishu", "ou_alice") == []
        async with engine.connect() as conn:
            log = (await conn.execute(select(memory_forgets))).mappings().all()
    finally:
        await engine.dispose()
    assert [(r["person_id"], r["count"], r["actor"], r["created_at_ms"]) for r in log] == [
        ("ou_alice", 2, "operator", 9_000)
    ]
