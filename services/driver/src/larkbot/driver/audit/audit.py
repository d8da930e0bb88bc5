"""SQL access to the audit trail (``driver_wakeups``): write one record per wake-up, read a chat's records
since a time, and delete records past their retention (nothing else)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from larkbot.runtime.db import transaction

from ..tables import wakeups
from .core.audit import ContextRange, Tokens, WakeAudit

DAY_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class ChatActivity:
    """A chat's audit trail at a glance (the inspector's index)."""

    platform: str
    chat_id: str
    wakeups: int
    sends: int
    dry_runs: int
    first_ms: int
    last_ms: int


class AuditStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def add(self, audit: WakeAudit) -> None:
        context, tokens, probe = audit.context, audit.tokens, audit.probe_tokens
        row: dict[str, Any] = {
            "platform": audit.platform,
            "chat_id": audit.chat_id,
            "wake_id": audit.wake_id,
            "wake_kind": audit.wake_kind,
            "path": audit.path,
            "started_at_ms": audit.started_at_ms,
            "ended_at_ms": audit.ended_at_ms,
            "context_first_seq": context.first_seq,
            "context_last_seq": context.last_seq,
            "context_count": context.count,
            "context_sha256": context.sha256,
            "probe_decision": audit.probe_decision,
            "probe_reason": audit.probe_reason,
            "probe_model": audit.probe_model,
            "probe_input_tokens": probe.input,
            "probe_cache_read_tokens": probe.cache_read,
            "probe_cache_write_tokens": probe.cache_write,
            "probe_output_tokens": probe.output,
            "probe_latency_ms": audit.probe_latency_ms,
            "steps": audit.steps,
            "sends": audit.sends,
            "reactions": audit.reactions,
            "tool_calls": json.dumps(dict(audit.tool_calls)),
            "input_tokens": tokens.input,
            "cache_read_tokens": tokens.cache_read,
            "cache_write_tokens": tokens.cache_write,
            "output_tokens": tokens.output,
            "primary_latency_ms": audit.primary_latency_ms,
            "primary_models": json.dumps(list(audit.primary_models)),
            "outcome": audit.outcome,
            "dry_run": audit.dry_run,
            "model_called": audit.model_called,
            "withheld": json.dumps(list(audit.withheld)),
            "content_hashed": audit.content_hashed,
        }
        async with transaction(self.engine) as conn:
            await conn.execute(wakeups.insert().values(**row))

    async def of_chat(self, platform: str, chat_id: str, *, since_ms: int = 0) -> tuple[WakeAudit, ...]:
        """The chat's records started at or after ``since_ms``, oldest first (ties: storage order)."""
        w = wakeups
        stmt = (
            select(w)
            .where(w.c.platform == platform, w.c.chat_id == chat_id, w.c.started_at_ms >= since_ms)
            .order_by(w.c.started_at_ms, w.c.id)
        )
        async with transaction(self.engine) as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return tuple(_audit(row) for row in rows)

    async def latest(self, platform: str, chat_id: str, *, limit: int) -> tuple[WakeAudit, ...]:
        """The chat's newest ``limit`` records, oldest first."""
        w = wakeups
        stmt = (
            select(w)
            .where(w.c.platform == platform, w.c.chat_id == chat_id)
            .order_by(w.c.started_at_ms.desc(), w.c.id.desc())
            .limit(limit)
        )
        async with transaction(self.engine) as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return tuple(_audit(row) for row in reversed(rows))

    async def one(self, wake_id: str) -> WakeAudit | None:
        async with transaction(self.engine) as conn:
            row = (await conn.execute(select(wakeups).where(wakeups.c.wake_id == wake_id))).mappings().first()
        return _audit(row) if row is not None else None

    async def chats(self) -> tuple[ChatActivity, ...]:
        """Every chat with records, the most recently active first (ties: platform, chat id)."""
        w = wakeups
        last = func.max(w.c.started_at_ms)
        stmt = (
            select(
                w.c.platform,
                w.c.chat_id,
                func.count(),
                func.coalesce(func.sum(w.c.sends), 0),
                func.count().filter(w.c.dry_run.is_(True)),
                func.min(w.c.started_at_ms),
                last,
            )
            .group_by(w.c.platform, w.c.chat_id)
            .order_by(last.desc(), w.c.platform, w.c.chat_id)
        )
        async with transaction(self.engine) as conn:
            rows = (await conn.execute(stmt)).all()
        return tuple(
            ChatActivity(r[0], r[1], int(r[2]), int(r[3]), int(r[4]), int(r[5]), int(r[6])) for r in rows
        )

    async def sweep(self, now_ms: int, retention_days: float) -> int:
        """Delete the records that started more than ``retention_days`` before ``now_ms``; returns how
        many."""
        cutoff = now_ms - round(retention_days * DAY_MS)
        async with transaction(self.engine) as conn:
            result = await conn.execute(delete(wakeups).where(wakeups.c.started_at_ms < cutoff))
        return int(result.rowcount)


def _audit(row: Any) -> WakeAudit:
    return WakeAudit(
        platform=row["platform"],
        chat_id=row["chat_id"],
        wake_id=row["wake_id"],
        wake_kind=row["wake_kind"],
        path=row["path"],
        started_at_ms=int(row["started_at_ms"]),
        ended_at_ms=int(row["ended_at_ms"]),
        context=ContextRange(
            first_seq=row["context_first_seq"],
            last_seq=row["context_last_seq"],
            count=row["context_count"],
            sha256=row["context_sha256"],
        ),
        probe_decision=row["probe_decision"],
        probe_reason=row["probe_reason"],
        probe_model=row["probe_model"],
        probe_tokens=Tokens(
            row["probe_input_tokens"],
            row["probe_cache_read_tokens"],
            row["probe_cache_write_tokens"],
            row["probe_output_tokens"],
        ),
        probe_latency_ms=row["probe_latency_ms"],
        steps=row["steps"],
        sends=row["sends"],
        reactions=row["reactions"],
        tool_calls=tuple(sorted(json.loads(row["tool_calls"]).items())),
        tokens=Tokens(
            row["input_tokens"], row["cache_read_tokens"], row["cache_write_tokens"], row["output_tokens"]
        ),
        primary_latency_ms=row["primary_latency_ms"],
        primary_models=tuple(json.loads(row["primary_models"])),
        outcome=row["outcome"],
        dry_run=bool(row["dry_run"]),
        model_called=bool(row["model_called"]),
        withheld=tuple(json.loads(row["withheld"])),
        content_hashed=bool(row["content_hashed"]),
    )
