"""The contact-name table, shared by every replica and kept across restarts in the ``feishu-contact-names``
KV bucket; the rule of which name wins is :mod:`..core.names`.

- Every change goes through :func:`~..core.names.merge` against the bucket's current entry and is
  written with compare-and-set, so two replicas learning different names for one id end where the rule
  says, never where the last writer happened to be.
- Each process mirrors the bucket in memory (:meth:`Contacts.names`, read by the pure adapter): loaded
  at :meth:`start` before any event is handled, then kept current by the runtime's KV watch
  (:class:`~larkbot.runtime.watch.KvWatch`, :meth:`watch`). A process that starts
  knows every name the others learned, so a restart or a second replica renders the same name.
- Contact lookups run in the background (4 at a time) for ids the API never answered for or answered
  ``ttl_s`` ago (:meth:`want`). A transient failure (timeout, rate limit, Feishu's 5xx) is not an answer:
  the id is asked again after ``retry_s``, not after the TTL. A final refusal (the user is outside the
  app's contact scope, the scope is missing) counts as an answer without a name.
- :meth:`resolve` is the one wait on the event path: for ids nobody has named, it reads the bucket and
  then waits at most ``wait_s`` for their lookups, so that a new member's first message normally carries
  the name rather than the open_id followed by a rename.
- Every bucket revision the mirror takes in, and every change in the number of lookups in flight, is
  reported to the table's :class:`ContactsObserver` (nobody in production; the testkit waits on it for a
  mirror to catch up with the bucket, or for the lookups to end).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from types import MappingProxyType
from typing import Protocol

import nats
from nats.js.kv import KeyValue

from larkbot.canonical.errors import LarkbotError
from larkbot.canonical.names import KV_FEISHU_CONTACT_NAMES
from larkbot.runtime.bus import Bus
from larkbot.runtime.watch import KvUpdate, KvWatch

from .. import metrics
from ..core.names import NameEntry, contact_answer, merge, needs_lookup, payload_name
from .api import FeishuApi
from .rest import ApiTransient, FeishuApiError

log = logging.getLogger(__name__)

_PLAIN_KEY = re.compile(r"[-_=a-zA-Z0-9]{1,200}")


class ContactsObserver(Protocol):
    """Called synchronously, right after the change; must return at once and must not raise."""

    def mirrored(self, revision: int) -> None:
        """The mirror took in the bucket's entry of ``revision`` (at the load or from the watch)."""

    def lookups(self, in_flight: int) -> None:
        """A contact lookup started or ended: ``in_flight`` are running or waiting now."""


class Unobserved:
    """The observer of a contact-name table nobody watches."""

    def mirrored(self, revision: int) -> None:
        return None

    def lookups(self, in_flight: int) -> None:
        return None


UNOBSERVED: ContactsObserver = Unobserved()


def kv_key(open_id: str) -> str:
    """Open ids are plain tokens; anything else a payload might carry becomes a digest (KV keys allow only
    ``[-/_=.a-zA-Z0-9]``)."""
    if _PLAIN_KEY.fullmatch(open_id):
        return open_id
    return "sha256-" + hashlib.sha256(open_id.encode()).hexdigest()


class Contacts:
    def __init__(
        self,
        bus: Bus,
        api: FeishuApi | None,
        ttl_s: float,
        *,
        wait_s: float = 0.5,
        retry_s: float = 60.0,
        concurrency: int = 4,
        clock: Callable[[], float] = time.time,
        observer: ContactsObserver = UNOBSERVED,
    ) -> None:
        self.bus = bus
        self.api = api
        self.observer = observer
        self.ttl_s = ttl_s
        self.wait_s = wait_s
        self.retry_s = retry_s
        self._clock = clock
        self._kv: KeyValue | None = None
        self._mirror = KvWatch(bus, KV_FEISHU_CONTACT_NAMES, self._mirrored)
        self._entries: dict[str, tuple[NameEntry, int]] = {}  # open_id → (entry, bucket revision)
        self._names: dict[str, str] = {}
        self._view: Mapping[str, str] = MappingProxyType(self._names)
        self._retry_at: dict[str, float] = {}
        self._limit = asyncio.Semaphore(concurrency)
        self._tasks: dict[str, asyncio.Task[None]] = {}  # lookups in flight, by open_id

    # -- mirror ----------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Load the bucket (returns once every stored entry is mirrored); :meth:`watch` keeps it current."""
        self._kv = await self.bus.js.key_value(KV_FEISHU_CONTACT_NAMES)
        await self._mirror.start()
        log.info("contact names loaded: %d", len(self._entries))

    async def watch(self) -> None:
        """Mirror what other replicas write (runs until :meth:`close`)."""
        await self._mirror.run()

    async def _mirrored(self, update: KvUpdate) -> None:
        self._take(update.key, update.value, update.revision)
        self.observer.mirrored(update.revision)

    def _take(self, key: str, value: bytes | None, revision: int) -> None:
        if not value:
            for open_id in [oid for oid in self._entries if kv_key(oid) == key]:
                self._entries.pop(open_id)
                self._names.pop(open_id, None)
            return
        try:
            entry = NameEntry.from_json(value)
        except ValueError as exc:
            log.warning("contact-name entry %s ignored: %s", key, exc)
            return
        self._apply(entry, revision)

    def _apply(self, entry: NameEntry, revision: int) -> None:
        known = self._entries.get(entry.open_id)
        if known is not None and known[1] > revision:
            return  # the watch can deliver a revision older than one this process just wrote
        self._entries[entry.open_id] = (entry, revision)
        if entry.name is not None:
            self._names[entry.open_id] = entry.name
        else:
            self._names.pop(entry.open_id, None)

    def names(self) -> Mapping[str, str]:
        return self._view

    def entry(self, open_id: str) -> NameEntry | None:
        known = self._entries.get(open_id)
        return known[0] if known else None

    # -- learning --------------------------------------------------------------------------------------
    async def seed(self, pairs: Iterable[tuple[str, str]]) -> None:
        """Names a payload disclosed: they only name ids that have no name (core.names). Written before
        the event is acknowledged (only when they name someone new), so that every replica takes the same
        first name."""
        for open_id, name in pairs:
            incoming = payload_name(open_id, name)
            if self._remember(incoming):
                await self._persist(incoming)

    async def learn(self, open_id: str, name: str) -> None:
        """An authoritative name (the bot's own, from bot info)."""
        incoming = contact_answer(open_id, name, self._clock())
        if self._remember(incoming):
            await self._persist(incoming)

    def _remember(self, incoming: NameEntry) -> bool:
        """Apply ``incoming`` to the mirror at once (this process uses it from now on); the write that
        follows mirrors whatever the bucket ends with, should another replica have known better."""
        current = self._entries.get(incoming.open_id)
        merged = merge(current[0] if current else None, incoming)
        if merged is None:
            return False
        self._apply(merged, current[1] if current else 0)
        return True

    async def _persist(self, incoming: NameEntry) -> None:
        try:
            await self._write(incoming)
        except (nats.errors.Error, TimeoutError) as exc:
            # Kept in this process; the next lookup (after the TTL) or disclosure writes it again.
            log.warning("contact name not stored: %s", type(exc).__name__)

    async def _write(self, incoming: NameEntry) -> None:
        """Merge ``incoming`` into the bucket with compare-and-set, then mirror the result."""
        assert self._kv is not None
        key = kv_key(incoming.open_id)
        while True:
            current: NameEntry | None = None
            revision: int | None = None
            try:
                stored = await self._kv.get(key)
            except nats.js.errors.KeyNotFoundError:
                pass
            else:
                revision = stored.revision
                try:
                    current = NameEntry.from_json(stored.value or b"")
                except ValueError as exc:
                    log.warning("contact-name entry %s unreadable, replaced: %s", key, exc)
            merged = merge(current, incoming)
            if merged is None:
                if current is not None and revision is not None:
                    self._apply(current, revision)
                return
            try:
                if revision is None:
                    revision = await self._kv.create(key, merged.to_json())
                else:
                    revision = await self._kv.update(key, merged.to_json(), last=revision)
            except nats.js.errors.KeyWrongLastSequenceError:
                continue  # another replica wrote first: merge with what it wrote
            self._apply(merged, revision)
            return

    # -- lookups ---------------------------------------------------------------------------------------
    def want(self, open_ids: Iterable[str]) -> None:
        """Schedule lookups for the ids the contact API should be asked about; never waits."""
        self._schedule(open_ids)

    def _schedule(self, open_ids: Iterable[str]) -> list[asyncio.Task[None]]:
        if self.api is None:
            return []
        now = self._clock()
        tasks: list[asyncio.Task[None]] = []
        for open_id in dict.fromkeys(open_ids):
            if not open_id.startswith("ou_") or not needs_lookup(self.entry(open_id), now, self.ttl_s):
                continue
            if self._retry_at.get(open_id, 0.0) > now:
                continue
            task = self._tasks.get(open_id)
            if task is None:
                task = asyncio.create_task(self._lookup(open_id), name=f"contact-{open_id}")
                self._tasks[open_id] = task
                task.add_done_callback(partial(self._done, open_id))
                self.observer.lookups(len(self._tasks))
            tasks.append(task)
        return tasks

    def _done(self, open_id: str, _task: asyncio.Task[None]) -> None:
        self._tasks.pop(open_id, None)
        self.observer.lookups(len(self._tasks))

    async def _lookup(self, open_id: str) -> None:
        assert self.api is not None
        async with self._limit:
            try:
                name = await self.api.user_name(open_id)
            except LarkbotError as exc:
                if not isinstance(exc, FeishuApiError) or isinstance(exc, ApiTransient):
                    log.warning("contact lookup failed; asking again in %.0f s: %s", self.retry_s, exc)
                    metrics.NAME_LOOKUPS.labels("error").inc()
                    self._retry_at[open_id] = self._clock() + self.retry_s
                    return
                # Final (the app lacks the contact scope): an answer without a name, asked again after
                # the TTL.
                log.warning("contact lookup refused: %s", exc)
                metrics.NAME_LOOKUPS.labels("refused").inc()
                name = None
            else:
                metrics.NAME_LOOKUPS.labels("found" if name else "not_found").inc()
        self._retry_at.pop(open_id, None)
        answer = contact_answer(open_id, name, self._clock())
        if self._remember(answer):
            await self._persist(answer)

    async def resolve(self, open_ids: Iterable[str]) -> bool:
        """For ids no source has named yet: the bucket, then their lookups for at most ``wait_s``.
        Returns whether a name was learned."""
        unknown = [i for i in dict.fromkeys(open_ids) if i.startswith("ou_") and self.entry(i) is None]
        if not unknown or self._kv is None:
            return False
        learned = False
        for open_id in unknown:
            with contextlib.suppress(nats.js.errors.KeyNotFoundError):
                stored = await self._kv.get(kv_key(open_id))
                if stored.value:
                    self._take(stored.key, stored.value, int(stored.revision or 0))
                    learned = learned or open_id in self._names
        tasks = self._schedule(i for i in unknown if self.entry(i) is None)
        if tasks and self.wait_s > 0:
            await asyncio.wait(tasks, timeout=self.wait_s)
            learned = learned or any(i in self._names for i in unknown)
        return learned

    # -- lifecycle -------------------------------------------------------------------------------------
    async def close(self) -> None:
        pending = list(self._tasks.values())
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await self._mirror.stop()
