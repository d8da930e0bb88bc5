"""Scheduled memory consolidation (SPEC §7 maintenance; the rules are in ``core.consolidation``).

One replica runs it: the holder of the driver's singleton lease ``memory-maintenance`` (the composition
root leads :meth:`Consolidator.run` through ``ServiceContext.lead``), so replicas never merge the same
group twice at once; a lease that moves mid-run costs at most one duplicated attempt, whose writes carry
idempotency keys. While it leads, every ``consolidation_interval_s`` (the first pass at once) it lists the
groups with at least ``consolidation_min_count`` enabled ``normal`` memories and consolidates each one
that is not backing off, one at a time, through the ``memory`` endpoint. A failure is recorded for its
group only and backs off. A pass postponed by a transient failure (the database away) is tried again
within ``PASS_CHECK_S``. The same pass refreshes the ``larkbot_driver_memories`` gauge.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable

from larkbot.canonical.errors import RetryableError
from larkbot.canonical.llm import LLMError, LLMRequest, TextPart
from larkbot.driver.wake.accounting import count_usage
from larkbot.driver.wake.clients import BusClients
from larkbot.driver.wake.clock import Clock
from larkbot.driver.wake.sizing import Sizing
from larkbot.runtime import periodic
from larkbot.runtime.config import MemorySettings
from larkbot.runtime.logs import log_context

from .. import metrics
from ..errors import ConsolidationRefused, InvalidAnswer
from .core.consolidation import (
    backoff_ms,
    consolidation_message,
    consolidation_system,
    merged_evidence,
    read_notes,
)
from .core.memory import NewMemory, PatchChange
from .memories import MemoryStore

log = logging.getLogger(__name__)

Group = tuple[str, str, str, str]
#: How often the leader looks whether a pass is due.
PASS_CHECK_S = 30.0


class Consolidator:
    def __init__(
        self,
        store: MemoryStore,
        clients: BusClients,
        clock: Clock,
        sizing: Sizing,
        settings: MemorySettings,
        *,
        name_of: Callable[[str, str], str],
    ) -> None:
        self.store = store
        self.clients = clients
        self.clock = clock
        self.sizing = sizing
        self.settings = settings
        #: The persona name of a chat (``platform``, ``chat_id``), for the prompt.
        self.name_of = name_of

    async def run(self, stopping: asyncio.Event) -> None:
        """Consolidate every interval until ``stopping`` (or until cancelled: the lease was lost). The
        first pass runs at once; one postponed by a transient failure is tried again within
        ``PASS_CHECK_S`` rather than an interval later."""
        interval = self.settings.consolidation_interval_s
        due = 0.0

        async def due_pass() -> None:
            nonlocal due
            now = time.monotonic()
            if now < due:
                return
            due = now + interval
            try:
                await self.maintain()
            except RetryableError as exc:
                log.warning("memory maintenance pass postponed: %s", exc)
                due = now + min(interval, PASS_CHECK_S)

        await periodic.every(min(interval, PASS_CHECK_S), due_pass, stopping, name="memory maintenance")

    async def maintain(self) -> dict[str, int]:
        """One maintenance pass — the memory gauge refreshed, every group due now consolidated — and the
        count of groups by outcome. :meth:`run` calls it on schedule; with the loop off (a replica built
        with ``DriverOptions(memory_maintenance=False)``) a pass runs only when called."""
        stats = await self.store.stats()
        for scope in ("group", "private", "global"):
            metrics.MEMORIES.labels(scope).set(stats.by_scope.get(scope, 0))
        outcomes: dict[str, int] = {}
        if not self.settings.consolidation_enabled:
            return outcomes
        groups = await self.store.consolidation_groups(min_count=self.settings.consolidation_min_count)
        for platform, person, scope, chat_id, _count in groups:
            outcome = await self.consolidate((platform, person, scope, chat_id))
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        return outcomes

    async def consolidate(self, group: Group) -> str:
        now = self.clock.now_ms()
        state = await self.store.maintenance_state(group)
        if state is not None and state[1] > now:
            metrics.MEMORY_CONSOLIDATIONS.labels("backing_off").inc()
            return "backing_off"
        with log_context(chat=f"{group[0]}:{group[3]}"):
            try:
                merged = await self._merge(group, now)
            except (InvalidAnswer, ConsolidationRefused, RetryableError) as exc:
                failures = (state[0] if state is not None else 0) + 1
                wait = backoff_ms(
                    failures,
                    self.settings.consolidation_retry_initial_s,
                    self.settings.consolidation_retry_max_s,
                )
                log.warning(
                    "memory consolidation failed (attempt %d, next in %d s): %s", failures, wait // 1000, exc
                )
                await self.store.record_maintenance(
                    group, ok=False, now_ms=now, next_attempt_ms=now + wait, error=str(exc)[:500]
                )
                metrics.MEMORY_CONSOLIDATIONS.labels("failed").inc()
                return "failed"
        next_at = now + round(self.settings.consolidation_interval_s * 1000)
        await self.store.record_maintenance(group, ok=True, now_ms=now, next_attempt_ms=next_at, error=None)
        outcome = "merged" if merged else "nothing"
        metrics.MEMORY_CONSOLIDATIONS.labels(outcome).inc()
        return outcome

    async def _merge(self, group: Group, now: int) -> int:
        platform, person, scope, chat_id = group
        batch = await self.store.normal_in_group(
            platform, person, scope, chat_id, limit=self.settings.consolidation_max_batch
        )
        if len(batch) < self.settings.consolidation_min_count:
            return 0
        digest = hashlib.sha256(",".join(str(m.id) for m in batch).encode()).hexdigest()[:16]
        timeout_s = self.settings.consolidation_timeout_s
        request = LLMRequest(
            request_id=f"memory-{digest}-{now}",
            purpose="memory",
            endpoint=self.sizing.endpoint("memory", platform, chat_id),
            system=consolidation_system(self.name_of(platform, chat_id), platform, person),
            messages=(consolidation_message(batch),),
            max_output_tokens=4000,
            deadline_ms=now + round(timeout_s * 1000),
            chat_key=f"{platform}:{chat_id}",
        )
        reply = await self.clients.generate(request, timeout_s)
        if isinstance(reply, LLMError):
            raise ConsolidationRefused(f"the model answered {reply.category}: {reply.message[:200]}")
        count_usage("memory", reply)
        text = "".join(p.text for p in reply.message.parts if isinstance(p, TextPart))
        notes = read_notes(text, batch)
        for index, note in enumerate(notes):
            saved = await self.store.save(
                NewMemory(
                    platform=platform,
                    person_id=person,
                    content=note.content,
                    evidence=merged_evidence(note, batch),
                    chat_id=chat_id,
                    scope=scope,  # type: ignore[arg-type]
                    importance="high",
                    origin="consolidation",
                    supersedes=note.covers,
                    key=f"consolidation:{digest}:{index}",
                ),
                now_ms=self.clock.now_ms(),
            )
            for memory_id in note.covers:
                await self.store.patch(
                    memory_id,
                    PatchChange(enabled=False),
                    reason=f"consolidated into {saved.id}",
                    actor="consolidation",
                    chat_id=None,
                    now_ms=self.clock.now_ms(),
                    key=f"consolidation:{digest}:{index}:{memory_id}",
                )
        return len(notes)
