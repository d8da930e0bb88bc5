"""The memory store's counts and consolidation's bookkeeping: the groups due for a merge and each
group's maintenance state (``driver_memory_maintenance``). A part of :class:`~.memories.MemoryStore`
(its base), kept apart so the store of memories stays readable."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from larkbot.runtime.db import transaction

from ..tables import memory_forgets, memory_index, memory_maintenance, memory_patches

#: (platform, person_id, scope, chat_id): one consolidation group.
MaintenanceKey = tuple[str, str, str, str]


@dataclass(frozen=True, slots=True)
class MemoryStats:
    total: int
    enabled: int
    #: Distinct (platform, person) pairs with at least one memory.
    persons: int
    #: Every memory by its current scope / importance, disabled ones included.
    by_scope: dict[str, int]
    by_importance: dict[str, int]
    patches: int
    forgets: int


class MaintenanceRecords:
    """Counts and consolidation's state over the store's engine."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._sqlite = engine.dialect.name == "sqlite"
        self._insert = sqlite.insert if self._sqlite else postgresql.insert

    def _tx(self) -> AbstractAsyncContextManager[AsyncConnection]:
        return transaction(self.engine)

    async def stats(self) -> MemoryStats:
        i = memory_index.c
        async with self._tx() as conn:
            total, enabled = (
                await conn.execute(
                    select(func.count(), func.coalesce(func.sum(case((i.enabled.is_(True), 1), else_=0)), 0))
                )
            ).one()
            persons = (
                await conn.execute(
                    select(func.count()).select_from(select(i.platform, i.person_id).distinct().subquery())
                )
            ).scalar_one()
            by_scope = {
                r[0]: int(r[1]) for r in await conn.execute(select(i.scope, func.count()).group_by(i.scope))
            }
            by_importance = {
                r[0]: int(r[1])
                for r in await conn.execute(select(i.importance, func.count()).group_by(i.importance))
            }
            patches = (await conn.execute(select(func.count()).select_from(memory_patches))).scalar_one()
            forgets = (await conn.execute(select(func.count()).select_from(memory_forgets))).scalar_one()
        return MemoryStats(
            total=int(total),
            enabled=int(enabled),
            persons=int(persons),
            by_scope=dict(sorted(by_scope.items())),
            by_importance=dict(sorted(by_importance.items())),
            patches=int(patches),
            forgets=int(forgets),
        )

    async def consolidation_groups(self, *, min_count: int) -> list[tuple[str, str, str, str, int]]:
        """``(platform, person_id, scope, chat_id, count)`` of enabled ``normal`` memories, for groups of
        at least ``min_count``, ordered by the key."""
        i = memory_index.c
        key = (i.platform, i.person_id, i.scope, i.chat_id)
        stmt = (
            select(*key, func.count())
            .where(i.enabled.is_(True), i.importance == "normal")
            .group_by(*key)
            .having(func.count() >= min_count)
            .order_by(*key)
        )
        async with self._tx() as conn:
            rows = (await conn.execute(stmt)).all()
        return [(r[0], r[1], r[2], r[3], int(r[4])) for r in rows]

    async def maintenance_state(self, key: MaintenanceKey) -> tuple[int, int] | None:
        """``(failures in a row, next_attempt_ms)`` of the group, or ``None`` if it never ran."""
        mm = memory_maintenance.c
        platform, person_id, scope, chat_id = key
        stmt = select(mm.failures, mm.next_attempt_ms).where(
            mm.platform == platform, mm.person_id == person_id, mm.scope == scope, mm.chat_id == chat_id
        )
        async with self._tx() as conn:
            row = (await conn.execute(stmt)).first()
        return (int(row[0]), int(row[1])) if row is not None else None

    async def record_maintenance(
        self, key: MaintenanceKey, *, ok: bool, now_ms: int, next_attempt_ms: int, error: str | None
    ) -> None:
        """Record a run: a success resets the failure count, a failure adds one and keeps ``error``."""
        platform, person_id, scope, chat_id = key
        mm = memory_maintenance.c
        values: dict[str, Any] = {
            "last_run_ms": now_ms,
            "next_attempt_ms": next_attempt_ms,
            "last_error": None if ok else error,
        }
        stmt = (
            self._insert(memory_maintenance)
            .values(
                platform=platform,
                person_id=person_id,
                scope=scope,
                chat_id=chat_id,
                failures=0 if ok else 1,
                **values,
            )
            .on_conflict_do_update(
                index_elements=["platform", "person_id", "scope", "chat_id"],
                set_={**values, "failures": 0 if ok else mm.failures + 1},
            )
        )
        async with self._tx() as conn:
            await conn.execute(stmt)
