"""The read API's one error, and where lower-layer database errors become it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.exc import OperationalError, ProgrammingError

from larkbot.canonical.errors import RetryableError

#: What a read raises when a table is missing or the database does not answer: SQLite reports a missing
#: table as an operational error (which ``runtime.db.transaction`` raises as retryable), PostgreSQL as a
#: programming error; asyncpg's refused or timed-out connection is an ``OSError``.
_NOT_READY = (OperationalError, ProgrammingError, RetryableError, OSError)


class DriverNotReady(RetryableError):
    """The driver's database does not answer, or the driver has not created (or not migrated) its tables
    yet: a fresh deployment, or a driver older than this code. Retryable: it passes once the driver has
    started. ``cause`` names the lower-layer error by its type only (its text may quote a query)."""

    def __init__(self, cause: str) -> None:
        super().__init__(f"the driver's database is not ready ({cause})", delay_s=1.0)
        self.cause = cause


@contextmanager
def not_ready_on_failure() -> Iterator[None]:
    try:
        yield
    except _NOT_READY as exc:
        # ``transaction`` raises its RetryableError from the database's own error: name that one.
        underlying = exc.__context__ if isinstance(exc, RetryableError) and exc.__context__ else exc
        raise DriverNotReady(type(underlying).__name__) from exc
