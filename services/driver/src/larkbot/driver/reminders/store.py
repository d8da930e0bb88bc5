"""SQL access to ``driver_reminders`` (SQLite and PostgreSQL).

Every change of a reminder's state is conditional on the state it leaves, so of two writers (two
replicas during a hand-over, a ``cancel_reminder`` racing the delivery) exactly one wins: the one whose
update wrote the row owns what follows (the event, the metric).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

from sqlalchemy import delete, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from larkbot.runtime.db import transaction

from ..tables import reminders
from .core.reminders import Reminder

_R = reminders


class ReminderStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    def _tx(self) -> AbstractAsyncContextManager[AsyncConnection]:
        return transaction(self.engine)

    async def add(self, reminder: Reminder) -> Reminder:
        """Insert ``reminder``; when its call key exists already (a step redone), the reminder stored
        under it."""
        row = {name: getattr(reminder, name) for name in _R.c.keys()}  # noqa: SIM118 (column names)
        try:
            async with self._tx() as conn:
                await conn.execute(insert(_R).values(**row))
        except IntegrityError:
            existing = await self.by_call(reminder.call_key)
            if existing is None:
                raise
            return existing
        return reminder

    async def get(self, reminder_id: str) -> Reminder | None:
        async with self._tx() as conn:
            row = (await conn.execute(select(_R).where(_R.c.reminder_id == reminder_id))).mappings().first()
        return _reminder(row) if row is not None else None

    async def by_call(self, call_key: str) -> Reminder | None:
        async with self._tx() as conn:
            row = (await conn.execute(select(_R).where(_R.c.call_key == call_key))).mappings().first()
        return _reminder(row) if row is not None else None

    async def pending(self, platform: str, chat_id: str) -> tuple[Reminder, ...]:
        """The chat's pending reminders, soonest first."""
        stmt = (
            select(_R)
            .where(_R.c.platform == platform, _R.c.chat_id == chat_id, _R.c.status == "pending")
            .order_by(_R.c.due_at_ms, _R.c.reminder_id)
        )
        async with self._tx() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return tuple(_reminder(row) for row in rows)

    async def cancel(self, reminder_id: str, now_ms: int) -> bool:
        """Cancel a pending reminder; ``False`` when it was not pending any more."""
        stmt = (
            update(_R)
            .where(_R.c.reminder_id == reminder_id, _R.c.status == "pending")
            .values(status="cancelled", ended_at_ms=now_ms)
        )
        async with self._tx() as conn:
            return (await conn.execute(stmt)).rowcount == 1

    async def undelivered(self, now_ms: int) -> tuple[Reminder, ...]:
        """Reminders due by ``now_ms`` and still pending, and claimed ones whose event may not be on the bus
        yet; oldest due first."""
        due = or_(_R.c.status == "fired", (_R.c.status == "pending") & (_R.c.due_at_ms <= now_ms))
        stmt = select(_R).where(due).order_by(_R.c.due_at_ms, _R.c.reminder_id)
        async with self._tx() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return tuple(_reminder(row) for row in rows)

    async def claim(self, reminder_id: str, now_ms: int) -> bool:
        """Claim a pending reminder for delivery (``fired``), committed before its event is published;
        ``False`` when another writer claimed or cancelled it first."""
        stmt = (
            update(_R)
            .where(_R.c.reminder_id == reminder_id, _R.c.status == "pending")
            .values(status="fired", ended_at_ms=now_ms)
        )
        async with self._tx() as conn:
            return (await conn.execute(stmt)).rowcount == 1

    async def delivered(self, reminder_id: str, now_ms: int) -> bool:
        """Its event is on the bus; ``False`` when another publisher recorded that first."""
        stmt = (
            update(_R)
            .where(_R.c.reminder_id == reminder_id, _R.c.status == "fired")
            .values(status="delivered", delivered_at_ms=now_ms)
        )
        async with self._tx() as conn:
            return (await conn.execute(stmt)).rowcount == 1

    async def sweep(self, before_ms: int) -> int:
        """Remove delivered and cancelled reminders that ended before ``before_ms``; returns how many."""
        stmt = delete(_R).where(_R.c.status.in_(("delivered", "cancelled")), _R.c.ended_at_ms < before_ms)
        async with self._tx() as conn:
            return (await conn.execute(stmt)).rowcount


def _reminder(row: Any) -> Reminder:
    return Reminder(
        reminder_id=row["reminder_id"],
        platform=row["platform"],
        chat_id=row["chat_id"],
        call_key=row["call_key"],
        person=row["person"],
        text=row["text"],
        due_at_ms=row["due_at_ms"],
        status=row["status"],
        created_at_ms=row["created_at_ms"],
        ended_at_ms=row["ended_at_ms"],
        delivered_at_ms=row["delivered_at_ms"],
    )
