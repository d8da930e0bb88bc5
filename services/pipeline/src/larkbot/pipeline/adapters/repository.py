"""SQL access (SQLite and PostgreSQL): commit batches of events (:mod:`.writes`), read them back in the
order of record (:mod:`.reads`), and the partitions' resume points, the chats' compaction cursors and the
alt-text cache.

Database failures surface as :class:`~..errors.DatabaseUnavailable` (a ``RetryableError``); the consumer
retries the same batch in-process rather than nak'ing, because a nak'ed message would be redelivered after
later messages of its chat and break per-chat order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from ..errors import DatabaseUnavailable
from .reads import ChatKey, EventReads
from .tables import alt_texts, chat_cursors, partition_offsets
from .writes import BatchWriter, NewEvent, Stored

#: The ``partition_offsets.consumer`` of the pipeline's consumption of ``EVENTS``.
OFFSETS_CONSUMER = "pipeline"


class EventRepository(EventReads):
    def __init__(self, engine: AsyncEngine) -> None:
        super().__init__(engine)
        postgres = engine.dialect.name == "postgresql"
        self._insert = postgresql.insert if postgres else sqlite.insert
        self._writer = BatchWriter(postgres)

    async def commit(
        self,
        batch: Sequence[NewEvent],
        alts: Iterable[tuple[str, str]] = (),
        offsets: Mapping[int, int] | None = None,
        *,
        consumer: str = OFFSETS_CONSUMER,
        at_ms: int = 0,
    ) -> list[int | Stored]:
        """Insert the batch in one transaction; the id of each event, or for an item whose key is taken
        (already stored, or repeated within the batch) the copy that holds it — read only when a key was
        taken, so a batch without repeats costs no extra round trip. Also archives senders, caches alt
        texts and records each partition's resume point (``offsets``: partition → resume_seq) in the same
        transaction."""
        try:
            async with self.engine.begin() as conn:
                ids = await self._writer.write(conn, batch, list(alts)) if batch or alts else []
                if offsets:
                    await self._writer.set_offsets(conn, consumer, offsets, at_ms)
                return ids
        except (OperationalError, IntegrityError, DBAPIError) as exc:
            # Locked or unreachable database, or a concurrent writer won a key: nothing was committed.
            raise DatabaseUnavailable(f"database unavailable: {type(exc.orig).__name__}") from None

    async def resume_seq(self, partition: int, consumer: str = OFFSETS_CONSUMER) -> int | None:
        """Where ``partition`` resumes (``None``: never recorded, i.e. the start of the stream)."""
        try:
            async with self.engine.connect() as conn:
                found = await conn.execute(
                    select(partition_offsets.c.resume_seq).where(
                        partition_offsets.c.consumer == consumer, partition_offsets.c.partition == partition
                    )
                )
                value = found.scalar_one_or_none()
        except (OperationalError, DBAPIError) as exc:
            raise DatabaseUnavailable(f"database unavailable: {type(exc.orig).__name__}") from None
        return int(value) if value is not None else None

    async def offsets(self, consumer: str = OFFSETS_CONSUMER) -> dict[int, int]:
        async with self.engine.connect() as conn:
            found = await conn.execute(
                select(partition_offsets.c.partition, partition_offsets.c.resume_seq).where(
                    partition_offsets.c.consumer == consumer
                )
            )
            return {int(p): int(seq) for p, seq in found.all()}

    async def cursors(self) -> dict[ChatKey, int]:
        async with self.engine.connect() as conn:
            found = await conn.execute(
                select(chat_cursors.c.platform, chat_cursors.c.chat_id, chat_cursors.c.cursor)
            )
            return {(p, c): int(cursor) for p, c, cursor in found.all()}

    async def cursor(self, platform: str, chat_id: str) -> int:
        """The chat's compaction cursor (0: none)."""
        async with self.engine.connect() as conn:
            found = await conn.execute(
                select(chat_cursors.c.cursor).where(
                    chat_cursors.c.platform == platform, chat_cursors.c.chat_id == chat_id
                )
            )
            return int(found.scalar_one_or_none() or 0)

    async def set_cursor(self, platform: str, chat_id: str, cursor: int, reason: str, at_ms: int) -> None:
        stmt = self._insert(chat_cursors).values(
            platform=platform, chat_id=chat_id, cursor=cursor, reason=reason, updated_at_ms=at_ms
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=["platform", "chat_id"],
            set_={"cursor": cursor, "reason": reason, "updated_at_ms": at_ms},
        )
        async with self.engine.begin() as conn:
            await conn.execute(stmt)

    async def alt_texts(self, keys: Iterable[str]) -> dict[str, str]:
        wanted = sorted(set(keys))
        out: dict[str, str] = {}
        async with self.engine.connect() as conn:
            for start in range(0, len(wanted), 500):
                found = await conn.execute(
                    select(alt_texts.c.cache_key, alt_texts.c.alt_text).where(
                        alt_texts.c.cache_key.in_(wanted[start : start + 500])
                    )
                )
                out.update({k: v for k, v in found.all()})
        return out

    async def ping(self) -> None:
        async with self.engine.connect() as conn:
            await conn.execute(select(1))
