"""SQL access to the request log (``driver_requests``, ``driver_request_blocks``, ``driver_sent_messages``;
``core.requestlog``): write a wake-up's requests and sent message ids, read them back for the inspector,
and delete what is past retention.

A long chat's requests repeat hundreds of unchanged history blocks. Each process remembers the blocks it
wrote and when: a block written less than :data:`REFRESH_MS` before a request is not sent to the database
again, so ``last_seen_ms`` lags the newest request holding it by up to that much. The sweep allows for the
lag (blocks go :data:`REFRESH_MS` after the requests), so no request outlives its blocks. The memory is
updated only after a commit: a rolled-back write never lets a block pass as stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import case, delete, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from larkbot.runtime.db import transaction

from ..tables import request_blocks, requests, sent_messages
from .audit import DAY_MS
from .core.requestlog import Block, RecordedRequest, WakeRequests, blocks_of

#: How long a written block is not written again (its ``last_seen_ms`` refresh at most this often).
REFRESH_MS = 3_600_000
#: Blocks remembered per process (about 100 bytes each); the oldest are forgotten first.
REMEMBERED_BLOCKS = 200_000
#: Hashes per ``IN (...)`` when loading texts, well under SQLite's and asyncpg's parameter limits.
_CHUNK = 500


@dataclass(frozen=True, slots=True)
class Swept:
    requests: int
    blocks: int
    sent: int


class RequestStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        #: sha256 → ``at_ms`` of the request it was last written for, oldest write first.
        self._written: dict[str, int] = {}

    async def add(
        self, log: WakeRequests, *, store_content: bool, cut: Sequence[tuple[Block, ...]] | None = None
    ) -> None:
        """Write a wake-up's requests, their blocks (``cut``: each request's, when the caller has them
        already) and its sent message ids. Adding the same requests again changes nothing
        (``request_id`` and sent ids are unique; blocks are upserted)."""
        rows: list[dict[str, Any]] = []
        fresh: dict[str, tuple[Block, int]] = {}
        if cut is None:
            cut = [blocks_of(logged.request) for logged in log.requests]
        for logged, blocks in zip(log.requests, cut, strict=True):
            request = logged.request
            rows.append(
                {
                    "platform": log.platform,
                    "chat_id": log.chat_id,
                    "wake_id": log.wake_id,
                    "request_id": request.request_id,
                    "purpose": request.purpose,
                    "step": logged.step,
                    "at_ms": logged.at_ms,
                    "endpoint": request.endpoint,
                    "estimated_tokens": logged.estimated_tokens,
                    "called": logged.called,
                    "blocks": json.dumps([[b.kind, b.label, b.sha256, b.chars] for b in blocks]),
                }
            )
            for block in blocks:
                written = self._written.get(block.sha256)
                if written is None or logged.at_ms - written >= REFRESH_MS:
                    # One row per hash per statement: PostgreSQL refuses to upsert a row twice in one.
                    fresh[block.sha256] = (block, logged.at_ms)
        sent = [
            {
                "platform": log.platform,
                "chat_id": log.chat_id,
                "message_id": s.message_id,
                "wake_id": log.wake_id,
                "at_ms": s.at_ms,
            }
            for s in log.sent
        ]
        async with transaction(self.engine) as conn:
            if fresh:
                await _upsert_blocks(conn, fresh.values(), store_content)
            if rows:
                await conn.execute(_insert(conn, requests).on_conflict_do_nothing(), rows)
            if sent:
                await conn.execute(_insert(conn, sent_messages).on_conflict_do_nothing(), sent)
        self._remember((sha, at_ms) for sha, (_block, at_ms) in fresh.items())

    def _remember(self, written: Iterable[tuple[str, int]]) -> None:
        for sha, at_ms in written:
            self._written.pop(sha, None)
            self._written[sha] = at_ms
        excess = len(self._written) - REMEMBERED_BLOCKS
        for sha in list(self._written)[: max(0, excess)]:
            del self._written[sha]

    async def of_wake(self, wake_id: str) -> tuple[RecordedRequest, ...]:
        """The wake-up's requests with their blocks' texts, oldest first."""
        stmt = select(requests).where(requests.c.wake_id == wake_id).order_by(requests.c.id)
        async with transaction(self.engine) as conn:
            found = [_request(row) for row in (await conn.execute(stmt)).mappings()]
            return await _with_texts(conn, found)

    async def previous(
        self, platform: str, chat_id: str, purpose: str, before_id: int, *, sent_only: bool = False
    ) -> RecordedRequest | None:
        """The chat's request of ``purpose`` stored last before ``before_id``, with its texts; with
        ``sent_only``, the last one that reached the model (what a provider's prompt cache saw)."""
        r = requests.c
        where = [r.platform == platform, r.chat_id == chat_id, r.purpose == purpose, r.id < before_id]
        if sent_only:
            where.append(r.called.is_(True))
        stmt = select(requests).where(*where).order_by(r.id.desc()).limit(1)
        async with transaction(self.engine) as conn:
            found = [_request(row) for row in (await conn.execute(stmt)).mappings()]
            loaded = await _with_texts(conn, found)
        return loaded[0] if loaded else None

    async def requests_of_chat(
        self, platform: str, chat_id: str, *, since_ms: int = 0
    ) -> tuple[RecordedRequest, ...]:
        """The chat's requests made at or after ``since_ms``, in storage order, blocks without texts."""
        r = requests.c
        stmt = (
            select(requests)
            .where(r.platform == platform, r.chat_id == chat_id, r.at_ms >= since_ms)
            .order_by(r.id)
        )
        async with transaction(self.engine) as conn:
            return tuple(_request(row) for row in (await conn.execute(stmt)).mappings())

    async def wake_of_sent(self, platform: str, chat_id: str, message_id: str) -> str | None:
        """The wake-up that sent the message (its canonical platform id), if the bot sent it."""
        s = sent_messages.c
        stmt = select(s.wake_id).where(
            s.platform == platform, s.chat_id == chat_id, s.message_id == message_id
        )
        async with transaction(self.engine) as conn:
            wake_id: str | None = (await conn.execute(stmt)).scalar_one_or_none()
        return wake_id

    async def sweep(self, now_ms: int, retention_days: float) -> Swept:
        """Delete requests and sent ids older than ``retention_days`` before ``now_ms``, and the blocks
        no request of that period holds (allowing for the refresh lag, see the module docstring)."""
        cutoff = now_ms - round(retention_days * DAY_MS)
        async with transaction(self.engine) as conn:
            gone = await conn.execute(delete(requests).where(requests.c.at_ms < cutoff))
            sent = await conn.execute(delete(sent_messages).where(sent_messages.c.at_ms < cutoff))
            blocks = await conn.execute(
                delete(request_blocks).where(request_blocks.c.last_seen_ms < cutoff - REFRESH_MS)
            )
        return Swept(int(gone.rowcount), int(blocks.rowcount), int(sent.rowcount))


def _insert(conn: AsyncConnection, table: Any) -> Any:
    # The two dialects the driver runs on spell upserts alike; their ``insert`` constructs differ only
    # in type.
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return dialect.insert(table)


async def _upsert_blocks(
    conn: AsyncConnection, blocks: Iterable[tuple[Block, int]], store_content: bool
) -> None:
    t = request_blocks
    stmt = _insert(conn, t)
    ex = stmt.excluded
    stmt = stmt.on_conflict_do_update(
        index_elements=[t.c.sha256],
        set_={
            "last_seen_ms": case(
                (ex.last_seen_ms > t.c.last_seen_ms, ex.last_seen_ms), else_=t.c.last_seen_ms
            ),
            # A text stored once stays until the block expires; a hash-only row gains its text when
            # content may be stored.
            "text": func.coalesce(t.c.text, ex.text),
        },
    )
    rows = [
        {
            "sha256": b.sha256,
            "text": b.text if store_content else None,
            "chars": b.chars,
            "last_seen_ms": at_ms,
        }
        for b, at_ms in blocks
    ]
    await conn.execute(stmt, rows)


def _request(row: Any) -> RecordedRequest:
    blocks = tuple(
        Block(kind, label, sha, chars, None) for kind, label, sha, chars in json.loads(row["blocks"])
    )
    return RecordedRequest(
        id=int(row["id"]),
        platform=row["platform"],
        chat_id=row["chat_id"],
        wake_id=row["wake_id"],
        request_id=row["request_id"],
        purpose=row["purpose"],
        step=row["step"],
        at_ms=int(row["at_ms"]),
        endpoint=row["endpoint"],
        estimated_tokens=int(row["estimated_tokens"]),
        called=bool(row["called"]),
        blocks=blocks,
    )


async def _with_texts(conn: AsyncConnection, found: Sequence[RecordedRequest]) -> tuple[RecordedRequest, ...]:
    wanted = list(dict.fromkeys(b.sha256 for r in found for b in r.blocks))
    texts: dict[str, str | None] = {}
    for i in range(0, len(wanted), _CHUNK):
        chunk = wanted[i : i + _CHUNK]
        stmt = select(request_blocks.c.sha256, request_blocks.c.text).where(
            request_blocks.c.sha256.in_(chunk)
        )
        texts.update({sha: text for sha, text in (await conn.execute(stmt)).all()})
    return tuple(
        replace(r, blocks=tuple(replace(b, text=texts.get(b.sha256)) for b in r.blocks)) for r in found
    )
