"""A read-only engine on the driver's database: the database itself refuses a write through it.

SQLite: ``PRAGMA query_only`` on every connection (a plain ``mode=ro`` open would fail whenever the driver
is down, because a WAL database read-only needs its ``-shm`` file, which the last connection removes).
PostgreSQL: every transaction of the session is ``READ ONLY`` (set on the raw connection, outside any
transaction, so a rollback cannot undo it). A read-only role does the same from the server's side.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from larkbot.runtime.db import create_engine


def read_only_engine(url: str) -> AsyncEngine:
    engine = create_engine(url)
    listener = _sqlite_query_only if engine.dialect.name == "sqlite" else _postgresql_read_only
    event.listen(engine.sync_engine, "connect", listener)
    return engine


def _sqlite_query_only(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA query_only = ON")
    cursor.close()


def _postgresql_read_only(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.run_async(lambda conn: conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY"))
