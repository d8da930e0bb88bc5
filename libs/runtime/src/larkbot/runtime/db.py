"""Database engines and Alembic migrations for services that own tables.

SQLite (aiosqlite, WAL, ``synchronous=NORMAL``, one file per service under ``data/``) by default,
PostgreSQL (asyncpg) in production; both are tested. Migrations run at start-up, in-process, through the
service's own Alembic script directory; there is no runtime fallback for older data shapes.

:func:`transaction` is how a service's code talks to its database:

- **A bound on concurrent work.** At most as many transactions of an engine run at once as its pool keeps
  connections (``PoolLimits.size``); the others wait their turn, without a timeout, before they take a
  connection. Without it every task in flight took a connection and waited in the pool's queue, which
  fails after ``PoolLimits.timeout_s`` ("QueuePool limit of size 10 overflow 10 reached"): under load the
  work now waits instead of failing. A transaction opened inside another in the same task does not wait
  again (it would wait for itself; a task started inside a transaction inherits its turn with the
  context, so start none there); it takes one of the overflow's connections, as do the transactions
  that are not queued (``queued=False``: the readiness check, which asks whether the database answers,
  not how long the queue is). Waiting transactions are ``larkbot_database_transactions_waiting``.
- **One retryable error.** A database error that a retry can fix — SQLite locked or busy, the pool
  exhausted, a connection lost or refused, PostgreSQL's connection, rollback (serialization, deadlock),
  resource and operator-intervention classes — surfaces as :class:`DatabaseUnavailable`, whose message
  names the database's own error class and first line (:func:`describe`): an operator tells a locked
  SQLite from an exhausted pool. Never the statement or its parameters (member text), and a URL's
  password is masked. Anything else (a constraint, a bug) propagates as it is.

SQLite's busy timeout is 5 s, or the URL's ``timeout`` (seconds: ``sqlite+aiosqlite:///data/x.db?timeout=2``).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import event, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.engine.url import make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import PoolResetState, QueuePool

from larkbot.canonical.errors import ConfigError, RetryableError

from . import metrics

__all__ = [
    "POSTGRES_POOL",
    "SQLITE_BUSY_TIMEOUT_S",
    "SQLITE_POOL",
    "DatabaseUnavailable",
    "PoolLimits",
    "alembic_config",
    "create_engine",
    "current_revision",
    "default_sqlite_url",
    "describe",
    "migrate",
    "retryable",
    "transaction",
]

#: SQLite's busy timeout unless the URL sets one (``timeout``, seconds).
SQLITE_BUSY_TIMEOUT_S = 5.0
#: PostgreSQL's error classes (SQLSTATE prefixes) a retry can fix: connection exception (08), transaction
#: rollback (40: serialization failure, deadlock), insufficient resources (53: too many connections),
#: operator intervention (57: shutdown, cannot connect now, a statement cancelled by its timeout).
_RETRYABLE_SQLSTATES = ("08", "40", "53", "57")
#: A URL's password (``scheme://user:password@host``).
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)[^@\s]*@")
#: What :func:`describe` keeps of the database's message.
_DESCRIBE_LIMIT = 300


class DatabaseUnavailable(RetryableError):
    """The database did not answer, or refused for now (locked, busy, out of connections, the connection
    lost): the same work may succeed when tried again. The message names the database's own error."""


@dataclass(frozen=True, slots=True)
class PoolLimits:
    """A service's connection pool: ``size`` connections kept — and as many queued transactions at once
    (:func:`transaction`) —, ``overflow`` more for what is not queued, ``timeout_s`` the wait for one."""

    size: int
    overflow: int
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if self.size < 1 or self.overflow < 0 or self.timeout_s <= 0:
            raise ValueError(f"invalid pool limits {self}")


#: SQLite's (SQLAlchemy's default for a file database) and PostgreSQL's pools.
SQLITE_POOL = PoolLimits(size=5, overflow=10)
POSTGRES_POOL = PoolLimits(size=10, overflow=10)


def default_sqlite_url(data_dir: str, service: str) -> str:
    path = Path(data_dir) / f"{service}.db"
    return f"sqlite+aiosqlite:///{path}"


def create_engine(url: str, *, echo: bool = False, pool: PoolLimits | None = None) -> AsyncEngine:
    """An engine for ``url``; ``pool``: its connection pool (default :data:`SQLITE_POOL` or
    :data:`POSTGRES_POOL`)."""
    parsed = make_url(url)
    kwargs: dict[str, Any] = {"echo": echo}
    if parsed.drivername.startswith("sqlite"):
        if parsed.drivername != "sqlite+aiosqlite":
            raise ConfigError(
                "database_url", "SQLite URLs must use the async driver: sqlite+aiosqlite:///path"
            )
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
            kwargs.update(_pool_options(pool or SQLITE_POOL))
        busy_ms = _busy_timeout_ms(parsed.query.get("timeout"))
        # The pool's own reset rolls back every connection it takes back, one that just committed too: one
        # more hop to aiosqlite's thread per transaction (five for a commit instead of four). It is replaced
        # by a reset that rolls back only a connection still in a transaction.
        engine = create_async_engine(url, pool_reset_on_return=None, **kwargs)

        def pragmas(dbapi_conn: Any, _record: Any) -> None:
            _sqlite_pragmas(dbapi_conn, busy_ms)

        event.listen(engine.sync_engine, "connect", pragmas)
        event.listen(engine.sync_engine.pool, "reset", _sqlite_reset)
        return engine
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+asyncpg")
    elif parsed.drivername != "postgresql+asyncpg":
        raise ConfigError("database_url", f"unsupported database driver {parsed.drivername!r}")
    kwargs.update(_pool_options(pool or POSTGRES_POOL), pool_pre_ping=True)
    return create_async_engine(parsed, **kwargs)


def _pool_options(pool: PoolLimits) -> dict[str, Any]:
    return {"pool_size": pool.size, "max_overflow": pool.overflow, "pool_timeout": pool.timeout_s}


def _busy_timeout_ms(timeout: str | tuple[str, ...] | None) -> int:
    if timeout is None:
        return round(SQLITE_BUSY_TIMEOUT_S * 1000)
    value = timeout[-1] if isinstance(timeout, tuple) else timeout
    try:
        seconds = float(value)
    except ValueError:
        raise ConfigError(
            "database_url", f"SQLite's timeout must be a number of seconds, not {value!r}"
        ) from None
    if seconds < 0:
        raise ConfigError("database_url", "SQLite's timeout must not be negative")
    return round(seconds * 1000)


def _sqlite_pragmas(dbapi_conn: Any, busy_ms: int) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={busy_ms:d}")
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
async def transaction(engine: AsyncEngine, *, queued: bool = True) -> AsyncIterator[AsyncConnection]:
    """One transaction, in its turn among the engine's (``queued``; the module docstring). A database
    error that a retry can fix surfaces as :class:`DatabaseUnavailable`; nothing is swallowed."""
    sync = engine.sync_engine
    holding = _HOLDING.get()
    gate = _gate(sync) if queued and id(sync) not in holding else None
    if gate is not None:
        if gate.locked():
            metrics.DATABASE_WAITING.inc()
            try:
                await gate.acquire()
            finally:
                metrics.DATABASE_WAITING.dec()
        else:
            await gate.acquire()
        _HOLDING.set(holding | {id(sync)})
    try:
        async with engine.begin() as conn:
            yield conn
    except Exception as exc:
        if not retryable(exc):
            raise
        # ``from None``: the original's text holds the statement and its parameters (member text).
        raise DatabaseUnavailable(f"database unavailable: {describe(exc)}", delay_s=1.0) from None
    finally:
        if gate is not None:
            _HOLDING.set(holding)
            gate.release()


def retryable(exc: BaseException) -> bool:
    """Whether a retry may fix the database error ``exc`` (the module docstring)."""
    if isinstance(exc, OperationalError | PoolTimeout | OSError):
        return True
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return True
        state = getattr(exc.orig, "sqlstate", None)
        return isinstance(state, str) and state.startswith(_RETRYABLE_SQLSTATES)
    return False


def describe(exc: BaseException) -> str:
    """The database's own error class and the first line of its message (``OperationalError: database is
    locked``, ``TimeoutError: QueuePool limit of size 10 overflow 10 reached, …``), with PostgreSQL's
    SQLSTATE; never the statement or its parameters, and a URL's password masked."""
    cause: BaseException = exc
    if isinstance(exc, DBAPIError) and isinstance(exc.orig, BaseException):
        cause = exc.orig
    # ``args[0]``: SQLAlchemy's own errors add a link to their documentation to ``str()``.
    said = cause.args[0] if cause.args and isinstance(cause.args[0], str) else str(cause)
    line = _URL_PASSWORD.sub(r"\1***@", said.strip().split("\n", 1)[0])[:_DESCRIBE_LIMIT]
    state = getattr(cause, "sqlstate", None)
    name = type(cause).__name__ + (f" [{state}]" if isinstance(state, str) else "")
    return f"{name}: {line}" if line else name


#: Each engine's turns: a semaphore of its pool's size (``None``: a pool that keeps no count of
#: connections, SQLite in memory's one shared connection, has nothing to bound).
_GATES: weakref.WeakKeyDictionary[Engine, asyncio.Semaphore | None] = weakref.WeakKeyDictionary()
#: The engines whose turn the current task holds (a transaction within a transaction does not wait).
_HOLDING: ContextVar[frozenset[int]] = ContextVar("larkbot_db_holding", default=frozenset())


def _gate(engine: Engine) -> asyncio.Semaphore | None:
    try:
        return _GATES[engine]
    except KeyError:
        pool = engine.pool
        gate = asyncio.Semaphore(pool.size()) if isinstance(pool, QueuePool) else None
        _GATES[engine] = gate
        return gate
