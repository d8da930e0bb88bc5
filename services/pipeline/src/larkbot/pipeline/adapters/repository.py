"""SQL access (SQLite and PostgreSQL): commit batches of events, read them back in the order of record.

Database failures surface as :class:`DatabaseUnavailable` (a ``RetryableError``); the consumer retries the
same batch in-process rather than nak'ing, because a nak'ed message would be redelivered after later
messages of its chat and break per-chat order.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import func, insert, select, tuple_
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from larkbot.canonical.codec import decode_as, encode
from larkbot.canonical.errors import RetryableError
from larkbot.canonical.events import (
    EVENT_ADAPTER,
    CanonicalEvent,
    DeleteEvent,
    EditEvent,
    MessageEvent,
    Sender,
)

from ..core.aliases import alias_for
from .tables import alt_texts, chat_cursors, events, partition_offsets, users

ChatKey = tuple[str, str]

#: The ``partition_offsets.consumer`` of the pipeline's consumption of ``EVENTS``.
OFFSETS_CONSUMER = "pipeline"


class DatabaseUnavailable(RetryableError):
    """The database did not answer or refused the transaction; the batch is retried as a whole."""


@dataclass(frozen=True, slots=True)
class NewEvent:
    event: CanonicalEvent
    stream_seq: int | None = None
    #: The event's JSON as delivered, when it is exactly ``event`` (saves encoding it again).
    payload: bytes | None = None


@dataclass(frozen=True, slots=True)
class MemberRow:
    """One message of a member: its id, the first row that holds it, its platform time."""

    message_id: str
    event_id: int
    timestamp_sec: float


@dataclass(frozen=True, slots=True)
class Stored:
    """What already holds a batch item's key: a row of the table (``event_id``), or an earlier item of
    the same batch (``event_id`` of the row it became)."""

    event_id: int
    event: CanonicalEvent


def _row(item: NewEvent) -> dict[str, object]:
    event = item.event
    message_id = getattr(event, "message_id", None)
    if isinstance(event, DeleteEvent) and len(event.message_ids) == 1:
        message_id = event.message_ids[0]
    return {
        "platform": event.platform.value,
        "chat_id": event.chat_id,
        "dedup_key": event.dedup_key,
        "kind": event.kind,
        "message_id": message_id,
        "received_at_ms": event.received_at_ms,
        "timestamp_sec": event.timestamp_sec,
        "payload": (item.payload if item.payload is not None else encode(event)).decode(),
        "stream_seq": item.stream_seq,
        # An edit of a message the context never held renders as that message, under its alias.
        "message_alias": alias_for(event.chat_id, event.message_id)
        if isinstance(event, MessageEvent | EditEvent)
        else None,
        "sender_id": event.sender.id if isinstance(event, MessageEvent) else None,
    }


def decode_event(payload: str) -> CanonicalEvent:
    return decode_as(payload.encode(), EVENT_ADAPTER)


class EventRepository:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._pg = engine.dialect.name == "postgresql"
        self._insert = postgresql.insert if self._pg else sqlite.insert

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
                ids = await self._commit(conn, batch, list(alts)) if batch or alts else []
                if offsets:
                    await self._set_offsets(conn, consumer, offsets, at_ms)
                return ids
        except (OperationalError, IntegrityError, DBAPIError) as exc:
            # Locked or unreachable database, or a concurrent writer won a key: nothing was committed.
            raise DatabaseUnavailable(f"database unavailable: {type(exc.orig).__name__}") from None

    async def _commit(
        self, conn: AsyncConnection, batch: Sequence[NewEvent], alts: list[tuple[str, str]]
    ) -> list[int | Stored]:
        keys = [(i.event.platform.value, i.event.chat_id, i.event.dedup_key) for i in batch]
        # Repeats within the batch: the first one counts.
        seen: set[tuple[str, str, str]] = set()
        candidates: list[int] = []
        for index, key in enumerate(keys):
            if key not in seen:
                seen.add(key)
                candidates.append(index)
        out: list[int | None] = [None] * len(batch)
        if not candidates:
            inserted: list[int] = []
        elif self._pg:
            inserted = await self._insert_pg(conn, batch, keys, candidates, out)
        else:
            inserted = await self._insert_sqlite(conn, batch, keys, candidates, out)
        if inserted:
            await self._archive_senders(conn, [batch[i].event for i in inserted])
        if alts:
            stmt = self._insert(alt_texts).on_conflict_do_nothing(index_elements=["cache_key"])
            await conn.execute(stmt, [{"cache_key": k, "alt_text": v} for k, v in dict(alts).items()])
        return await self._holders(conn, batch, keys, out)

    async def _holders(
        self,
        conn: AsyncConnection,
        batch: Sequence[NewEvent],
        keys: list[tuple[str, str, str]],
        out: list[int | None],
    ) -> list[int | Stored]:
        """Fill in, for every item that got no row, the copy holding its key."""
        taken = [i for i, new_id in enumerate(out) if new_id is None]
        if not taken:
            return [new_id for new_id in out if new_id is not None]
        first: dict[tuple[str, str, str], int] = {}
        for index, key in enumerate(keys):
            first.setdefault(key, index)
        holders: dict[tuple[str, str, str], Stored] = {}
        for key, index in first.items():
            new_id = out[index]
            if new_id is not None:
                holders[key] = Stored(new_id, batch[index].event)
        missing = sorted({keys[i] for i in taken} - holders.keys())
        for start in range(0, len(missing), 500):
            found = await conn.execute(
                select(
                    events.c.id, events.c.platform, events.c.chat_id, events.c.dedup_key, events.c.payload
                ).where(
                    tuple_(events.c.platform, events.c.chat_id, events.c.dedup_key).in_(
                        missing[start : start + 500]
                    )
                )
            )
            for row_id, platform, chat_id, dedup_key, payload in found.all():
                holders[(platform, chat_id, dedup_key)] = Stored(int(row_id), decode_event(payload))
        return [new_id if new_id is not None else holders[keys[i]] for i, new_id in enumerate(out)]

    async def _insert_sqlite(
        self,
        conn: AsyncConnection,
        batch: Sequence[NewEvent],
        keys: list[tuple[str, str, str]],
        candidates: list[int],
        out: list[int | None],
    ) -> list[int]:
        """One multi-row ``INSERT … ON CONFLICT DO NOTHING RETURNING``: a stored key returns no row (a
        duplicate). SQLite assigns rowids in VALUES order, so ids keep the batch's order; returned rows are
        matched back by key. (``sort_by_parameter_order`` would degrade to one INSERT per row here, and a
        lookup of existing keys first cost a scan per batch: both measured.)"""
        stmt = sqlite.insert(events).on_conflict_do_nothing(
            index_elements=["platform", "chat_id", "dedup_key"]
        )
        result = await conn.execute(
            stmt.returning(events.c.id, events.c.platform, events.c.chat_id, events.c.dedup_key),
            [_row(batch[i]) for i in candidates],
        )
        by_key = {(p, c, d): int(i) for i, p, c, d in result.all()}
        inserted: list[int] = []
        for index in candidates:
            new_id = by_key.get(keys[index])
            if new_id is not None:
                out[index] = new_id
                inserted.append(index)
        return inserted

    async def _insert_pg(
        self,
        conn: AsyncConnection,
        batch: Sequence[NewEvent],
        keys: list[tuple[str, str, str]],
        candidates: list[int],
        out: list[int | None],
    ) -> list[int]:
        """Stored keys looked up by the full unique key (index-friendly row-value IN), then one batched
        INSERT whose ids follow parameter order (SQLAlchemy orders PostgreSQL's multi-row INSERT)."""
        existing: set[tuple[str, str, str]] = set()
        for start in range(0, len(candidates), 500):
            chunk = [keys[i] for i in candidates[start : start + 500]]
            found = await conn.execute(
                select(events.c.platform, events.c.chat_id, events.c.dedup_key).where(
                    tuple_(events.c.platform, events.c.chat_id, events.c.dedup_key).in_(chunk)
                )
            )
            existing.update((p, c, d) for p, c, d in found.all())
        fresh = [i for i in candidates if keys[i] not in existing]
        if not fresh:
            return []
        result = await conn.execute(
            insert(events).returning(events.c.id, sort_by_parameter_order=True),
            [_row(batch[i]) for i in fresh],
        )
        for index, new_id in zip(fresh, result.scalars().all(), strict=True):
            out[index] = int(new_id)
        return fresh

    async def _set_offsets(
        self, conn: AsyncConnection, consumer: str, offsets: Mapping[int, int], at_ms: int
    ) -> None:
        stmt = self._insert(partition_offsets)
        stmt = stmt.on_conflict_do_update(
            index_elements=["consumer", "partition"],
            set_={"resume_seq": stmt.excluded.resume_seq, "updated_at_ms": stmt.excluded.updated_at_ms},
        )
        rows = [
            {"consumer": consumer, "partition": p, "resume_seq": seq, "updated_at_ms": at_ms}
            for p, seq in sorted(offsets.items())
        ]
        await conn.execute(stmt, rows)

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

    async def _archive_senders(self, conn: AsyncConnection, batch: list[CanonicalEvent]) -> None:
        latest: dict[tuple[str, str], tuple[Sender, int]] = {}
        for event in batch:
            if isinstance(event, MessageEvent):
                latest[(event.platform.value, event.sender.id)] = (event.sender, event.received_at_ms)
        if not latest:
            return
        rows = [
            {
                "platform": platform,
                "user_id": sender.id,
                "display_name": sender.display_name,
                "username": sender.username,
                "is_bot": sender.is_bot,
                "first_seen_ms": at,
                "last_seen_ms": at,
            }
            for (platform, _), (sender, at) in latest.items()
        ]
        stmt = self._insert(users)
        stmt = stmt.on_conflict_do_update(
            index_elements=["platform", "user_id"],
            set_={
                "display_name": stmt.excluded.display_name,
                "username": stmt.excluded.username,
                "is_bot": stmt.excluded.is_bot,
                "last_seen_ms": stmt.excluded.last_seen_ms,
            },
        )
        await conn.execute(stmt, rows)

    async def chat_events(
        self, platform: str, chat_id: str, after: int = 0, *, chunk: int = 5000
    ) -> AsyncIterator[tuple[int, str]]:
        """``(id, payload)`` of a chat's events with ``id > after``, in the order of record."""
        last = after
        while True:
            async with self.engine.connect() as conn:
                result = await conn.execute(
                    select(events.c.id, events.c.payload)
                    .where(events.c.platform == platform, events.c.chat_id == chat_id, events.c.id > last)
                    .order_by(events.c.id)
                    .limit(chunk)
                )
                rows = result.all()
            for row_id, payload in rows:
                yield int(row_id), payload
            if len(rows) < chunk:
                return
            last = int(rows[-1][0])

    async def chats_events(
        self, keys: Sequence[ChatKey], cursors: Mapping[ChatKey, int], *, chunk: int = 5000
    ) -> AsyncIterator[tuple[ChatKey, list[tuple[int, str]]]]:
        """Each chat's ``(id, payload)`` rows after its cursor, in the order of record, chat by chat, over
        one connection (cold start)."""
        async with self.engine.connect() as conn:
            for platform, chat_id in keys:
                rows: list[tuple[int, str]] = []
                last = cursors.get((platform, chat_id), 0)
                while True:
                    result = await conn.execute(
                        select(events.c.id, events.c.payload)
                        .where(events.c.platform == platform, events.c.chat_id == chat_id, events.c.id > last)
                        .order_by(events.c.id)
                        .limit(chunk)
                    )
                    part = [(int(row_id), payload) for row_id, payload in result.all()]
                    rows += part
                    if len(part) < chunk:
                        break
                    last = part[-1][0]
                yield (platform, chat_id), rows

    async def last_event_ids(self, keys: Sequence[ChatKey]) -> dict[ChatKey, int]:
        """The newest event id of each chat that has any."""
        out: dict[ChatKey, int] = {}
        async with self.engine.connect() as conn:
            for start in range(0, len(keys), 500):
                found = await conn.execute(
                    select(events.c.platform, events.c.chat_id, func.max(events.c.id))
                    .where(tuple_(events.c.platform, events.c.chat_id).in_(keys[start : start + 500]))
                    .group_by(events.c.platform, events.c.chat_id)
                )
                out.update({(p, c): int(last) for p, c, last in found.all()})
        return out

    async def last_event_id(self, platform: str, chat_id: str) -> int:
        async with self.engine.connect() as conn:
            found = await conn.execute(
                select(func.max(events.c.id)).where(
                    events.c.platform == platform, events.c.chat_id == chat_id
                )
            )
            return int(found.scalar_one() or 0)

    async def cursors(self) -> dict[ChatKey, int]:
        async with self.engine.connect() as conn:
            found = await conn.execute(
                select(chat_cursors.c.platform, chat_cursors.c.chat_id, chat_cursors.c.cursor)
            )
            return {(p, c): int(cursor) for p, c, cursor in found.all()}

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

    async def resolve_aliases(self, platform: str, chat_id: str, aliases: Iterable[str]) -> dict[str, str]:
        """alias → message id of the first message (order of record) rendered with it."""
        wanted = set(aliases)
        if not wanted:
            return {}
        async with self.engine.connect() as conn:
            found = await conn.execute(
                select(events.c.message_alias, events.c.message_id)
                .where(
                    events.c.platform == platform,
                    events.c.chat_id == chat_id,
                    events.c.message_alias.in_(wanted),
                )
                .order_by(events.c.id)
            )
            out: dict[str, str] = {}
            for alias, message_id in found.all():
                out.setdefault(alias, message_id)
            return out

    async def message_history(
        self, platform: str, chat_id: str, message_ids: Iterable[str]
    ) -> list[tuple[int, str]]:
        """``(id, payload)`` of every event about these messages (sends, echoes, edits, deletes)."""
        wanted = set(message_ids)
        async with self.engine.connect() as conn:
            found = await conn.execute(
                select(events.c.id, events.c.payload, events.c.kind, events.c.message_id)
                .where(
                    events.c.platform == platform,
                    events.c.chat_id == chat_id,
                    (events.c.message_id.in_(wanted)) | (events.c.kind == "delete"),
                )
                .order_by(events.c.id)
            )
            rows = found.all()
        out: list[tuple[int, str]] = []
        for row_id, payload, kind, message_id in rows:
            if kind == "delete" and message_id not in wanted:
                event = decode_event(payload)
                if not (isinstance(event, DeleteEvent) and wanted.intersection(event.message_ids)):
                    continue
            out.append((int(row_id), payload))
        return out

    async def member_messages(
        self, platform: str, chat_id: str, user_id: str
    ) -> tuple[list[MemberRow], frozenset[str]]:
        """Every distinct message ``user_id`` sent in the chat (first copy, order of record), and which
        of them a ``delete`` event names. Edits are other rows (kind ``edit``) and a self-sent copy and its
        echo share a message id, so neither adds a message."""
        async with self.engine.connect() as conn:
            found = await conn.execute(
                select(events.c.message_id, func.min(events.c.id), func.min(events.c.timestamp_sec))
                .where(
                    events.c.platform == platform,
                    events.c.chat_id == chat_id,
                    events.c.sender_id == user_id,
                    events.c.kind == "message",
                )
                .group_by(events.c.message_id)
            )
            rows = sorted(
                (MemberRow(str(message_id), int(first), float(at)) for message_id, first, at in found.all()),
                key=lambda row: row.event_id,
            )
            ids = {row.message_id for row in rows}
            deleted: set[str] = set()
            # A delete of one message is indexed by it; a delete of several has no message id (read it).
            for start in range(0, len(rows), 500):
                chunk = [row.message_id for row in rows[start : start + 500]]
                single = await conn.execute(
                    select(events.c.message_id).where(
                        events.c.platform == platform,
                        events.c.chat_id == chat_id,
                        events.c.kind == "delete",
                        events.c.message_id.in_(chunk),
                    )
                )
                deleted.update(str(m) for (m,) in single.all())
            if rows:
                several = await conn.execute(
                    select(events.c.payload).where(
                        events.c.platform == platform,
                        events.c.chat_id == chat_id,
                        events.c.kind == "delete",
                        events.c.message_id.is_(None),
                    )
                )
                for (payload,) in several.all():
                    event = decode_event(payload)
                    if isinstance(event, DeleteEvent):
                        deleted.update(ids.intersection(event.message_ids))
        return rows, frozenset(deleted)

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
