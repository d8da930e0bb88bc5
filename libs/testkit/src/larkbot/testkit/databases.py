"""Fresh PostgreSQL databases for tests and benchmarks: created on a server the caller names, dropped
(with their connections) afterwards, whatever happened in between."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from sqlalchemy.engine.url import make_url

__all__ = ["fresh_postgres"]


@asynccontextmanager
async def fresh_postgres(
    base_url: str, names: Sequence[str], *, prefix: str
) -> AsyncIterator[dict[str, str]]:
    """One new database per name on ``base_url``'s server (``<prefix>_<name>_<random>``); yields each
    name's ``postgresql+asyncpg`` URL."""
    import asyncpg  # type: ignore[import-untyped]

    url = make_url(base_url).set(drivername="postgresql+asyncpg")
    admin_dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
    created = {name: f"{prefix}_{name}_{secrets.token_hex(4)}" for name in names}
    admin = await asyncpg.connect(admin_dsn)
    try:
        for db in created.values():
            await admin.execute(f'CREATE DATABASE "{db}"')
    finally:
        await admin.close()
    try:
        yield {
            name: url.set(database=db).render_as_string(hide_password=False) for name, db in created.items()
        }
    finally:
        admin = await asyncpg.connect(admin_dsn)
        try:
            for db in created.values():
                await admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        finally:
            await admin.close()
