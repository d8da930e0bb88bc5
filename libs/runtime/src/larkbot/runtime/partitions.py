"""Partition ownership: each of a fixed number of partitions is consumed by exactly one replica at a time.

Per-chat order is the invariant (DESIGN §3). Chats are hashed into ``names.PARTITIONS`` partitions by the
stream's subject transform; each partition has its own durable consumer. Replicas of a service agree on
who owns which partition through leases in the ``leases`` KV bucket, whose TTL expires the lease of a
replica that died:

- every replica heartbeats ``<group>.members.<replica>``; the live members, sorted, define the desired
  assignment ``partition p → members[p % len(members)]`` (stable, and balanced within one partition);
- a replica acquires a desired partition with a compare-and-set ``create`` of ``<group>.p<NN>`` and keeps
  it with CAS ``update`` on the revision it holds; a failed update means it lost the lease: it stops
  consuming that partition at once;
- a replica that holds a partition no longer desired for it (a member joined) stops consuming it first,
  then deletes the lease (CAS on its revision) so the new owner can take it.

A lease outlives its owner by at most the bucket TTL, so a killed replica's partitions move after it.

The owner's hooks: ``on_acquire(p)`` takes a partition over; when it raises it must leave nothing behind.
``on_release(p)`` hands it back (after its in-flight work) and is called exactly once after each
``on_acquire(p)`` that returned. The hooks of one partition never overlap: a partition whose release is
still running is not acquired again until that release has returned — otherwise the release, finishing
late, would tear down what the new take-over set up. Renewal never waits for a hook: a lost lease's
release runs on its own task, so the other leases (and the membership) are renewed meanwhile.

A take-over that fails (the hook raised: NATS did not answer, the database is away) gives the lease back
and is tried again by the next round after a backoff (``retry.background``: 0.5 s doubling to 30 s,
jittered); meanwhile the assignment is not :attr:`~PartitionLeases.settled` (readiness says so and
:attr:`~PartitionLeases.failing` says why), every failure is logged and counted in
``larkbot_partition_takeover_failures_total{group}``, and the success after failures is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import nats
from nats.js.kv import KeyValue

from larkbot.canonical.errors import RetryableError

from .backoff import Backoff
from .metrics import PARTITION_TAKEOVER_FAILURES
from .periodic import every

__all__ = ["TAKEOVER_RETRY", "Hook", "PartitionLeases"]

log = logging.getLogger(__name__)

_TRANSIENT = (nats.errors.Error, TimeoutError)

Hook = Callable[[int], Awaitable[None]]

#: Failed take-overs of a partition: 0.5 s doubling to 30 s (``retry.background``'s default).
TAKEOVER_RETRY = Backoff(initial_s=0.5, max_s=30.0, factor=2.0, jitter=0.25)


@dataclass(frozen=True, slots=True)
class _Failing:
    """A partition whose take-over failed ``attempts`` times in a row, the last time with ``cause``."""

    attempts: int
    cause: str
    retry_at: float


class PartitionLeases:
    def __init__(
        self,
        kv: KeyValue,
        group: str,
        replica: str,
        partitions: int,
        *,
        on_acquire: Hook,
        on_release: Hook,
        heartbeat_s: float = 5.0,
        backoff: Backoff = TAKEOVER_RETRY,
        clock: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.kv = kv
        self.group = group
        self.replica = replica
        self.partitions = partitions
        self.on_acquire = on_acquire
        self.on_release = on_release
        self.heartbeat_s = heartbeat_s
        self.backoff = backoff
        self.clock = clock
        self.jitter = jitter
        #: partition → revision of the lease this replica holds
        self.owned: dict[int, int] = {}
        #: The partitions whose ``on_acquire`` returned and whose ``on_release`` has not been called.
        self._taken: set[int] = set()
        #: partition → the release of its lost lease, running on its own task
        self._releasing: dict[int, asyncio.Task[None]] = {}
        #: One lock per partition, held while one of its hooks runs.
        self._hooks: defaultdict[int, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._failing: dict[int, _Failing] = {}
        self._want: set[int] | None = None
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()
        #: Set while this replica has taken over exactly the partitions the last round wanted for it.
        self.settled = asyncio.Event()
        PARTITION_TAKEOVER_FAILURES.labels(group)

    @property
    def failing(self) -> dict[int, str]:
        """The desired partitions whose take-over failed and waits for its next attempt → the cause."""
        return {partition: failing.cause for partition, failing in sorted(self._failing.items())}

    def failing_detail(self) -> str:
        """The failing take-overs for a readiness detail (``""`` when none): ``take-over failing: 3
        (TimeoutError), 5 (OperationalError)``."""
        causes = ", ".join(f"{partition} ({cause})" for partition, cause in self.failing.items())
        return f"take-over failing: {causes}" if causes else ""

    def _lease_key(self, partition: int) -> str:
        return f"{self.group}.p{partition:03d}"

    def _member_key(self, replica: str) -> str:
        return f"{self.group}.members.{replica}"

    async def members(self) -> list[str]:
        """The group's live members: the member keys the bucket's stream holds (a key expires with the
        bucket's TTL when its replica stops renewing it), less those deleted by a clean leave.

        Read from the stream's per-subject state, not with ``kv.keys()``: nats-py lists keys through an
        ordered consumer that the server keeps for 5 minutes after each call, and a rebalance round every
        few seconds per replica piles up hundreds of them until the server refuses more (BadRequest on
        every lease operation). A stream info request creates nothing.
        """
        # nats-py's KeyValue keeps its stream and subject prefix in private fields (pinned nats-py 2.x).
        stream, prefix = self.kv._stream, self.kv._pre
        info = await self.kv._js.stream_info(stream, subjects_filter=f"{prefix}{self.group}.members.>")
        found = {self.replica}
        for subject in info.state.subjects or {}:
            key = subject[len(prefix) :]
            replica = key[len(f"{self.group}.members.") :]
            if replica == self.replica:
                continue
            try:
                await self.kv.get(key)
            except (nats.js.errors.KeyDeletedError, nats.js.errors.KeyNotFoundError):
                continue  # left cleanly (a delete marker), or expired since the listing
            found.add(replica)
        return sorted(found)

    def desired(self, members: list[str]) -> set[int]:
        index = members.index(self.replica)
        return {p for p in range(self.partitions) if p % len(members) == index}

    async def renew(self) -> None:
        """Heartbeat the membership and renew every held lease; stop at once a partition whose lease was lost.

        Runs on its own task, and never waits for a hook: a lost lease's release (which waits for the
        partition's in-flight work) runs on a task of its own.
        """
        await self.kv.put(self._member_key(self.replica), self.replica.encode())
        async with self._lock:
            for partition, revision in list(self.owned.items()):
                try:
                    self.owned[partition] = await self.kv.update(
                        self._lease_key(partition), self.replica.encode(), last=revision
                    )
                except nats.js.errors.KeyWrongLastSequenceError:
                    log.warning("lost the lease of partition %d", partition)
                    del self.owned[partition]
                    self.settled.clear()
                    self._releasing[partition] = asyncio.create_task(
                        self._release_lost(partition), name=f"{self.group}-release-p{partition:02d}"
                    )

    async def rebalance(self) -> None:
        """Release the partitions no longer ours (after their in-flight work), acquire the ones that are.

        A partition is not acquired this round while the release of its lost lease still runs, nor before
        the backoff of its failed take-over has passed.
        """
        want = self.desired(await self.members())
        self._want = want
        self._failing = {p: failing for p, failing in self._failing.items() if p in want}
        self._settle()
        for partition in sorted(set(self.owned) - want):
            await self._release(partition)
        for partition in sorted(want - set(self.owned)):
            failing = self._failing.get(partition)
            if partition in self._releasing or (failing is not None and self.clock() < failing.retry_at):
                continue
            await self._acquire(partition)
        self._settle()

    def _settle(self) -> None:
        if self._want is not None and set(self.owned) == self._want == self._taken:
            self.settled.set()
        else:
            self.settled.clear()

    async def tick(self) -> None:
        """One round of both duties (tests drive it by hand)."""
        await self.renew()
        await self.rebalance()

    async def _acquire(self, partition: int) -> None:
        async with self._hooks[partition]:
            async with self._lock:
                try:
                    revision = await self.kv.create(self._lease_key(partition), self.replica.encode())
                except nats.js.errors.KeyWrongLastSequenceError:
                    return  # still held by its previous owner; retried next round
                self.owned[partition] = revision
            try:
                await self.on_acquire(partition)
            except Exception as exc:
                await self._acquire_failed(partition, exc)
                return
            self._taken.add(partition)
        failed = self._failing.pop(partition, None)
        if failed is None:
            log.info("acquired partition %d", partition)
        else:
            log.info("acquired partition %d after %d failed take-overs", partition, failed.attempts)

    async def _acquire_failed(self, partition: int, exc: Exception) -> None:
        """Give the lease back (the hook left nothing behind): owning a partition nobody consumes would
        keep it from every replica, this one included. The next attempt comes after the backoff."""
        async with self._lock:
            revision = self.owned.pop(partition, None)
            if revision is not None:
                with contextlib.suppress(nats.js.errors.KeyWrongLastSequenceError, nats.errors.Error):
                    await self.kv.delete(self._lease_key(partition), last=revision)
        previous = self._failing.get(partition)
        attempts = 1 if previous is None else previous.attempts + 1
        delay = self.backoff.delay(attempts, self.jitter())
        cause = type(exc).__name__
        self._failing[partition] = _Failing(attempts, cause, self.clock() + delay)
        PARTITION_TAKEOVER_FAILURES.labels(self.group).inc()
        # The bus away is what retrying is for: one line. Anything else (the database, a defect) is worth
        # its traceback, once per cause: the partition is still tried again, since a replica that
        # stopped trying would leave its chats unserved until someone restarts it.
        transient = isinstance(exc, (*_TRANSIENT, RetryableError, OSError))
        traceback = not transient and (previous is None or previous.cause != cause)
        log.log(
            logging.WARNING if transient else logging.ERROR,
            "taking partition %d over failed (%s: %s); lease given back, attempt %d, next in %.1f s",
            partition,
            cause,
            exc,
            attempts,
            delay,
            exc_info=exc if traceback else None,
        )

    async def _release(self, partition: int) -> None:
        # The lease stays held (and renewed) while the hook finishes the partition's in-flight work;
        # only then is it removed, so the next owner never overlaps with us.
        async with self._hooks[partition]:
            await self._hand_back(partition)
            async with self._lock:
                revision = self.owned.pop(partition, None)
                if revision is None:
                    return  # lost meanwhile
                with contextlib.suppress(nats.js.errors.KeyWrongLastSequenceError, nats.errors.Error):
                    await self.kv.delete(self._lease_key(partition), last=revision)
        log.info("released partition %d", partition)

    async def _release_lost(self, partition: int) -> None:
        try:
            async with self._hooks[partition]:
                await self._hand_back(partition)
        except Exception:
            # Nothing to hand the failure to (renewal goes on): the partition counts as released, its
            # lease is gone already.
            log.exception("handing partition %d back after its lease was lost failed", partition)
            self._taken.discard(partition)
        finally:
            del self._releasing[partition]

    async def _hand_back(self, partition: int) -> None:
        """The release hook, once per take-over (a partition lost during its release is released once)."""
        if partition in self._taken:
            await self.on_release(partition)
            self._taken.discard(partition)

    async def _every(self, duty: Callable[[], Awaitable[None]], name: str) -> None:
        # A reconnect or a slow server: retried next round; leases outlive a few missed rounds.
        await every(self.heartbeat_s, duty, self._stop, name=f"partition {name}", tolerate=_TRANSIENT)

    async def run(self) -> None:
        renewer = asyncio.create_task(self._every(self.renew, "renewal"))
        try:
            await self.renew()
            await self._every(self.rebalance, "rebalance")
        finally:
            self._stop.set()
            await renewer
            await self.release_all()

    def stop(self) -> None:
        self._stop.set()

    async def release_all(self) -> None:
        """Hand every partition back at once (clean shutdown), so others need not wait for the TTL; the
        releases of lost leases still running are waited for too."""
        if self._releasing:
            await asyncio.wait(set(self._releasing.values()))
        for partition in list(self.owned):
            await self._release(partition)
        self.settled.clear()
        with contextlib.suppress(nats.errors.Error):
            await self.kv.delete(self._member_key(self.replica))
