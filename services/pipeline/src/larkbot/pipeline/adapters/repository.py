"""SQL access to the ``events`` table (SQLite and PostgreSQL)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from larkbot.canonical.codec import encode
from larkbot.canonical.errors import RetryableError
from larkbot.canonical.events import CanonicalEvent

from .tables import events


@dataclass(frozen=True, slots=True)
class Stored:
    id: int | None
    duplicate: bool


class EventRepository:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._insert = postgresql.insert if engine.dialect.name == "postgresql" else sqlite.insert

    async def add(self, event: CanonicalEvent, stream_seq: int | None = None) -> Stored:
        """Insert ``event`` unless its dedup key is already stored; committed when this returns."""
        row = {
            "platform": event.platform.value,
            "chat_id": event.chat_id,
            "dedup_key": event.dedup_key,
            "kind": event.kind,
            "message_id": getattr(event, "message_id", None),
            "received_at_ms": event.received_at_ms,
            "timestamp_sec": event.timestamp_sec,
            "payload": encode(event).decode(),
            "stream_seq": stream_seq,
        }
        stmt = (
            self._insert(events)
            .values(**row)
            .on_conflict_do_nothing(index_elements=["platform", "chat_id", "dedup_key"])
            .returning(events.c.id)
        )
        try:
            async with self.engine.begin() as conn:
                inserted = (await conn.execute(stmt)).scalar_one_or_none()
        except OperationalError as exc:
            # Locked or unreachable database: the event stays unacknowledged and comes back.
            raise RetryableError(f"database unavailable: {type(exc.orig).__name__}", delay_s=1.0) from None
        return Stored(id=inserted, duplicate=inserted is None)

    async def count(self, platform: str, chat_id: str) -> int:
        async with self.engine.connect() as conn:
            result = await conn.execute(
                select(func.count())
                .select_from(events)
                .where(events.c.platform == platform, events.c.chat_id == chat_id)
            )
            return int(result.scalar_one())

    async def ping(self) -> None:
        async with self.engine.connect() as conn:
            await conn.execute(select(1))
