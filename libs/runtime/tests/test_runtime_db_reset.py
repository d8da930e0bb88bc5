"""SQLite connections back in the pool: one that committed is not rolled back again (a hop to aiosqlite's
thread per transaction), one still in a transaction is."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import aiosqlite.core
import pytest
from sqlalchemy import text
from sqlalchemy.util import greenlet_spawn

from larkbot.runtime.db import create_engine, transaction


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> collections.Counter[str]:
    """What each transaction asks aiosqlite's thread to do, by name."""
    seen: collections.Counter[str] = collections.Counter()
    original = aiosqlite.core.Connection._execute

    async def counted(self: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
        seen[getattr(fn, "__name__", "?")] += 1
        return await original(self, fn, *args, **kwargs)

    monkeypatch.setattr(aiosqlite.core.Connection, "_execute", counted)
    return seen


async def test_a_committed_transaction_takes_four_hops_and_no_rollback(
    tmp_path: Path, hops: collections.Counter[str]
) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'x.db'}")
    try:
        async with transaction(engine) as conn:
            await conn.execute(text("CREATE TABLE t (a INTEGER)"))
        hops.clear()
        for a in range(3):
            async with transaction(engine) as conn:
                await conn.execute(text("INSERT INTO t VALUES (:a)"), {"a": a})
        assert dict(hops) == {"cursor": 3, "execute": 3, "close": 3, "commit": 3}
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT count(*) FROM t"))).scalar() == 3
    finally:
        await engine.dispose()


async def test_a_connection_returned_inside_a_transaction_is_rolled_back(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'x.db'}")
    try:
        async with transaction(engine) as conn:
            await conn.execute(text("CREATE TABLE t (a INTEGER)"))

        def left_open() -> None:
            # Past SQLAlchemy's own connection (which ends what it began): the pool's reset is all there is.
            raw = engine.sync_engine.raw_connection()
            cursor = raw.cursor()
            cursor.execute("BEGIN IMMEDIATE")
            cursor.execute("INSERT INTO t VALUES (1)")
            cursor.close()
            raw.close()

        await greenlet_spawn(left_open)
        # Had it stayed open, its write lock would refuse this write (busy_timeout 5 s, then "locked").
        async with transaction(engine) as conn:
            await conn.execute(text("INSERT INTO t VALUES (2)"))
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT a FROM t"))).scalars().all() == [2]
    finally:
        await engine.dispose()
