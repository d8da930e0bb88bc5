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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import nats
from nats.js.kv import KeyValue

from .periodic import every

__all__ = ["Hook", "PartitionLeases"]

log = logging.getLogger(__name__)

_TRANSIENT = (nats.errors.Error, TimeoutError)

Hook = Callable[[int], Awaitable[None]]


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
    ) -> None:
        self.kv = kv
        self.group = group
        self.replica = replica
        self.partitions = partitions
        self.on_acquire = on_acquire
        self.on_release = on_release
        self.heartbeat_s = heartbeat_s
        #: partition → revision of the lease this replica holds
        self.owned: dict[int, int] = {}
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()
        self.settled = asyncio.Event()

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

        Runs on its own task, so a release hook that waits for in-flight work never delays the renewal
        of the other leases (or of the one being released, which stays held until the hook returns).
        """
        await self.kv.put(self._member_key(self.replica), self.replica.encode())
        lost: list[int] = []
        async with self._lock:
            for partition, revision in list(self.owned.items()):
                try:
                    self.owned[partition] = await self.kv.update(
                        self._lease_key(partition), self.replica.encode(), last=revision
                    )
                except nats.js.errors.KeyWrongLastSequenceError:
                    log.warning("lost the lease of partition %d", partition)
                    del self.owned[partition]
                    lost.append(partition)
        for partition in lost:
            await self.on_release(partition)

    async def rebalance(self) -> None:
        """Release the partitions no longer ours (after their in-flight work), acquire the ones that are."""
        want = self.desired(await self.members())
        for partition in sorted(set(self.owned) - want):
            await self._release(partition)
        for partition in sorted(want - set(self.owned)):
            async with self._lock:
                try:
                    revision = await self.kv.create(self._lease_key(partition), self.replica.encode())
                except nats.js.errors.KeyWrongLastSequenceError:
                    continue  # still held by its previous owner; retried next round
                self.owned[partition] = revision
            await self.on_acquire(partition)
            log.info("acquired partition %d", partition)
        if set(self.owned) == want:
            self.settled.set()
        else:
            self.settled.clear()

    async def tick(self) -> None:
        """One round of both duties (tests drive it by hand)."""
        await self.renew()
        await self.rebalance()

    async def _release(self, partition: int) -> None:
        # The lease stays held (and renewed) while the hook finishes the partition's in-flight work;
        # only then is it removed, so the next owner never overlaps with us.
        await self.on_release(partition)
        async with self._lock:
            revision = self.owned.pop(partition, None)
            if revision is None:
                return  # lost meanwhile
            with contextlib.suppress(nats.js.errors.KeyWrongLastSequenceError, nats.errors.Error):
                await self.kv.delete(self._lease_key(partition), last=revision)
        log.info("released partition %d", partition)

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
        """Hand every partition back at once (clean shutdown), so others need not wait for the TTL."""
        for partition in list(self.owned):
            await self._release(partition)
        with contextlib.suppress(nats.errors.Error):
            await self.kv.delete(self._member_key(self.replica))
