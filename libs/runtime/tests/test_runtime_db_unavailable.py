"""``runtime.db.transaction`` under a database that cannot serve now: the error a retry may fix surfaces as
``DatabaseUnavailable`` naming the database's own message (never the statement, its parameters or a
password), and transactions beyond the pool wait for their turn instead of failing."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from larkbot.runtime.db import (
    DatabaseUnavailable,
    PoolLimits,
    create_engine,
    describe,
    retryable,
    transaction,
)
from larkbot.testkit.stack import until

WAIT_S = 30.0


def _url(tmp_path: Path, query: str = "") -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'x.db'}{query}"


async def _table(url: str) -> None:
    engine = create_engine(url)
    try:
        async with transaction(engine) as conn:
            await conn.execute(text("CREATE TABLE t (a TEXT)"))
    finally:
        await engine.dispose()


def _waiting() -> float:
    return REGISTRY.get_sample_value("larkbot_database_transactions_waiting") or 0.0


async def test_a_locked_sqlite_names_sqlites_own_message_and_not_the_statement(tmp_path: Path) -> None:
    url = _url(tmp_path, "?timeout=0.1")  # the busy timeout, shortened through the URL
    await _table(url)
    other = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    engine = create_engine(url)
    try:
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(DatabaseUnavailable) as caught:
            async with transaction(engine) as conn:
                await conn.execute(text("INSERT INTO t VALUES (:a)"), {"a": "a member's words"})
        message = str(caught.value)
        assert message == "database unavailable: OperationalError: database is locked"
        assert caught.value.__cause__ is None
        assert caught.value.__suppress_context__
        other.execute("ROLLBACK")
        async with transaction(engine) as conn:
            await conn.execute(text("INSERT INTO t VALUES ('again')"))
    finally:
        other.close()
        await engine.dispose()


async def test_an_exhausted_pool_names_the_pool(tmp_path: Path) -> None:
    url = _url(tmp_path)
    await _table(url)
    engine = create_engine(url, pool=PoolLimits(size=1, overflow=0, timeout_s=0.1))
    try:
        async with engine.connect():  # the pool's one connection, taken past the turns
            with pytest.raises(DatabaseUnavailable) as caught:
                async with transaction(engine) as conn:
                    await conn.execute(text("SELECT 1"))
        assert str(caught.value).startswith(
            "database unavailable: TimeoutError: QueuePool limit of size 1 overflow 0 reached"
        )
        assert "sqlalche.me" not in str(caught.value)
    finally:
        await engine.dispose()


async def test_transactions_beyond_the_pool_wait_for_their_turn(tmp_path: Path) -> None:
    url = _url(tmp_path)
    await _table(url)
    timeout_s = 0.1
    engine = create_engine(url, pool=PoolLimits(size=1, overflow=0, timeout_s=timeout_s))
    go = asyncio.Event()
    holding = asyncio.Event()
    order: list[int] = []

    async def work(n: int) -> None:
        async with transaction(engine) as conn:
            await conn.execute(text("INSERT INTO t VALUES (:a)"), {"a": str(n)})
            if n == 0:
                holding.set()
                await go.wait()
            order.append(n)

    try:
        first = asyncio.create_task(work(0))
        await asyncio.wait_for(holding.wait(), WAIT_S)
        rest = [asyncio.create_task(work(n)) for n in range(1, 5)]
        await until(lambda: _waiting() >= 4, "the transactions to queue")
        # Held for longer than the pool lets a checkout wait: the queued ones must not have failed.
        await asyncio.sleep(3 * timeout_s)
        assert not any(task.done() for task in rest)
        go.set()
        await asyncio.wait_for(asyncio.gather(first, *rest), WAIT_S)
        assert order[0] == 0
        assert sorted(order) == [0, 1, 2, 3, 4]
        assert _waiting() == 0
    finally:
        await engine.dispose()


async def test_a_transaction_within_a_transaction_does_not_wait_for_itself(tmp_path: Path) -> None:
    url = _url(tmp_path)
    await _table(url)
    engine = create_engine(url, pool=PoolLimits(size=1, overflow=1, timeout_s=WAIT_S))
    try:
        async with asyncio.timeout(WAIT_S):
            async with transaction(engine) as outer:
                await outer.execute(text("SELECT 1"))
                async with transaction(engine) as inner:
                    await inner.execute(text("INSERT INTO t VALUES ('inner')"))
        async with transaction(engine) as conn:
            assert (await conn.execute(text("SELECT a FROM t"))).scalars().all() == ["inner"]
    finally:
        await engine.dispose()


class _PgError(Exception):
    def __init__(self, message: str, sqlstate: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (OperationalError("INSERT …", {}, sqlite3.OperationalError("database is locked")), True),
        (PoolTimeout("QueuePool limit of size 10 overflow 10 reached"), True),
        (ConnectionResetError("Connection reset by peer"), True),
        (DBAPIError("SELECT 1", {}, _PgError("could not serialize access", "40001")), True),
        (DBAPIError("SELECT 1", {}, _PgError("sorry, too many clients already", "53300")), True),
        (DBAPIError("SELECT 1", {}, _PgError("terminating connection", "57P01")), True),
        (DBAPIError("SELECT 1", {}, Exception("closed"), connection_invalidated=True), True),
        (IntegrityError("INSERT …", {}, _PgError("duplicate key value", "23505")), False),
        (DBAPIError("SELECT 1", {}, _PgError("syntax error", "42601")), False),
        (ValueError("a bug"), False),
    ],
)
def test_what_a_retry_may_fix(error: BaseException, expected: bool) -> None:
    assert retryable(error) is expected


def test_the_description_keeps_the_first_line_and_masks_a_password() -> None:
    pg = DBAPIError("SELECT 1", {}, _PgError("sorry, too many clients already\nDETAIL: more", "53300"))
    assert describe(pg) == "_PgError [53300]: sorry, too many clients already"
    refused = OSError("cannot reach postgresql+asyncpg://larkbot:s3cret-pw@db.internal:5432/larkbot")
    said = describe(refused)
    assert "s3cret-pw" not in said
    assert said == "OSError: cannot reach postgresql+asyncpg://larkbot:***@db.internal:5432/larkbot"
    assert describe(PoolTimeout("QueuePool limit of size 1 overflow 0 reached")) == (
        "TimeoutError: QueuePool limit of size 1 overflow 0 reached"
    )
