"""The rate-limit windows kept in the bus's ``rate-limits`` KV bucket (``names.KV_RATE_LIMITS``), shared
by every driver replica and kept across restarts.

Why the bus and not the driver's database: a person's window is counted by whichever replica holds the
chat they write in, so two replicas count the same person at once; KV gives a compare-and-set on the
record's revision (``update(key, value, last=revision)``) without a transaction per wake-up, and the
bucket's TTL is the retention (a record matters for at most its window plus its cooldown).

Every ask is read → judged (``core.window``, pure) → written on the revision read. A write that finds
another revision (``KeyWrongLastSequenceError``: another replica counted first) is not an error: the
record is read again and judged anew, so no count is lost. A judgement that changes nothing writes
nothing. A bucket that does not answer, or a record contended :data:`CAS_ATTEMPTS` times in a row,
raises :class:`RateLimitsUnavailable` (retryable: the wake-up is retried after the chat's delays).
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass, field
from typing import Final, Protocol

import nats.errors
from nats.js import JetStreamContext
from nats.js.errors import KeyDeletedError, KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from larkbot.canonical.names import KV_RATE_LIMITS
from larkbot.runtime.bus import BusUnavailable

from .core.rates import RateAsk
from .core.window import ADMITTED, Verdict, Window, judge, record, retained

log = logging.getLogger(__name__)

#: Compare-and-set rounds one ask may lose before it gives up. Each loss means another replica wrote the
#: same record in between; a replica with a queue of asks on that record reads again the moment it has
#: written, so a round is about a coin toss: 10 rounds lost in a row happened (30 asks of one member from
#: two replicas at once), 32 in a row is a 1 in 4·10⁹ chance.
CAS_ATTEMPTS: Final = 32
#: After a lost round, a jittered pause of up to this many seconds times the rounds lost (at most 8), so
#: that contenders stop reading in lock-step.
CAS_JITTER_S: Final = 0.001


class RateLimitsUnavailable(BusUnavailable):
    """The bucket did not answer, or a record stayed contended: nothing was counted by this ask."""


class WindowStore(Protocol):
    async def get(self, key: str) -> tuple[Window | None, int]:
        """The record and its revision (``None, 0``: none)."""
        ...

    async def put(self, key: str, window: Window, revision: int) -> bool:
        """Store ``window`` if the record is still at ``revision`` (0: absent); ``False``: it is not."""
        ...


class KvWindows:
    """:class:`WindowStore` over a KV bucket."""

    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv

    @classmethod
    async def open(cls, js: JetStreamContext) -> KvWindows:
        return cls(await js.key_value(KV_RATE_LIMITS))

    async def get(self, key: str) -> tuple[Window | None, int]:
        try:
            entry = await self.kv.get(key)
        except (KeyNotFoundError, KeyDeletedError):
            return None, 0
        except (nats.errors.Error, TimeoutError) as exc:
            raise RateLimitsUnavailable(f"rate-limits read: {type(exc).__name__}") from None
        if entry.value is None or entry.revision is None:
            return None, 0
        return Window.decode(entry.value), entry.revision

    async def put(self, key: str, window: Window, revision: int) -> bool:
        try:
            if revision == 0:
                await self.kv.create(key, window.encode())
            else:
                await self.kv.update(key, window.encode(), last=revision)
        except KeyWrongLastSequenceError:
            return False
        except (nats.errors.Error, TimeoutError) as exc:
            raise RateLimitsUnavailable(f"rate-limits write: {type(exc).__name__}") from None
        return True


@dataclass
class MemoryWindows:
    """:class:`WindowStore` in memory, with revisions like the bucket's: the flow tests' and the
    benchmark's store (one process, so never contended)."""

    records: dict[str, tuple[Window, int]] = field(default_factory=dict)
    revision: int = 0

    async def get(self, key: str) -> tuple[Window | None, int]:
        found = self.records.get(key)
        return (None, 0) if found is None else found

    async def put(self, key: str, window: Window, revision: int) -> bool:
        if self.records.get(key, (None, 0))[1] != revision:
            return False
        self.revision += 1
        self.records[key] = (window, self.revision)
        return True


class RateLimiter:
    """Asks of one replica. Those of one record wait for each other here (one member writing in several
    chats this replica drives), so the compare-and-set is contended only by other replicas."""

    def __init__(self, store: WindowStore, *, attempts: int = CAS_ATTEMPTS) -> None:
        self.store = store
        self.attempts = attempts
        #: key → its lock and how many asks hold or wait for it (dropped with the last).
        self._locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}

    async def ask(self, ask: RateAsk, now_ms: int) -> Verdict:
        lock, users = self._locks.setdefault(ask.key, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                return await self._ask(ask, now_ms)
        finally:
            users[0] -= 1
            if not users[0]:
                del self._locks[ask.key]

    async def _ask(self, ask: RateAsk, now_ms: int) -> Verdict:
        for attempt in range(self.attempts):
            if attempt:
                await asyncio.sleep(random.uniform(0, CAS_JITTER_S * min(attempt, 8)))
            stored, revision = await self.store.get(ask.key)
            current = stored if stored is not None else Window()
            if ask.mode == "record":
                verdict, changed = ADMITTED, record(current, hit_ms=ask.hit_ms, now_ms=now_ms)
            else:
                verdict, changed = judge(
                    current, ask.limit, hit_ms=ask.hit_ms, now_ms=now_ms, count=ask.mode == "admit"
                )
            if changed is current or ask.mode == "peek":
                return verdict
            if await self.store.put(ask.key, retained(changed, now_ms), revision):
                return verdict
            log.debug("rate-limit record %s written by another replica meanwhile; judging again", ask.key)
        raise RateLimitsUnavailable(f"rate-limit record {ask.key} contended {self.attempts} times")

    async def ask_all(self, asks: tuple[RateAsk, ...], now_ms: int) -> tuple[Verdict, ...]:
        """The verdicts in the order asked; the records are asked at once (a round trip each)."""
        return tuple(await asyncio.gather(*(self.ask(a, now_ms) for a in asks)))


__all__ = [
    "CAS_ATTEMPTS",
    "KvWindows",
    "MemoryWindows",
    "RateLimiter",
    "RateLimitsUnavailable",
    "WindowStore",
]
