"""Writing a batch of committed events: one transaction inserts the events (the first copy of each dedup
key wins), archives their senders, caches alt texts and records each partition's resume point.

:class:`BatchWriter` holds the two dialects' insert strategies (SQLite: one ``INSERT … ON CONFLICT DO
NOTHING RETURNING``; PostgreSQL: stored keys looked up first, then one batched ``INSERT … RETURNING``);
:class:`~.repository.EventRepository` runs it in a transaction and maps database failures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import insert, select, tuple_
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from larkbot.canonical.codec import decode_as, encode
from larkbot.canonical.events import (
    EVENT_ADAPTER,
    CanonicalEvent,
    DeleteEvent,
    EditEvent,
    MessageEvent,
    Sender,
)

from ..core.aliases import alias_for
from .tables import alt_texts, events, partition_offsets, users


@dataclass(frozen=True, slots=True)
class NewEvent:
    event: CanonicalEvent
    stream_seq: int | None = None
    #: The event's JSON as delivered, when it is exactly ``event`` (saves encoding it again).
    payload: bytes | None = None


@dataclass(frozen=True, slots=True)
class Stored:
    """What already holds a batch item's key: a row of the table (``event_id``), or an earlier item of
    the same batch (``event_id`` of the row it became)."""

    event_id: int
    event: CanonicalEvent


def event_row(item: NewEvent) -> dict[str, object]:
    """The ``events`` row of ``item``."""
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


class BatchWriter:
    """The statements of one commit, for the engine's dialect."""

    def __init__(self, postgres: bool) -> None:
        self._pg = postgres
        self._insert = postgresql.insert if postgres else sqlite.insert

    async def write(
        self, conn: AsyncConnection, batch: Sequence[NewEvent], alts: list[tuple[str, str]]
    ) -> list[int | Stored]:
        """Insert ``batch`` and cache ``alts`` within ``conn``'s transaction; each item's new id, or the
        copy that holds its key (see :meth:`~.repository.EventRepository.commit`)."""
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
            [event_row(batch[i]) for i in candidates],
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
            [event_row(batch[i]) for i in fresh],
        )
        for index, new_id in zip(fresh, result.scalars().all(), strict=True):
            out[index] = int(new_id)
        return fresh

    async def set_offsets(
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
