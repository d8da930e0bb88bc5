"""SQL access to the driver's tables (SQLite and PostgreSQL). Database errors that a retry can fix
(locked, out of connections, unreachable) surface as ``runtime.db.DatabaseUnavailable`` (a
``RetryableError``); nothing is swallowed. Each call is one transaction in its turn (``runtime.db``)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter
from sqlalchemy import bindparam, select
from sqlalchemy import false as sql_false
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from larkbot.canonical.llm import Message, Usage
from larkbot.driver.compaction.core.compaction import Summary
from larkbot.runtime.db import transaction

from ..errors import StepConflict
from ..tables import chats, compactions, probe_responses, turn_responses
from .core.records import ProbeRecord, TurnRecord

_ENTRIES: TypeAdapter[tuple[Message, ...]] = TypeAdapter(tuple[Message, ...])
#: What names a step for good (unique).
_TURN_KEY = ("platform", "chat_id", "chain_id", "step")
_TURNS_SINCE = (
    select(turn_responses)
    .where(
        turn_responses.c.platform == bindparam("platform"),
        turn_responses.c.chat_id == bindparam("chat_id"),
        turn_responses.c.requested_at_ms >= bindparam("since_ms"),
    )
    .order_by(turn_responses.c.id)
)
_ADD_PROBE = probe_responses.insert()


@dataclass(frozen=True, slots=True)
class ChatMarks:
    processed_until_ms: int
    last_action_ms: int


class DriverRepository:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._insert = postgresql.insert if engine.dialect.name == "postgresql" else sqlite.insert
        # The statements of every wake-up, built once: built per call, with their values inline, they
        # cost more CPU in SQLAlchemy (construction and cache key) than the database takes to run them.
        # Executed with a row of parameters, each compiles once and is then taken from the cache.
        self._add_pending = self._upsert_turn(pending=True)
        self._add_complete = self._upsert_turn(pending=False)
        marks = self._insert(chats)
        self._save_marks = marks.on_conflict_do_update(
            index_elements=["platform", "chat_id"],
            set_={c: marks.excluded[c] for c in ("processed_until_ms", "last_action_ms")},
        )

    def _upsert_turn(self, *, pending: bool) -> Any:
        stmt = self._insert(turn_responses)
        kept = (*_TURN_KEY, "id")
        return stmt.on_conflict_do_update(
            index_elements=list(_TURN_KEY),
            set_={c.name: stmt.excluded[c.name] for c in turn_responses.c if c.name not in kept},
            where=turn_responses.c.pending.is_(True) if not pending else sql_false(),
        )

    def _tx(self) -> AbstractAsyncContextManager[AsyncConnection]:
        return transaction(self.engine)

    async def add_turn(self, record: TurnRecord) -> TurnRecord:
        """Insert a turn response, or replace the pending version of the same step; the record as a read
        gives it back."""
        row: dict[str, Any] = {
            "platform": record.platform,
            "chat_id": record.chat_id,
            "chain_id": record.chain_id,
            "step": record.step,
            "wake_id": record.wake_id,
            "requested_at_ms": record.requested_at_ms,
            "entries": _ENTRIES.dump_json(record.entries).decode(),
            "model_identity": record.model_identity,
            "input_tokens": record.usage.input_tokens,
            "output_tokens": record.usage.output_tokens,
            "cache_read_tokens": record.usage.cache_read_tokens,
            "cache_write_tokens": record.usage.cache_write_tokens,
            "reasoning_tokens": record.usage.reasoning_tokens,
            "requires_follow_up": record.requires_follow_up,
            "shell_tools_exposed": record.shell_tools_exposed,
            "mode": record.mode,
            "work_calls": record.work_calls,
            "participation_attempts": record.participation_attempts,
            "sent": record.sent,
            "reacted": record.reacted,
            "pending": record.pending,
            "fallback_from": ",".join(record.fallback_from) or None,
        }
        # A complete record replaces its pending (write-ahead) version and nothing else; the row keeps its
        # id, so the storage order of the chat's turn responses does not change. Any other existing row
        # for the step means a second writer.
        stmt = self._add_pending if record.pending else self._add_complete
        async with self._tx() as conn:
            written = (await conn.execute(stmt, row)).rowcount
        if written != 1:
            raise StepConflict(
                f"step {record.step} of chain {record.chain_id} in {record.platform}:{record.chat_id} "
                "was already written by another writer"
            )
        return _turn(row)

    async def turns(self, platform: str, chat_id: str, *, since_ms: int = 0) -> tuple[TurnRecord, ...]:
        """Every turn response requested at or after ``since_ms`` (the summary's turn boundary), in
        storage order. No count limit: compaction keeps what lies after the boundary within the window."""
        params = {"platform": platform, "chat_id": chat_id, "since_ms": since_ms}
        async with self._tx() as conn:
            rows = (await conn.execute(_TURNS_SINCE, params)).mappings().all()
        return tuple(_turn(row) for row in rows)

    async def latest_turn(self, platform: str, chat_id: str) -> TurnRecord | None:
        t = turn_responses
        stmt = (
            select(t).where(t.c.platform == platform, t.c.chat_id == chat_id).order_by(t.c.id.desc()).limit(1)
        )
        async with self._tx() as conn:
            row = (await conn.execute(stmt)).mappings().first()
        return _turn(row) if row is not None else None

    async def chain(self, platform: str, chat_id: str, chain_id: str) -> tuple[TurnRecord, ...]:
        t = turn_responses
        stmt = (
            select(t)
            .where(t.c.platform == platform, t.c.chat_id == chat_id, t.c.chain_id == chain_id)
            .order_by(t.c.step)
        )
        async with self._tx() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return tuple(_turn(row) for row in rows)

    async def turns_of_wake(self, wake_id: str) -> tuple[TurnRecord, ...]:
        """The steps a wake-up stored (a continuation's chain holds earlier wake-ups' steps too), in order;
        pending ones included (the inspector shows them as such)."""
        t = turn_responses
        stmt = select(t).where(t.c.wake_id == wake_id).order_by(t.c.id)
        async with self._tx() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return tuple(_turn(row) for row in rows)

    async def probes_of_wake(self, wake_id: str) -> tuple[ProbeRecord, ...]:
        p = probe_responses
        stmt = select(p).where(p.c.wake_id == wake_id).order_by(p.c.id)
        async with self._tx() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return tuple(_probe(row) for row in rows)

    async def add_probe(self, record: ProbeRecord) -> None:
        usage = record.usage
        row: dict[str, Any] = {
            "platform": record.platform,
            "chat_id": record.chat_id,
            "wake_id": record.wake_id,
            "requested_at_ms": record.requested_at_ms,
            "decision": record.decision,
            "reason": record.reason,
            "activated": record.activated,
            "failed_closed": record.failed_closed,
            "model_identity": record.model_identity,
            "input_tokens": usage.input_tokens if usage else None,
            "output_tokens": usage.output_tokens if usage else None,
            "cache_read_tokens": usage.cache_read_tokens if usage else None,
            "cache_write_tokens": usage.cache_write_tokens if usage else None,
            "window_start": record.window_start,
            "omitted": record.omitted,
        }
        async with self._tx() as conn:
            await conn.execute(_ADD_PROBE, row)

    async def probes(self, platform: str, chat_id: str) -> tuple[ProbeRecord, ...]:
        p = probe_responses
        stmt = select(p).where(p.c.platform == platform, p.c.chat_id == chat_id).order_by(p.c.id)
        async with self._tx() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return tuple(_probe(row) for row in rows)

    async def add_summary(self, summary: Summary) -> None:
        row: dict[str, Any] = {
            "platform": summary.platform,
            "chat_id": summary.chat_id,
            "cursor": summary.cursor,
            "turns_from_ms": summary.turns_from_ms,
            "summary": summary.text,
            "created_at_ms": summary.created_at_ms,
            "model_identity": summary.model_identity,
            "input_tokens": summary.usage.input_tokens,
            "output_tokens": summary.usage.output_tokens,
            "cache_read_tokens": summary.usage.cache_read_tokens,
            "cache_write_tokens": summary.usage.cache_write_tokens,
            "segments": summary.segments,
            "turns": summary.turns,
            "tokens_before": summary.tokens_before,
            "tokens_after": summary.tokens_after,
        }
        async with self._tx() as conn:
            await conn.execute(compactions.insert().values(**row))

    async def summaries(
        self, platform: str, chat_id: str, *, latest_only: bool = False
    ) -> tuple[Summary, ...]:
        """The chat's summaries, oldest first (only the newest with ``latest_only``)."""
        c = compactions
        where = (c.c.platform == platform, c.c.chat_id == chat_id)
        stmt = select(c).where(*where).order_by(c.c.id.desc() if latest_only else c.c.id)
        if latest_only:
            stmt = stmt.limit(1)
        async with self._tx() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return tuple(_summary(row) for row in rows)

    async def latest_summary(self, platform: str, chat_id: str) -> Summary | None:
        found = await self.summaries(platform, chat_id, latest_only=True)
        return found[0] if found else None

    async def marks(self, platform: str, chat_id: str) -> ChatMarks | None:
        stmt = select(chats.c.processed_until_ms, chats.c.last_action_ms).where(
            chats.c.platform == platform, chats.c.chat_id == chat_id
        )
        async with self._tx() as conn:
            row = (await conn.execute(stmt)).first()
        return ChatMarks(int(row[0]), int(row[1])) if row else None

    async def save_marks(self, platform: str, chat_id: str, marks: ChatMarks) -> None:
        row = {
            "platform": platform,
            "chat_id": chat_id,
            "processed_until_ms": marks.processed_until_ms,
            "last_action_ms": marks.last_action_ms,
        }
        async with self._tx() as conn:
            await conn.execute(self._save_marks, row)

    async def ping(self) -> None:
        """Whether the database answers (readiness): not queued behind the wake-ups' transactions."""
        async with transaction(self.engine, queued=False) as conn:
            await conn.execute(select(1))


def _turn(row: Any) -> TurnRecord:
    return TurnRecord(
        platform=row["platform"],
        chat_id=row["chat_id"],
        chain_id=row["chain_id"],
        step=row["step"],
        wake_id=row["wake_id"],
        requested_at_ms=row["requested_at_ms"],
        entries=_ENTRIES.validate_json(row["entries"]),
        usage=Usage(
            input_tokens=row["input_tokens"],
            output_tokens=row["output_tokens"],
            cache_read_tokens=row["cache_read_tokens"],
            cache_write_tokens=row["cache_write_tokens"],
            reasoning_tokens=row["reasoning_tokens"],
        ),
        model_identity=row["model_identity"],
        requires_follow_up=bool(row["requires_follow_up"]),
        shell_tools_exposed=bool(row["shell_tools_exposed"]),
        mode=row["mode"],
        work_calls=row["work_calls"],
        participation_attempts=row["participation_attempts"],
        sent=bool(row["sent"]),
        reacted=bool(row["reacted"]),
        pending=bool(row["pending"]),
        fallback_from=tuple(row["fallback_from"].split(",")) if row["fallback_from"] else (),
    )


def _probe(row: Any) -> ProbeRecord:
    usage = (
        Usage(
            input_tokens=row["input_tokens"],
            output_tokens=row["output_tokens"],
            cache_read_tokens=row["cache_read_tokens"],
            cache_write_tokens=row["cache_write_tokens"],
        )
        if row["input_tokens"] is not None
        else None
    )
    return ProbeRecord(
        platform=row["platform"],
        chat_id=row["chat_id"],
        wake_id=row["wake_id"],
        requested_at_ms=row["requested_at_ms"],
        decision=row["decision"],
        reason=row["reason"],
        activated=bool(row["activated"]),
        failed_closed=bool(row["failed_closed"]),
        model_identity=row["model_identity"],
        usage=usage,
        window_start=row["window_start"],
        omitted=row["omitted"],
    )


def _summary(row: Any) -> Summary:
    return Summary(
        platform=row["platform"],
        chat_id=row["chat_id"],
        cursor=int(row["cursor"]),
        turns_from_ms=int(row["turns_from_ms"]),
        text=row["summary"],
        created_at_ms=int(row["created_at_ms"]),
        model_identity=row["model_identity"],
        usage=Usage(
            input_tokens=row["input_tokens"],
            output_tokens=row["output_tokens"],
            cache_read_tokens=row["cache_read_tokens"],
            cache_write_tokens=row["cache_write_tokens"],
        ),
        segments=row["segments"],
        turns=row["turns"],
        tokens_before=int(row["tokens_before"]),
        tokens_after=int(row["tokens_after"]),
    )
