"""The reads operator tools make of the driver's database, each a thin call of the driver's own stores.

Every method raises :class:`DriverNotReady` when the database does not answer or a table is missing; none
writes, and none migrates (the driver does, at start-up).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncEngine

from larkbot.driver.audit.audit import AuditStore, ChatActivity
from larkbot.driver.audit.core.audit import WakeAudit
from larkbot.driver.audit.core.cachebreak import CacheBreak, PromptShape, cache_break
from larkbot.driver.audit.core.requestlog import RecordedRequest, shared_prefix
from larkbot.driver.audit.requestlog import RequestStore
from larkbot.driver.compaction.core.compaction import Summary
from larkbot.driver.memory.core.memory import Memory, MemoryPatch
from larkbot.driver.memory.memories import MemoryStats, MemoryStore
from larkbot.driver.wake.repository import DriverRepository

from ._engine import read_only_engine
from ._errors import not_ready_on_failure
from ._records import PersonMemory, ShownRequest, WakeDetail


class DriverReads:
    """Reads of the driver's database through ``engine``. Operator tools get one from
    :func:`open_reads`, whose engine refuses writes; a test may hand in the driver's own engine."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._audit = AuditStore(engine)
        self._repo = DriverRepository(engine)
        self._requests = RequestStore(engine)
        self._memories = MemoryStore(engine)

    async def ping(self) -> None:
        """The database answers (its tables may still be missing)."""
        with not_ready_on_failure():
            await self._repo.ping()

    # -- the audit trail and the request log --------------------------------------------------------

    async def chats(self) -> tuple[ChatActivity, ...]:
        """Every chat with audit records, the most recently active first."""
        with not_ready_on_failure():
            return await self._audit.chats()

    async def latest_wakeups(self, platform: str, chat_id: str, *, limit: int) -> tuple[WakeAudit, ...]:
        """The chat's newest ``limit`` wake-ups, oldest first."""
        with not_ready_on_failure():
            return await self._audit.latest(platform, chat_id, limit=limit)

    async def wakeups_since(self, platform: str, chat_id: str, *, since_ms: int) -> tuple[WakeAudit, ...]:
        """The chat's wake-ups started at or after ``since_ms``, oldest first."""
        with not_ready_on_failure():
            return await self._audit.of_chat(platform, chat_id, since_ms=since_ms)

    async def wake(self, wake_id: str) -> WakeDetail | None:
        """One wake-up with its responses and requests, or ``None`` when none is recorded."""
        with not_ready_on_failure():
            audit = await self._audit.one(wake_id)
            if audit is None:
                return None
            shown = []
            summaries = await self._repo.summaries(audit.platform, audit.chat_id)
            for request in await self._requests.of_wake(wake_id):
                # Against what the provider last saw: a request never sent cached nothing.
                before = await self._requests.previous(
                    audit.platform, audit.chat_id, request.purpose, request.id, sent_only=True
                )
                prefix = shared_prefix(before.blocks if before else (), request.blocks)
                found = _cache_break(before, request, summaries) if before else None
                shown.append(ShownRequest(request, before.request_id if before else None, prefix, found))
            return WakeDetail(
                audit,
                await self._repo.probes_of_wake(wake_id),
                await self._repo.turns_of_wake(wake_id),
                tuple(shown),
            )

    async def wake_of_sent(self, platform: str, chat_id: str, message_id: str) -> str | None:
        """The wake-up that sent the platform message ``message_id``, if one is recorded."""
        with not_ready_on_failure():
            return await self._requests.wake_of_sent(platform, chat_id, message_id)

    async def compactions(self, platform: str, chat_id: str) -> tuple[Summary, ...]:
        """The chat's compaction summaries, oldest first."""
        with not_ready_on_failure():
            return await self._repo.summaries(platform, chat_id)

    # -- memories -----------------------------------------------------------------------------------

    async def memories_of_chat(self, platform: str, chat_id: str, *, limit: int) -> tuple[Memory, ...]:
        """The newest ``limit`` memories learnt in the chat (any scope, disabled ones too), newest first."""
        with not_ready_on_failure():
            return tuple(await self._memories.of_chat(platform, chat_id, limit=limit))

    async def memories_of_person(self, platform: str, person_id: str) -> tuple[PersonMemory, ...]:
        """Every memory of the person on the platform, disabled ones included, with its patches; by id."""
        with not_ready_on_failure():
            patches = await self._memories.patch_records_for_person(platform, person_id)
            found = await self._memories.for_person(platform, person_id)
        by_memory: dict[int, list[MemoryPatch]] = {}
        for patch in patches:
            by_memory.setdefault(patch.memory_id, []).append(patch)
        return tuple(PersonMemory(memory, tuple(by_memory.get(memory.id, ()))) for memory in found)

    async def memory_stats(self) -> MemoryStats:
        """Counts of every memory by scope and importance, of patches and of forgets."""
        with not_ready_on_failure():
            return await self._memories.stats()


def _cache_break(
    before: RecordedRequest, request: RecordedRequest, summaries: Sequence[Summary]
) -> CacheBreak | None:
    """The watch's verdict on ``request`` (a primary one that reached the model). The request log keeps
    no summary cursor: a request was built on the newest summary stored before it was made."""
    if request.purpose != "primary" or not request.called:
        return None

    def cursor(at_ms: int) -> int | None:
        return next((s.cursor for s in reversed(summaries) if s.created_at_ms <= at_ms), None)

    shape = PromptShape.of(before.blocks, before.endpoint, cursor(before.at_ms))
    return cache_break(shape, request.blocks, request.endpoint, cursor(request.at_ms))


@asynccontextmanager
async def open_reads(database_url: str) -> AsyncIterator[DriverReads]:
    """Reads of the driver's database at ``database_url`` over a read-only engine, closed on exit.
    Opening connects to nothing: a database that is not there yet fails the first read, not this."""
    engine = read_only_engine(database_url)
    try:
        yield DriverReads(engine)
    finally:
        await engine.dispose()
