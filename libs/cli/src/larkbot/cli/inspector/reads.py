"""What the inspector reads from the driver's database, through the driver's own stores: the audit trail,
the stored probe and turn responses, the request log, compactions and memories. Only ``SELECT``s: the
inspector never writes, and it does not migrate (the driver does); a table the driver has not created yet
is reported by the page as such (:class:`NotReady`)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncEngine

from larkbot.canonical.errors import RetryableError
from larkbot.driver.adapters.audit import AuditStore, ChatActivity
from larkbot.driver.adapters.repository import DriverRepository
from larkbot.driver.adapters.requestlog import RequestStore
from larkbot.driver.adapters.tables import memories, memory_index
from larkbot.driver.core.audit import WakeAudit
from larkbot.driver.core.compaction import Summary
from larkbot.driver.core.records import ProbeRecord, TurnRecord
from larkbot.driver.core.requestlog import RecordedRequest, SharedPrefix, shared_prefix
from larkbot.runtime.db import transaction

#: Wake-ups a chat page lists and plots (the newest).
CHAT_WAKEUPS = 200
#: Memories a chat page lists (the newest learnt in the chat).
CHAT_MEMORIES = 200

#: A table missing (SQLite reports it as an operational error, which ``transaction`` raises as retryable;
#: PostgreSQL as a programming error) or the database unreachable.
NotReady = (OperationalError, ProgrammingError, RetryableError)


@dataclass(frozen=True, slots=True)
class ShownRequest:
    """A model request as sent, and what of it matched the same chat's previous request of its kind."""

    request: RecordedRequest
    previous_id: str | None
    prefix: SharedPrefix


@dataclass(frozen=True, slots=True)
class WakeDetail:
    audit: WakeAudit
    probes: tuple[ProbeRecord, ...]
    steps: tuple[TurnRecord, ...]
    requests: tuple[ShownRequest, ...]


@dataclass(frozen=True, slots=True)
class ChatMemory:
    id: int
    person_id: str
    content: str
    scope: str
    importance: str
    enabled: bool
    created_at_ms: int


class Reads:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.audit = AuditStore(engine)
        self.repo = DriverRepository(engine)
        self.requests = RequestStore(engine)

    async def ping(self) -> None:
        await self.repo.ping()

    async def chats(self) -> tuple[ChatActivity, ...]:
        return await self.audit.chats()

    async def wakeups(self, platform: str, chat_id: str) -> tuple[WakeAudit, ...]:
        return await self.audit.latest(platform, chat_id, limit=CHAT_WAKEUPS)

    async def wake(self, wake_id: str) -> WakeDetail | None:
        audit = await self.audit.one(wake_id)
        if audit is None:
            return None
        shown = []
        for request in await self.requests.of_wake(wake_id):
            # Against what the provider last saw: a request never sent cached nothing.
            before = await self.requests.previous(
                audit.platform, audit.chat_id, request.purpose, request.id, sent_only=True
            )
            prefix = shared_prefix(before.blocks if before else (), request.blocks)
            shown.append(ShownRequest(request, before.request_id if before else None, prefix))
        return WakeDetail(
            audit,
            await self.repo.probes_of_wake(wake_id),
            await self.repo.turns_of_wake(wake_id),
            tuple(shown),
        )

    async def wake_of_sent(self, platform: str, chat_id: str, message_id: str) -> str | None:
        return await self.requests.wake_of_sent(platform, chat_id, message_id)

    async def compactions(self, platform: str, chat_id: str) -> tuple[Summary, ...]:
        return await self.repo.summaries(platform, chat_id)

    async def memories(self, platform: str, chat_id: str) -> tuple[ChatMemory, ...]:
        """The memories learnt in this chat (any scope), newest first."""
        m, i = memories, memory_index
        stmt = (
            select(
                m.c.id, m.c.person_id, m.c.content, i.c.scope, i.c.importance, i.c.enabled, m.c.created_at_ms
            )
            .join(i, i.c.memory_id == m.c.id)
            .where(m.c.platform == platform, m.c.chat_id == chat_id)
            .order_by(m.c.id.desc())
            .limit(CHAT_MEMORIES)
        )
        async with transaction(self.engine) as conn:
            rows = (await conn.execute(stmt)).all()
        return tuple(ChatMemory(int(r[0]), r[1], r[2], r[3], r[4], bool(r[5]), int(r[6])) for r in rows)


__all__ = ["CHAT_MEMORIES", "CHAT_WAKEUPS", "ChatMemory", "NotReady", "Reads", "ShownRequest", "WakeDetail"]
