"""The resident chats: one projection per configured chat, kept in step with the ``events`` table.

Sequencing of ``ContextUpdate``: an update caused by committed events gets ``seq = max(last event id ×
SEQ_STRIDE, previous seq + 1)``; updates without a new event (cursor move, identity change) take previous
seq + 1. Event ids are global and increasing, so ``seq`` increases per chat across restarts without being
stored: after a restart a chat starts at ``last event id × SEQ_STRIDE``, and a consumer holding another
value sees ``base_seq`` differ and asks ``pipeline.snapshot``. A publication the bus does not acknowledge is
published again until it is (:meth:`ResidentChats.publish`).

Residency within a budget: the projections held are estimated (:func:`estimated_bytes`) and kept under
``services.pipeline.resident_budget_mb``. Past it the chats idle longest (least recently changed or asked
for) are evicted: forgotten, save the ``seq`` they reached, and rebuilt from the database — exactly what a
cold start builds — before their next event is committed or their next snapshot or cursor move is
answered (:meth:`ResidentChats.wake`, timed as ``larkbot_pipeline_chat_reload_seconds``). A cold start
builds the chats with the newest events first and leaves the rest asleep once the budget is spent.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import assert_never

import nats
from nats.js.api import PubAck

from larkbot.canonical.codec import encode, headers_for
from larkbot.canonical.context import (
    AppendOp,
    ContextOp,
    ContextSnapshot,
    ContextUpdate,
    ReplaceOp,
    ResetOp,
)
from larkbot.canonical.events import CanonicalEvent
from larkbot.canonical.names import HEADER_TRACE, Platform, context_subject, partition_of
from larkbot.runtime import tracing
from larkbot.runtime.bus import Bus
from larkbot.runtime.retry import Failure, RetryPolicy, retrying

from .. import metrics
from ..core import Projection, RenderParams, render_keys
from ..errors import Unpublished
from .repository import EventRepository
from .writes import decode_event

log = logging.getLogger(__name__)

SEQ_STRIDE = 1024
#: A chat whose newest segment arrived this recently is marked when its partition is loaded (below). An
#: update committed and not yet published when the previous owner died belongs to such a chat: events
#: commit within seconds of arriving, or, waiting for their media, within the admission's bounded retries.
MARK_RECENT_MS = 3_600_000
#: Partitions loaded at once. Each load holds a database connection while it reads its chats; all 16
#: partitions of a start-up loading together held more connections than SQLite's pool has (5 + 10
#: overflow): with 100,000 configured chats the last load waited its 30 s for a connection, failed and
#: restarted, and the pipeline took 98 s to be ready. A load decodes and reduces as it reads, so on a
#: few cores more of them at once gain nothing.
COLD_STARTS = 2
#: Estimated bytes of a resident chat: a projection's fixed part, and each of its IC nodes with the
#: canonical event data it keeps and its segment. Measured with tracemalloc over the pipeline bench's
#: traffic: 58 KB at 18 nodes, 503 KB at 182 (~2.8 KB a node); 100,000 chats without events took ~1.9 KB
#: each of RSS. Since 2026-12-07 a node takes ~1.1 KB by the same measure (docs/performance.md, "Resident
#: memory per chat"); the estimate stands for RSS and stays until ``many_chats`` measures it again.
CHAT_BYTES = 2 * 1024
NODE_BYTES = 3 * 1024
ChatKey = tuple[str, str]


def estimated_bytes(projection: Projection) -> int:
    return CHAT_BYTES + NODE_BYTES * len(projection.ic.nodes)


@dataclass(slots=True)
class Chat:
    platform: Platform
    chat_id: str
    projection: Projection
    seq: int
    #: :func:`estimated_bytes` when last counted into :attr:`ResidentChats.held_bytes`.
    bytes: int = 0


def coalesce(ops: list[ContextOp]) -> tuple[ContextOp, ...]:
    """Merge adjacent appends (one update per chat per batch, O(changed segments))."""
    out: list[ContextOp] = []
    for op in ops:
        last = out[-1] if out else None
        if isinstance(op, AppendOp) and isinstance(last, AppendOp):
            out[-1] = AppendOp(segments=last.segments + op.segments)
        else:
            out.append(op)
    return tuple(out)


class ResidentChats:
    def __init__(
        self,
        bus: Bus,
        repo: EventRepository,
        params_for: Callable[[Platform, str], RenderParams | None],
        alt_texts: dict[str, str],
        publish_retry: RetryPolicy,
        budget_bytes: int = 512 * 1024 * 1024,
    ) -> None:
        self.bus = bus
        self.publish_retry = publish_retry
        self.repo = repo
        self.params_for = params_for
        self.alt_texts = alt_texts
        #: The resident chats, least recently used first (:meth:`_touch` moves a chat to the end).
        self.chats: dict[ChatKey, Chat] = {}
        #: Configured chats of the partitions held here that are not resident: the ``seq`` each continues
        #: from when rebuilt (an eviction keeps it; a chat never built continues from its last event).
        self.asleep: dict[ChatKey, int] = {}
        self.budget_bytes = budget_bytes
        #: The sum of the resident chats' :attr:`Chat.bytes`.
        self.held_bytes = 0
        #: Events replayed by every cold start of this process (partitions are loaded as acquired).
        self.replayed_total = 0
        #: Serialises every change of a projection (batches, cursor moves, identity changes).
        self.lock = asyncio.Lock()
        self._cold_starts = asyncio.Semaphore(COLD_STARTS)

    def is_resident(self, platform: str, chat_id: str) -> bool:
        if (platform, chat_id) in self.chats:
            return True
        return self.params_for(Platform(platform), chat_id) is not None

    # -- the budget ------------------------------------------------------------------------------------
    def _put(self, key: ChatKey, chat: Chat) -> None:
        """Make ``chat`` the resident projection of ``key`` (replacing one), the most recently used."""
        previous = self.chats.pop(key, None)
        if previous is not None:
            self.held_bytes -= previous.bytes
        chat.bytes = estimated_bytes(chat.projection)
        self.held_bytes += chat.bytes
        self.chats[key] = chat
        self.asleep.pop(key, None)
        metrics.RESIDENT_CHATS.set(len(self.chats))

    def _touch(self, key: ChatKey, chat: Chat) -> None:
        """``chat`` was used now: the last to be evicted; its size counted afresh."""
        self.chats[key] = self.chats.pop(key)
        size = estimated_bytes(chat.projection)
        self.held_bytes += size - chat.bytes
        chat.bytes = size

    def fit(self, keep: Iterable[ChatKey] = ()) -> int:
        """Evict the chats idle longest until the estimate is within the budget, never one of ``keep``
        (those just used); returns how many were evicted."""
        kept = set(keep)
        evicted = 0
        while self.held_bytes > self.budget_bytes and self.chats:
            key = next(iter(self.chats))
            if key in kept:
                break
            chat = self.chats.pop(key)
            self.held_bytes -= chat.bytes
            self.asleep[key] = chat.seq
            evicted += 1
        if evicted:
            metrics.CHAT_EVICTIONS.inc(evicted)
            metrics.RESIDENT_CHATS.set(len(self.chats))
            self.segments_changed()
        metrics.RESIDENT_BYTES.set(self.held_bytes)
        return evicted

    async def wake(self, keys: Iterable[ChatKey]) -> None:
        """Rebuild from the database each of these configured chats that is not resident (evicted, or
        left asleep by a cold start). The caller holds :attr:`lock` and has not committed anything of
        theirs that is not yet applied, so the database holds exactly what their projections had."""
        for key in dict.fromkeys(keys):
            if key in self.chats:
                continue
            platform = Platform(key[0])
            if self.params_for(platform, key[1]) is None:
                continue
            started = time.perf_counter()
            cursor = await self.repo.cursor(key[0], key[1])
            seq = self.asleep.get(key, 0)
            chat = await self.load(platform, key[1], cursor)
            assert chat is not None
            chat.seq = max(chat.seq, seq)
            metrics.CHAT_RELOAD_SECONDS.observe(time.perf_counter() - started)

    # -- cold start ------------------------------------------------------------------------------------
    async def load(self, platform: Platform, chat_id: str, cursor: int) -> Chat | None:
        """Replay the chat's persisted events after ``cursor`` in the order of record."""
        params = self.params_for(platform, chat_id)
        if params is None:
            return None
        rows = [row async for row in self.repo.chat_events(platform.value, chat_id, cursor)]
        last = rows[-1][0] if rows else await self.repo.last_event_id(platform.value, chat_id)
        return await self._build(platform, chat_id, params, cursor, rows, last)

    async def hydrate(self, events: Iterable[CanonicalEvent]) -> None:
        """Load the alt texts that rendering ``events`` needs (attachments' and custom emoji's)."""
        keys = {key for event in events for key in render_keys(event)} - self.alt_texts.keys()
        if keys:
            self.alt_texts.update(await self.repo.alt_texts(keys))

    async def _build(
        self,
        platform: Platform,
        chat_id: str,
        params: RenderParams,
        cursor: int,
        rows: list[tuple[int, str]],
        last: int,
    ) -> Chat:
        decoded = [(row_id, decode_event(payload)) for row_id, payload in rows]
        await self.hydrate(event for _, event in decoded)
        projection = Projection(params, cursor=cursor, alt_texts=self.alt_texts)
        for row_id, event in decoded:
            projection.apply(event, row_id)
        chat = Chat(platform, chat_id, projection, seq=max(last, cursor) * SEQ_STRIDE)
        self._put((platform.value, chat_id), chat)
        metrics.RC_BYTES.observe(projection.xml_chars)
        return chat

    async def load_partition(self, partition: int, keys: list[ChatKey]) -> int:
        """Cold start of the configured chats of one partition (on acquiring it); events replayed."""
        mine = [key for key in keys if partition_of(*key) == partition]
        if not mine:
            return 0
        events = await self.cold_start(mine)
        await self.mark(mine, int(time.time() * 1000) - MARK_RECENT_MS)
        # Partitions load a few at a time, each within what the budget had left when it started: the
        # resident chats are ordered by their newest event (``seq``) and the oldest evicted.
        self.chats = dict(sorted(self.chats.items(), key=lambda item: item[1].seq))
        self.fit()
        return events

    async def mark(self, keys: list[ChatKey], since_ms: int) -> None:
        """Publish, for each of these chats with a segment newer than ``since_ms``, an update that replaces
        its last segment with itself: a consumer holding the chat's newest state applies it and nothing
        changes; a consumer behind (the previous owner was killed between a commit and its publication)
        sees ``base_seq`` differ and asks for a snapshot. Without it that consumer would wait for the
        chat's next message, and a mention that was the newest message would go unanswered."""
        async with self.lock:
            updates = []
            for key in keys:
                chat = self.chats.get(key)
                last = chat.projection.last_segment() if chat is not None else None
                if chat is None or last is None or (chat.projection.newest_received_ms or 0) <= since_ms:
                    continue
                updates.append(self.next_update(chat, [ReplaceOp(segment=last)]))
            await self.publish(updates)

    def evict_partition(self, partition: int) -> None:
        """Forget the chats of a partition this replica no longer owns (another replica commits them now,
        so the projection would go stale; it is rebuilt from the database on re-acquiring)."""
        for key in [key for key in self.chats if partition_of(*key) == partition]:
            self.held_bytes -= self.chats.pop(key).bytes
        for key in [key for key in self.asleep if partition_of(*key) == partition]:
            del self.asleep[key]
        metrics.RESIDENT_CHATS.set(len(self.chats))
        metrics.RESIDENT_BYTES.set(self.held_bytes)
        self.segments_changed()

    async def cold_start(self, keys: list[ChatKey]) -> int:
        """Replay the given chats from their compaction cursors (one read pass); events replayed.

        The replay allocates millions of long-lived objects and no garbage cycles; the cyclic collector's
        full passes over them took ~40 % of a 300k-event replay (measured: 10.4k → 17.7k events/s without
        them). It is paused during the replay, and what was built moves to the permanent generation
        (``gc.freeze``) so that later full collections skip it (reference counting still frees it)."""
        async with self._cold_starts:
            was_enabled = gc.isenabled()
            gc.disable()
            try:
                return await self._cold_start(keys)
            finally:
                if was_enabled:
                    gc.enable()
                gc.freeze()

    async def _cold_start(self, keys: list[ChatKey]) -> int:
        started = time.perf_counter()
        cursors = await self.repo.cursors()
        wanted = [(key, params) for key in keys if (params := self.params_for(Platform(key[0]), key[1]))]
        # One grouped query per 500 chats finds those with anything after their cursor; only they are
        # read event by event (a query each: 100,000 configured chats, mostly quiet, took 80 s to load).
        # The others still continue their update sequence from their last event.
        lasts = await self.repo.last_event_ids([key for key, _ in wanted])
        # The chats with the newest events first: when the budget is spent, those left asleep are the
        # ones idle longest (rebuilt on their next event).
        wanted.sort(key=lambda item: -lasts.get(item[0], 0))
        with_events = [key for key, _ in wanted if lasts.get(key, 0) > cursors.get(key, 0)]
        pending = set(with_events)
        events = 0
        full = False
        async with contextlib.aclosing(self.repo.chats_events(with_events, cursors)) as read:
            for key, params in wanted:
                cursor = cursors.get(key, 0)
                # Once full, the rest stay asleep (the reads are in this loop's order: none is skipped
                # and a later one read).
                full = full or self.held_bytes >= self.budget_bytes
                if full:
                    self.asleep[key] = max(lasts.get(key, 0), cursor) * SEQ_STRIDE
                    continue
                rows: list[tuple[int, str]] = []
                if key in pending:
                    # chats_events yields the chats in the order asked, which is this loop's.
                    _key, rows = await anext(read)
                await self._build(Platform(key[0]), key[1], params, cursor, rows, lasts.get(key, 0))
                events += len(rows)
        metrics.RESIDENT_BYTES.set(self.held_bytes)
        metrics.COLD_REPLAY_SECONDS.set(time.perf_counter() - started)
        metrics.COLD_REPLAY_EVENTS.set(events)
        self.replayed_total += events
        self.segments_changed()
        return events

    # -- live ------------------------------------------------------------------------------------------
    def apply(self, committed: list[tuple[int, CanonicalEvent]]) -> dict[ChatKey, list[ContextOp]]:
        """Apply committed events (order of record) to their resident chats; ops per changed chat."""
        changed: dict[ChatKey, list[ContextOp]] = {}
        for event_id, event in committed:
            key = (event.platform.value, event.chat_id)
            chat = self.chats.get(key)
            if chat is None or event_id <= chat.projection.cursor:
                # A cursor beyond the newest event compacts events that arrive later but sort before it.
                continue
            started = time.perf_counter()
            change = chat.projection.reduce(event, event_id)
            reduced = time.perf_counter()
            ops = chat.projection.render(change)
            self._touch(key, chat)
            metrics.REDUCE_SECONDS.labels(event.kind).observe(reduced - started)
            metrics.RENDER_SECONDS.labels(event.kind).observe(time.perf_counter() - reduced)
            if ops:
                changed.setdefault((event.platform.value, event.chat_id), []).extend(ops)
        return changed

    def segments_changed(self) -> None:
        metrics.RC_SEGMENTS.set(sum(len(chat.projection.ic.nodes) for chat in self.chats.values()))

    def ensure(self, platform: Platform, chat_id: str) -> Chat | None:
        """A resident chat first seen live (configured, nothing persisted yet)."""
        key = (platform.value, chat_id)
        chat = self.chats.get(key)
        if chat is None:
            params = self.params_for(platform, chat_id)
            if params is None:
                return None
            chat = Chat(platform, chat_id, Projection(params, alt_texts=self.alt_texts), seq=0)
            self._put(key, chat)
        return chat

    def next_update(self, chat: Chat, ops: list[ContextOp], last_event_id: int = 0) -> ContextUpdate:
        seq = max(last_event_id * SEQ_STRIDE, chat.seq + 1)
        update = ContextUpdate(
            platform=chat.platform,
            chat_id=chat.chat_id,
            seq=seq,
            base_seq=chat.seq,
            cursor=chat.projection.cursor,
            ops=coalesce(ops),
            title=chat.projection.title,
        )
        chat.seq = seq
        return update

    async def publish(
        self,
        updates: list[ContextUpdate],
        traces: Mapping[ChatKey, str] | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        """Publish pipelined (one round trip for the whole batch; one connection keeps their order), and
        publish again what was not acknowledged until all of it is (``retry.background``). The caller
        holds :attr:`lock`, so no later update of a chat overtakes one being published again; each chat
        has one update per batch. A copy stored twice (its acknowledgement lost) is stale to consumers
        (``seq`` not above theirs).

        Only logging a lost publication left its chat silent: a consumer notices a gap from the next
        update's ``base_seq``, and the chat's newest message has no next update (seen on a 3-node cluster
        when the ``CONTEXT`` leader was killed under traffic).

        ``traces``: the ``traceparent`` a chat's update carries (``adapters.traces``); without one it
        carries the current one (a cursor move: the driver's request)."""
        if not updates:
            return
        pending = updates

        def retried(_failure: Failure, _attempts: int, wait: float, _exc: BaseException | None) -> None:
            log.warning("%d context update(s) not published, publishing again in %.2f s", len(pending), wait)

        async for attempt in retrying(self.publish_retry, _unpublished, on_retry=retried):
            with attempt:
                pending = await self._publish_once(pending, traces or {}, timeout_s)
                if pending:
                    raise Unpublished(len(pending))
        metrics.UPDATES.labels("published").inc(len(updates))

    async def _publish_once(
        self, updates: list[ContextUpdate], traces: Mapping[ChatKey, str], timeout_s: float
    ) -> list[ContextUpdate]:
        """One pipelined round; the updates not acknowledged, in order."""
        js = self.bus.js
        futures: list[asyncio.Future[PubAck]] = []
        current = tracing.traceparent()
        try:
            for update in updates:
                metrics.UPDATE_BYTES.observe(sum(_xml_bytes(op) for op in update.ops))
                subject = context_subject(update.platform.value, update.chat_id)
                headers = headers_for(update)
                trace = traces.get((update.platform.value, update.chat_id), current)
                if trace is not None:
                    headers[HEADER_TRACE] = trace
                futures.append(await js.publish_async(subject, encode(update), headers=headers))
        except nats.errors.Error as exc:
            log.warning("context updates not published: %s", type(exc).__name__)
        try:
            results: list[object] = await asyncio.wait_for(
                asyncio.gather(*futures, return_exceptions=True), timeout_s
            )
        except TimeoutError:
            results = [TimeoutError()] * len(futures)
        results += [None] * (len(updates) - len(futures))
        failed = [
            u for u, r in zip(updates, results, strict=True) if r is None or isinstance(r, BaseException)
        ]
        if failed:
            metrics.UPDATES.labels("failed").inc(len(failed))
        return failed

    # -- requests and control --------------------------------------------------------------------------
    async def snapshot(self, platform: Platform, chat_id: str) -> ContextSnapshot:
        """The chat's context now (rebuilt first when it is asleep)."""
        key = (platform.value, chat_id)
        if key in self.chats:
            self._touch(key, self.chats[key])
            return self._snapshot(platform, chat_id)
        async with self.lock:
            await self.wake([key])
            snapshot = self._snapshot(platform, chat_id)
            self.fit(keep=[key])
            return snapshot

    def _snapshot(self, platform: Platform, chat_id: str) -> ContextSnapshot:
        chat = self.chats.get((platform.value, chat_id))
        if chat is None:
            return ContextSnapshot(platform=platform, chat_id=chat_id, seq=0, cursor=0, segments=())
        return ContextSnapshot(
            platform=platform,
            chat_id=chat_id,
            seq=chat.seq,
            cursor=chat.projection.cursor,
            segments=chat.projection.segments,
            title=chat.projection.title,
        )

    async def move_cursor(
        self, platform: Platform, chat_id: str, cursor: int, reason: str
    ) -> ContextSnapshot:
        """Persist the cursor, rebuild the projection from it (exactly what a cold start would build) and
        publish a reset. A cursor that does not advance changes nothing."""
        async with self.lock:
            key = (platform.value, chat_id)
            await self.wake([key])
            chat = self.chats.get(key)
            if chat is None or cursor <= chat.projection.cursor:
                return self._snapshot(platform, chat_id)
            await self.repo.set_cursor(platform.value, chat_id, cursor, reason, int(time.time() * 1000))
            previous = chat.seq
            rebuilt = await self.load(platform, chat_id, cursor)
            assert rebuilt is not None
            rebuilt.seq = previous
            update = self.next_update(rebuilt, [ResetOp(segments=rebuilt.projection.segments)])
            await self.publish([update])
            metrics.CURSOR_MOVES.inc()
            snapshot = self._snapshot(platform, chat_id)
            self.fit(keep=[key])
            return snapshot

    async def rerender_platform(self, platform: Platform) -> None:
        """New render parameters (the bot's identity changed): reset every chat of the platform."""
        async with self.lock:
            updates = []
            for chat in self.chats.values():
                if chat.platform is not platform:
                    continue
                params = self.params_for(platform, chat.chat_id)
                if params is None:
                    continue
                reset = chat.projection.rerender(params)
                updates.append(self.next_update(chat, [reset]))
            # An asleep chat is rebuilt with the new parameters; its next update says it moved on
            # (``base_seq`` above what a consumer holds), so that the consumer asks for a snapshot.
            for key in self.asleep:
                if key[0] == platform.value:
                    self.asleep[key] += 1
            await self.publish(updates)


def _xml_bytes(op: ContextOp) -> int:
    match op:
        case AppendOp() | ResetOp():
            return sum(len(segment.xml) for segment in op.segments)
        case ReplaceOp():
            return len(op.segment.xml)
        case _:
            assert_never(op)


def _unpublished(exc: BaseException) -> Failure | None:
    """Updates not acknowledged are published again for as long as it takes; anything else is final."""
    return Failure.TRANSIENT if isinstance(exc, Unpublished) else None
