"""The memory store's rows (``tables``) and the model (``core.memory``), mapped both ways, and the SQL of
a visibility: what :mod:`.memories` and :mod:`.maintenance` read and write."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import ColumnElement, and_, or_

from ..tables import memory_index
from .core.memory import Memory, MemoryPatch, NewMemory, PatchChange, Visibility
from .core.memorytext import indexed_text, memory_keys


def admitted(v: Visibility) -> ColumnElement[bool]:
    """SQL for :meth:`Visibility.admits` over the index."""
    i = memory_index.c
    where: list[ColumnElement[bool]] = [and_(i.scope == "group", i.chat_id == v.chat_id)]
    if v.direct_with is not None:
        where.append(and_(i.scope == "private", i.person_id == v.direct_with))
    if v.global_allowed:
        where.append(i.scope == "global")
    return and_(i.platform == v.platform, i.enabled.is_(True), or_(*where))


def keys_of(m: NewMemory | Memory, *, enabled: bool) -> str:
    return memory_keys(
        platform=m.platform, person_id=m.person_id, chat_id=m.chat_id, scope=m.scope, enabled=enabled
    )


def memory_row(new: NewMemory, now_ms: int) -> dict[str, Any]:
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


def index_row(memory_id: int, new: NewMemory, now_ms: int) -> dict[str, Any]:
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


def memory_of(row: Any) -> Memory:
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


def patch_of(row: Any) -> MemoryPatch:
    return MemoryPatch(
        id=int(row["id"]),
        memory_id=int(row["memory_id"]),
        change=PatchChange.from_dict(json.loads(row["change"])),
        reason=row["reason"],
        actor=row["actor"],
        chat_id=row["chat_id"],
        created_at_ms=int(row["created_at_ms"]),
    )
