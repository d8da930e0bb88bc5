"""Singleton work through the lease mechanism: "run this only while holding the singleton lease <name>".

Work that one replica of a service must do at a time (memory maintenance, a retention sweep) is led
through a lease in the ``leases`` KV bucket, the same bucket and CAS rules as the partition leases
(:mod:`.partitions`), under the key ``<group>.singleton.<name>``:

- a replica takes the lease with a compare-and-set ``create`` (it fails while another holds it) and keeps
  it by renewing it every ``heartbeat_s`` with CAS ``update`` on the revision it holds;
- the bucket's TTL expires an entry one TTL after its last write: a leader that dies (or loses NATS)
  stops renewing, and after the TTL another replica's ``create`` succeeds — it takes over;
- a leader that cannot renew (NATS away, a CAS that fails because the lease moved) stops its work at
  once when the lease moved, and in any case before its last renewal is ``ttl - heartbeat_s`` old, so
  two leaders never work at the same time;
- a clean stop ends the work first, then deletes the lease (CAS on its revision), so the next leader
  need not wait for the TTL.

:meth:`SingletonLease.run` takes the work as a coroutine factory, started each time the lease is won and
cancelled when it is lost or the service stops; :attr:`SingletonLease.held` answers "am I the leader now"
for work that only checks (a round that is skipped when not leading).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

import nats
from nats.js.kv import KeyValue

__all__ = ["SingletonLease", "singleton_key"]

log = logging.getLogger(__name__)

#: Failures of a lease round that the next round retries (the lease outlives a few missed rounds).
_TRANSIENT = (nats.errors.Error, TimeoutError)


def singleton_key(group: str, name: str) -> str:
    return f"{group}.singleton.{name}"


class SingletonLease:
    def __init__(
        self,
        kv: KeyValue,
        group: str,
        name: str,
        replica: str,
        *,
        ttl_s: float,
        heartbeat_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kv = kv
        self.key = singleton_key(group, name)
        self.name = name
        self.replica = replica
        self.ttl_s = ttl_s
        self.heartbeat_s = heartbeat_s if heartbeat_s is not None else ttl_s / 3
        if not 0 < self.heartbeat_s < ttl_s:
            raise ValueError(
                f"lease {self.key}: heartbeat {self.heartbeat_s} s must be under the TTL {ttl_s} s"
            )
        self._clock = clock
        self._revision: int | None = None
        self._renewed_at = 0.0

    @classmethod
    async def open(
        cls, js: nats.js.JetStreamContext, bucket: str, group: str, name: str, replica: str
    ) -> SingletonLease:
        """A lease in ``bucket``, with the bucket's TTL."""
        kv = await js.key_value(bucket)
        ttl = (await kv.status()).ttl or 15.0
        return cls(kv, group, name, replica, ttl_s=ttl)

    @property
    def held(self) -> bool:
        """This replica holds the lease, renewed recently enough that nobody else can have taken it."""
        if self._revision is None:
            return False
        return self._clock() - self._renewed_at < self.ttl_s - self.heartbeat_s

    async def tick(self) -> bool:
        """One round: renew the lease held, or try to take it. Returns :attr:`held`."""
        try:
            if self._revision is None:
                self._revision = await self.kv.create(self.key, self.replica.encode())
                log.info("took the %s lease", self.name)
            else:
                self._revision = await self.kv.update(self.key, self.replica.encode(), last=self._revision)
            self._renewed_at = self._clock()
        except nats.js.errors.KeyWrongLastSequenceError:
            if self._revision is not None:
                log.warning("lost the %s lease", self.name)
            self._revision = None  # held by another replica (or moved to one): try again next round
        except _TRANSIENT as exc:
            log.warning("%s lease round failed: %s", self.name, type(exc).__name__)
        return self.held

    async def run(self, stopping: asyncio.Event, work: Callable[[], Awaitable[None]] | None = None) -> None:
        """Contend for the lease until ``stopping``; while it is held, run ``work()`` once (started anew
        when the lease is won again, cancelled when it is lost; a failure of the work propagates). Ends
        the work, then releases the lease."""
        task: asyncio.Task[None] | None = None
        try:
            while not stopping.is_set():
                held = await self.tick()
                if task is not None and task.done():
                    task.result()  # work that failed fails the service (ServiceContext.spawn)
                if work is not None and held and task is None:
                    task = asyncio.create_task(_run(work), name=f"lease-{self.name}")
                elif not held and task is not None:
                    await _cancel(task)
                    task = None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), self._until_next_round())
        finally:
            if task is not None:
                await _cancel(task)
            await self.release()

    def _until_next_round(self) -> float:
        if self._revision is None:
            return self.heartbeat_s
        # Wake in time to stop the work before the lease could pass to another replica.
        left = self._renewed_at + self.ttl_s - self.heartbeat_s - self._clock()
        return max(0.0, min(self.heartbeat_s, left))

    async def release(self) -> None:
        """Hand the lease back (a clean stop), so that another replica need not wait for the TTL."""
        revision, self._revision = self._revision, None
        if revision is None:
            return
        with contextlib.suppress(nats.js.errors.KeyWrongLastSequenceError, *_TRANSIENT):
            await self.kv.delete(self.key, last=revision)
            log.info("released the %s lease", self.name)


async def _run(work: Callable[[], Awaitable[None]]) -> None:
    await work()


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
