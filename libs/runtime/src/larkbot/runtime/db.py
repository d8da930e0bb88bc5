"""Database engines and Alembic migrations for services that own tables.

SQLite (aiosqlite, WAL, ``synchronous=NORMAL``, one file per service under ``data/``) by default,
PostgreSQL (asyncpg) in production; both are tested. Migrations run at start-up, in-process, through the
service's own Alembic script directory; there is no runtime fallback for older data shapes.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import event, text
from sqlalchemy.engine import Connection
from sqlalchemy.engine.url import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import PoolResetState

from larkbot.canonical.errors import ConfigError, RetryableError

__all__ = [
    "alembic_config",
    "create_engine",
    "current_revision",
    "default_sqlite_url",
    "migrate",
    "transaction",
]


def default_sqlite_url(data_dir: str, service: str) -> str:
    path = Path(data_dir) / f"{service}.db"
    return f"sqlite+aiosqlite:///{path}"


def create_engine(url: str, *, echo: bool = False) -> AsyncEngine:
    parsed = make_url(url)
    kwargs: dict[str, Any] = {"echo": echo}
    if parsed.drivername.startswith("sqlite"):
        if parsed.drivername != "sqlite+aiosqlite":
            raise ConfigError(
                "database_url", "SQLite URLs must use the async driver: sqlite+aiosqlite:///path"
            )
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        # The pool's own reset rolls back every connection it takes back, one that just committed too: one
        # more hop to aiosqlite's thread per transaction (five for a commit instead of four). It is replaced
        # by a reset that rolls back only a connection still in a transaction.
        engine = create_async_engine(url, pool_reset_on_return=None, **kwargs)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        event.listen(engine.sync_engine.pool, "reset", _sqlite_reset)
        return engine
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+asyncpg")
    elif parsed.drivername != "postgresql+asyncpg":
        raise ConfigError("database_url", f"unsupported database driver {parsed.drivername!r}")
    kwargs.update(pool_size=10, max_overflow=10, pool_pre_ping=True)
    return create_async_engine(parsed, **kwargs)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


def _sqlite_reset(dbapi_conn: Any, record: Any, state: PoolResetState) -> None:
    """A connection back in the pool still in a transaction (returned without its commit or rollback) is
    rolled back; ``in_transaction`` is SQLite's own state, read without a hop to the database thread."""
    if state.asyncio_safe and not state.transaction_was_reset and record.driver_connection.in_transaction:
        dbapi_conn.rollback()


def alembic_config(script_location: Path, connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(script_location))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


async def migrate(engine: AsyncEngine, script_location: Path, revision: str = "head") -> None:
    """Upgrade the database to ``revision`` with the service's migrations.

    On PostgreSQL the upgrade holds a transaction-scoped advisory lock named after the script directory,
    so replicas starting together on an empty database migrate one after the other (the second finds the
    schema at head) instead of racing to create the same tables."""

    def upgrade(sync_conn: Connection) -> None:
        command.upgrade(alembic_config(script_location, sync_conn), revision)

    async with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            await conn.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": _lock_key(script_location)}
            )
        await conn.run_sync(upgrade)


def _lock_key(script_location: Path) -> int:
    """A stable signed 64-bit advisory-lock key per migration directory (``<package>/migrations``)."""
    name = f"larkbot-migrations:{script_location.parent.name}/{script_location.name}"
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


async def current_revision(engine: AsyncEngine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    def read(sync_conn: Connection) -> str | None:
        return MigrationContext.configure(sync_conn).get_current_revision()

    async with engine.connect() as conn:
        return await conn.run_sync(read)


@asynccontextmanager
async def transaction(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """One transaction. A database error that a retry can fix (locked, unreachable) surfaces as
    :class:`RetryableError`; nothing is swallowed."""
    try:
        async with engine.begin() as conn:
            yield conn
    except OperationalError as exc:
        raise RetryableError(f"database unavailable: {type(exc.orig).__name__}", delay_s=1.0) from None
