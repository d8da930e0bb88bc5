"""Requests about a chat reach the replica that owns the chat's partition.

Every replica answers ``pipeline.snapshot`` / ``pipeline.history`` / ``pipeline.cursor`` in the queue group,
so callers keep one subject. A replica that does not serve the chat's partition forwards the request to the
owner — the holder of the partition's lease — on the owner's direct subject
``pipeline.replica.<replica>.<op>`` (plain subscription, no queue group) and relays its answer, or its
error reply as it came. During a hand-over nobody serves the partition for a moment: the request fails with
:class:`NotServedHere` (``ServiceError`` code ``not_served``) instead of answering from a stale copy.

A killed replica keeps its leases until they expire (the bucket's TTL): for that long its direct subject
has no responders. When the owner does not answer (no responders, or no reply in time), the partition is
marked silent at the lease's revision, the cause is logged once per replica, and every request for that
partition fails at once with :class:`OwnerUnavailable` (code ``owner_unavailable``) without addressing the
silent replica again — until the lease changes: renewed (the replica lives: forward to it again) or
expired and taken by another replica (forward there, or serve here). Only the ownership decides where a
chat is served: nothing answers from a copy that is not the owner's.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Literal, NamedTuple, TypeVar

import nats
from pydantic import BaseModel

from larkbot.canonical.names import Platform, partition_of, subject_token
from larkbot.runtime.bus import Bus, NoResponders, RequestTimedOut, ServiceRefused, ServiceUnavailable

from .. import metrics
from ..errors import NotServedHere, OwnerUnavailable
from .partitions import Ownership, lease_key

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

DIRECT_PREFIX = "pipeline.replica"

#: The requests that are answered by the owner of the chat's partition.
Op = Literal["snapshot", "history", "cursor"]


def direct_subject(replica: str, op: Op) -> str:
    return f"{DIRECT_PREFIX}.{subject_token(replica)}.{op}"


class Lease(NamedTuple):
    owner: str
    revision: int


class Router:
    def __init__(self, bus: Bus, ownership: Ownership, *, timeout_s: float = 10.0) -> None:
        self.bus = bus
        self.ownership = ownership
        self.timeout_s = timeout_s
        #: partition → the lease whose holder did not answer (cleared when the lease changes).
        self._silent: dict[int, Lease] = {}

    def check_local(self, platform: Platform, chat_id: str) -> None:
        partition = partition_of(platform.value, chat_id)
        if not self.ownership.serving(partition):
            raise NotServedHere(f"partition {partition} is not served by this replica")

    async def lease(self, partition: int) -> Lease | None:
        try:
            entry = await self.ownership.kv.get(lease_key(partition))
        except nats.js.errors.KeyNotFoundError:
            return None
        return Lease(entry.value.decode(), entry.revision) if entry.value and entry.revision else None

    async def route(
        self,
        platform: Platform,
        chat_id: str,
        op: Op,
        request: BaseModel,
        reply: type[M],
        local: Callable[[], Awaitable[M]],
    ) -> M:
        partition = partition_of(platform.value, chat_id)
        if self.ownership.serving(partition):
            self._forget_if_changed(partition, None)
            return await local()
        lease = await self.lease(partition)
        self._forget_if_changed(partition, lease)
        if lease is None or lease.owner == self.ownership.replica:
            raise NotServedHere(f"partition {partition} has no serving owner yet")
        subject = direct_subject(lease.owner, op)
        if self._silent.get(partition) == lease:
            metrics.FORWARDED.labels(op, "owner_silent").inc()
            raise OwnerUnavailable(self._unavailable(partition, lease))
        try:
            answer = await self.bus.request(subject, request, reply, timeout_s=self.timeout_s)
        except (NoResponders, RequestTimedOut) as exc:
            outcome = "no_responders" if isinstance(exc, NoResponders) else "timeout"
            metrics.FORWARDED.labels(op, outcome).inc()
            self._mark_silent(partition, lease, exc)
            raise OwnerUnavailable(self._unavailable(partition, lease)) from None
        except (ServiceUnavailable, ServiceRefused):
            metrics.FORWARDED.labels(op, "error").inc()
            raise
        metrics.FORWARDED.labels(op, "ok").inc()
        return answer

    def _unavailable(self, partition: int, lease: Lease) -> str:
        return (
            f"partition {partition} is held by pipeline replica {lease.owner}, which does not answer; "
            "its partitions move when its lease expires"
        )

    def _mark_silent(self, partition: int, lease: Lease, cause: Exception) -> None:
        first = all(silent.owner != lease.owner for silent in self._silent.values())
        self._silent[partition] = lease
        if first:
            log.warning(
                "pipeline replica %s does not answer (%s): requests for its partitions are refused "
                "until its leases are renewed or expire and another replica takes them",
                lease.owner,
                cause,
            )

    def _forget_if_changed(self, partition: int, lease: Lease | None) -> None:
        silent = self._silent.get(partition)
        if silent is None or silent == lease:
            return
        del self._silent[partition]
        if all(other.owner != silent.owner for other in self._silent.values()):
            log.info(
                "pipeline replica %s: its leases were renewed or passed on; requests are forwarded again",
                silent.owner,
            )
