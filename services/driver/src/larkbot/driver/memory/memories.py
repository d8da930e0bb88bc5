"""SQL storage of per-person memories (SQLite and PostgreSQL): events, patches, the search index, the
forget log and consolidation's maintenance state. The model and its rules are in ``core.memory``; the
tables in ``tables``.

Every write is one transaction: a saved memory, its index row and (on SQLite) its FTS row commit
together; a patch locks its memory's index row first (the first statement is an update of it), so on
either database concurrent patches of one memory are applied one after the other and the index row
always equals the fold of the memory and all its patches. Reads fold the stored events and patches; the
index only selects which memories to read.

Database errors that a retry can fix (locked, unreachable) surface as :class:`RetryableError`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnClause,
    ColumnElement,
    Integer,
    and_,
    case,
    column,
    func,
    literal_column,
    or_,
    select,
    table,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from larkbot.runtime.db import transaction

from ..tables import memories, memory_forgets, memory_index, memory_maintenance, memory_patches
from .core.memory import (
    ACTORS,
    Memory,
    MemoryPatch,
    NewMemory,
    PatchChange,
    Visibility,
    apply,
    fold,
    saved,
)
from .core.memorytext import fts5_query, indexed_text, memory_keys, query_terms, tsquery, visibility_keys

#: (platform, person_id, scope, chat_id): one consolidation group.
MaintenanceKey = tuple[str, str, str, str]

_CHUNK = 500
_FTS = table("driver_memory_fts", column("rowid", Integer))
_PG_SIMPLE: ColumnClause[Any] = literal_column("'simple'::regconfig")


class MemoryNotFound(Exception):
    """A memory id that does not exist (or, as a reference, belongs to another person)."""

    def __init__(self, message: str, ids: Sequence[int] = ()) -> None:
        super().__init__(message)
        self.ids = tuple(ids)


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


class MemoryStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._sqlite = engine.dialect.name == "sqlite"
        self._insert = sqlite.insert if self._sqlite else postgresql.insert

    def _tx(self) -> AbstractAsyncContextManager[AsyncConnection]:
        return transaction(self.engine)

    # -- writes ----------------------------------------------------------------------------------------

    async def save(self, new: NewMemory, *, now_ms: int) -> Memory:
        """Store a new memory. Its ``supersedes`` and ``related_to`` must name memories of the same person
        (:class:`MemoryNotFound` otherwise). A memory saved before under the same ``key`` is returned as
        it is now instead (a redone tool call)."""
        if new.key is not None:
            async with self._tx() as conn:
                found = (await conn.execute(select(memories.c.id).where(memories.c.key == new.key))).first()
                if found is not None:
                    return (await self._load(conn, [int(found[0])]))[int(found[0])]
        return (await self.save_many([new], now_ms=now_ms))[0]

    async def save_many(self, news: Sequence[NewMemory], *, now_ms: int) -> list[Memory]:
        """Store several memories in one transaction (consolidation's merges, bulk loads), in order."""
        if not news:
            return []
        async with self._tx() as conn:
            for new in news:
                await self._check_references(
                    conn, new.platform, new.person_id, new.supersedes + new.related_to
                )
            result = await conn.execute(
                memories.insert().returning(memories.c.id, sort_by_parameter_order=True),
                [_memory_row(new, now_ms) for new in news],
            )
            ids = [int(row[0]) for row in result]
            index_rows = [_index_row(i, new, now_ms) for i, new in zip(ids, news, strict=True)]
            await conn.execute(memory_index.insert(), index_rows)
            if self._sqlite:
                await conn.execute(
                    text("INSERT INTO driver_memory_fts(rowid, terms, keys) VALUES (:id, :terms, :keys)"),
                    [
                        {"id": r["memory_id"], "terms": r["terms"], "keys": _keys(new, enabled=True)}
                        for r, new in zip(index_rows, news, strict=True)
                    ],
                )
        return [saved(i, new, now_ms) for i, new in zip(ids, news, strict=True)]

    async def patch(
        self,
        memory_id: int,
        change: PatchChange,
        *,
        reason: str,
        actor: str,
        chat_id: str | None,
        now_ms: int,
        key: str | None = None,
    ) -> Memory:
        """Append a patch and return the memory's new view. :class:`MemoryNotFound` if the memory (or a
        memory the change refers to, of the same person) does not exist. A patch appended before under the
        same ``key`` is not appended again: the memory's current view is returned."""
        if actor not in ACTORS:
            raise ValueError(f"unknown actor {actor!r}")
        if memory_id in change.referenced():
            raise ValueError(f"memory {memory_id} cannot supersede or relate to itself")
        i = memory_index.c
        async with self._tx() as conn:
            # The lock: no other patch of this memory runs until this transaction ends.
            touched = await conn.execute(
                memory_index.update().where(i.memory_id == memory_id).values(updated_at_ms=i.updated_at_ms)
            )
            if touched.rowcount != 1:
                raise MemoryNotFound(f"no memory {memory_id}", (memory_id,))
            current = (await self._load(conn, [memory_id]))[memory_id]
            if key is not None:
                done = await conn.execute(select(memory_patches.c.id).where(memory_patches.c.key == key))
                if done.first() is not None:
                    return current
            await self._check_references(conn, current.platform, current.person_id, change.referenced())
            await conn.execute(
                memory_patches.insert().values(
                    memory_id=memory_id,
                    change=json.dumps(change.as_dict()),
                    reason=reason,
                    actor=actor,
                    chat_id=chat_id,
                    created_at_ms=now_ms,
                    key=key,
                )
            )
            patched = apply(current, change, now_ms)
            await conn.execute(
                memory_index.update()
                .where(i.memory_id == memory_id)
                .values(
                    scope=patched.scope,
                    importance=patched.importance,
                    enabled=patched.enabled,
                    updated_at_ms=patched.updated_at_ms,
                )
            )
            keys = _keys(patched, enabled=patched.enabled)
            if self._sqlite and keys != _keys(current, enabled=current.enabled):
                await conn.execute(
                    text("UPDATE driver_memory_fts SET keys = :keys WHERE rowid = :id"),
                    {"keys": keys, "id": memory_id},
                )
        return patched

    async def forget(self, platform: str, person_id: str, *, actor: str, now_ms: int) -> int:
        """Delete every memory of the person with its patches, index rows and maintenance state, and log
        the forget (whose, how many, by whom, when). Returns the number of memories deleted."""
        if actor not in ACTORS:
            raise ValueError(f"unknown actor {actor!r}")
        m, i = memories.c, memory_index.c
        own = select(m.id).where(m.platform == platform, m.person_id == person_id)
        async with self._tx() as conn:
            if self._sqlite:
                await conn.execute(
                    text(
                        "DELETE FROM driver_memory_fts WHERE rowid IN (SELECT memory_id FROM "
                        "driver_memory_index WHERE platform = :platform AND person_id = :person_id)"
                    ),
                    {"platform": platform, "person_id": person_id},
                )
            await conn.execute(memory_index.delete().where(i.platform == platform, i.person_id == person_id))
            await conn.execute(memory_patches.delete().where(memory_patches.c.memory_id.in_(own)))
            count = (
                await conn.execute(memories.delete().where(m.platform == platform, m.person_id == person_id))
            ).rowcount
            mm = memory_maintenance.c
            await conn.execute(
                memory_maintenance.delete().where(mm.platform == platform, mm.person_id == person_id)
            )
            await conn.execute(
                memory_forgets.insert().values(
                    platform=platform, person_id=person_id, count=count, actor=actor, created_at_ms=now_ms
                )
            )
        return int(count)

    # -- reads -----------------------------------------------------------------------------------------

    async def get(self, ids: Sequence[int]) -> dict[int, Memory]:
        """The memories among ``ids`` that exist (enabled or not), by id."""
        async with self._tx() as conn:
            return await self._load(conn, ids)

    async def high_importance(
        self, persons: Sequence[str], visibility: Visibility, *, limit: int
    ) -> list[Memory]:
        """Enabled ``high`` memories of ``persons`` admitted by ``visibility``: in the order of ``persons``,
        then oldest first (``created_at_ms``, then id); at most ``limit``."""
        order: dict[str, int] = {}
        for person in persons:
            order.setdefault(person, len(order))
        if not order or limit <= 0:
            return []
        i = memory_index.c
        stmt = (
            select(i.memory_id)
            .where(_admitted(visibility), i.person_id.in_(list(order)), i.importance == "high")
            .order_by(case(order, value=i.person_id), i.created_at_ms, i.memory_id)
            .limit(limit)
        )
        return await self._select(stmt, visibility)

    async def search(
        self, query: str, visibility: Visibility, *, person_id: str | None = None, limit: int
    ) -> list[Memory]:
        """Enabled memories admitted by ``visibility`` (of ``person_id`` only, when given) that share a term
        with ``query``; best match first, newer first among equals; at most ``limit``. A query with no
        searchable term finds nothing."""
        terms = query_terms(query)
        if not terms or limit <= 0:
            return []
        if self._sqlite:
            # FTS5 alone, its keys standing for the visibility filter (core.memorytext): joined with the
            # index, SQLite would rank every memory sharing a word before filtering, or worse, probe the
            # full-text index once per visible memory. What is loaded is checked exactly below.
            match = f"terms : ({fts5_query(terms)}) AND {visibility_keys(visibility, person_id)}"
            stmt: Any = (
                select(_FTS.c.rowid)
                .where(text("driver_memory_fts MATCH :match").bindparams(match=match))
                .order_by(literal_column("bm25(driver_memory_fts, 1.0, 0.0)"), _FTS.c.rowid.desc())
                .limit(limit)
            )
        else:
            i = memory_index.c
            vector: ColumnClause[Any] = literal_column("driver_memory_index.terms_tsv")
            tsq = func.to_tsquery(_PG_SIMPLE, tsquery(terms))
            where = [vector.op("@@")(tsq), _admitted(visibility)]
            if person_id is not None:
                where.append(i.person_id == person_id)
            stmt = (
                select(i.memory_id)
                .where(*where)
                .order_by(func.ts_rank(vector, tsq).desc(), i.memory_id.desc())
                .limit(limit)
            )
        found = await self._select(stmt, visibility)
        return [m for m in found if person_id is None or m.person_id == person_id]

    async def for_person(self, platform: str, person_id: str) -> list[Memory]:
        """Every memory of the person, disabled ones included, by id."""
        m = memories.c
        stmt = select(m.id).where(m.platform == platform, m.person_id == person_id).order_by(m.id)
        async with self._tx() as conn:
            ids = [int(row[0]) for row in await conn.execute(stmt)]
            loaded = await self._load(conn, ids)
        return [loaded[i] for i in ids]

    async def of_chat(self, platform: str, chat_id: str, *, limit: int) -> list[Memory]:
        """The newest ``limit`` memories learnt in the chat (any scope, disabled ones included), newest
        first (by id)."""
        m = memories.c
        where = (m.platform == platform, m.chat_id == chat_id)
        return await self._select(select(m.id).where(*where).order_by(m.id.desc()).limit(limit), None)

    async def patch_records_for_person(self, platform: str, person_id: str) -> list[MemoryPatch]:
        """Every patch of the person's memories, by id."""
        m, p = memories.c, memory_patches.c
        stmt = (
            select(memory_patches)
            .join(memories, m.id == p.memory_id)
            .where(m.platform == platform, m.person_id == person_id)
            .order_by(p.id)
        )
        async with self._tx() as conn:
            return [_patch(row) for row in (await conn.execute(stmt)).mappings()]

    async def patches_for_person(self, platform: str, person_id: str) -> list[dict[str, Any]]:
        """Every patch of the person's memories, by id, JSON-ready (for export)."""
        return [patch.as_dict() for patch in await self.patch_records_for_person(platform, person_id)]

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

    async def normal_in_group(
        self, platform: str, person_id: str, scope: str, chat_id: str, *, limit: int
    ) -> list[Memory]:
        """The group's enabled ``normal`` memories, oldest (lowest id) first, at most ``limit``."""
        i = memory_index.c
        stmt = (
            select(i.memory_id)
            .where(
                i.platform == platform,
                i.person_id == person_id,
                i.importance == "normal",
                i.scope == scope,
                i.chat_id == chat_id,
                i.enabled.is_(True),
            )
            .order_by(i.memory_id)
            .limit(limit)
        )
        return await self._select(stmt, None)

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

    # -- consolidation's maintenance state ---------------------------------------------------------------

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

    # -- internals -------------------------------------------------------------------------------------

    async def _select(self, stmt: Any, visibility: Visibility | None) -> list[Memory]:
        """Run a query of memory ids and return those memories in its order (re-checked against
        ``visibility``, which the index is a projection of)."""
        async with self._tx() as conn:
            ids = [int(row[0]) for row in await conn.execute(stmt)]
            loaded = await self._load(conn, ids)
        found = [loaded[i] for i in ids if i in loaded]
        return [m for m in found if visibility.admits(m)] if visibility is not None else found

    async def _load(self, conn: AsyncConnection, ids: Sequence[int]) -> dict[int, Memory]:
        wanted = list(dict.fromkeys(ids))
        events: dict[int, Memory] = {}
        patches: dict[int, list[MemoryPatch]] = {}
        m, p = memories.c, memory_patches.c
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            for row in (await conn.execute(select(memories).where(m.id.in_(chunk)))).mappings():
                events[int(row["id"])] = _memory(row)
            stmt = select(memory_patches).where(p.memory_id.in_(chunk)).order_by(p.id)
            for row in (await conn.execute(stmt)).mappings():
                patch = _patch(row)
                patches.setdefault(patch.memory_id, []).append(patch)
        return {i: fold(event, patches.get(i, ())) for i, event in events.items()}

    async def _check_references(
        self, conn: AsyncConnection, platform: str, person_id: str, ids: Sequence[int]
    ) -> None:
        if not ids:
            return
        m = memories.c
        stmt = select(m.id).where(m.id.in_(list(ids)), m.platform == platform, m.person_id == person_id)
        found = {int(row[0]) for row in await conn.execute(stmt)}
        missing = sorted(set(ids) - found)
        if missing:
            raise MemoryNotFound(f"no memories {missing} of {platform}:{person_id} to refer to", missing)


def _admitted(v: Visibility) -> ColumnElement[bool]:
    """SQL for :meth:`Visibility.admits` over the index."""
    i = memory_index.c
    where: list[ColumnElement[bool]] = [and_(i.scope == "group", i.chat_id == v.chat_id)]
    if v.direct_with is not None:
        where.append(and_(i.scope == "private", i.person_id == v.direct_with))
    if v.global_allowed:
        where.append(i.scope == "global")
    return and_(i.platform == v.platform, i.enabled.is_(True), or_(*where))


def _keys(m: NewMemory | Memory, *, enabled: bool) -> str:
    return memory_keys(
        platform=m.platform, person_id=m.person_id, chat_id=m.chat_id, scope=m.scope, enabled=enabled
    )


def _memory_row(new: NewMemory, now_ms: int) -> dict[str, Any]:
    return {
        "platform": new.platform,
        "person_id": new.person_id,
        "content": new.content,
        "evidence": json.dumps(list(new.evidence)),
        "chat_id": new.chat_id,
        "scope": new.scope,
        "importance": new.importance,
        "origin": new.origin,
        "supersedes": json.dumps(list(new.supersedes)),
        "related_to": json.dumps(list(new.related_to)),
        "created_at_ms": now_ms,
        "key": new.key,
    }


def _index_row(memory_id: int, new: NewMemory, now_ms: int) -> dict[str, Any]:
    return {
        "memory_id": memory_id,
        "platform": new.platform,
        "person_id": new.person_id,
        "chat_id": new.chat_id,
        "scope": new.scope,
        "importance": new.importance,
        "enabled": True,
        "created_at_ms": now_ms,
        "updated_at_ms": now_ms,
        "terms": indexed_text(new.content),
    }


def _memory(row: Any) -> Memory:
    return Memory(
        id=int(row["id"]),
        platform=row["platform"],
        person_id=row["person_id"],
        content=row["content"],
        evidence=tuple(json.loads(row["evidence"])),
        chat_id=row["chat_id"],
        scope=row["scope"],
        importance=row["importance"],
        enabled=True,
        origin=row["origin"],
        supersedes=tuple(json.loads(row["supersedes"])),
        related_to=tuple(json.loads(row["related_to"])),
        created_at_ms=int(row["created_at_ms"]),
        updated_at_ms=int(row["created_at_ms"]),
    )


def _patch(row: Any) -> MemoryPatch:
    return MemoryPatch(
        id=int(row["id"]),
        memory_id=int(row["memory_id"]),
        change=PatchChange.from_dict(json.loads(row["change"])),
        reason=row["reason"],
        actor=row["actor"],
        chat_id=row["chat_id"],
        created_at_ms=int(row["created_at_ms"]),
    )
