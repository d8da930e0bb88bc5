"""The body of every service's Alembic ``env.py``: migrate on the connection handed in by :func:`db.migrate`.

Each service's ``migrations/env.py`` is two lines::

    from larkbot.runtime.migrations import run_env
    from larkbot.pipeline.adapters.tables import metadata
    run_env(metadata)
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import MetaData

__all__ = ["run_env"]


def run_env(metadata: MetaData) -> None:
    connection = context.config.attributes.get("connection")
    if connection is None:
        raise RuntimeError(
            "migrations run in-process through larkbot.runtime.db.migrate(), not the alembic CLI"
        )
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()
