"""Reading events back in the order of record: a chat's events after a cursor (cold start, replay), the
newest ids, a message's history, aliases and a member's messages."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import func, select, tuple_
from sqlalchemy.ext.asyncio import AsyncEngine

from larkbot.canonical.events import DeleteEvent

from .tables import events
from .writes import decode_event

ChatKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class MemberRow:
    """One message of a member: its id, the first row that holds it, its platform time."""

    message_id: str
    event_id: int
    timestamp_sec: float


class EventReads:
    """The read side of the ``events`` table."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

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
    ) -> AsyncGenerator[tuple[ChatKey, list[tuple[int, str]]], None]:
        """Each chat's ``(id, payload)`` rows after its cursor, in the order of record, chat by chat (in
        the order of ``keys``), over one connection (cold start)."""
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
