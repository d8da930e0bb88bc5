"""Requests about a chat reach the replica that owns the chat's partition.

Every replica answers ``pipeline.snapshot`` / ``pipeline.history`` / ``pipeline.cursor`` in the queue group,
so callers keep one subject. A replica that does not serve the chat's partition forwards the request to the
owner — the holder of the partition's lease — on the owner's direct subject
``pipeline.replica.<replica>.<op>`` (plain subscription, no queue group) and relays its answer. During a
hand-over nobody serves the partition for a moment: the request fails with :class:`NotServedHere` (a
retryable error the caller sees as a ``PipelineError`` reply) instead of answering from a stale copy.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import nats
from pydantic import BaseModel

from larkbot.canonical.errors import RetryableError
from larkbot.canonical.names import Platform, partition_of, subject_token
from larkbot.runtime.bus import Bus

from .partitions import Ownership, lease_key

M = TypeVar("M", bound=BaseModel)

DIRECT_PREFIX = "pipeline.replica"


def direct_subject(replica: str, op: str) -> str:
    return f"{DIRECT_PREFIX}.{subject_token(replica)}.{op}"


class NotServedHere(RetryableError):
    """No replica serves the chat's partition right now (a hand-over is in progress)."""


class Router:
    def __init__(self, bus: Bus, ownership: Ownership, *, timeout_s: float = 10.0) -> None:
        self.bus = bus
        self.ownership = ownership
        self.timeout_s = timeout_s

    def check_local(self, platform: Platform, chat_id: str) -> None:
        partition = partition_of(platform.value, chat_id)
        if not self.ownership.serving(partition):
            raise NotServedHere(f"partition {partition} is not served by this replica")

    async def owner(self, partition: int) -> str | None:
        try:
            entry = await self.ownership.kv.get(lease_key(partition))
        except nats.js.errors.KeyNotFoundError:
            return None
        return entry.value.decode() if entry.value else None

    async def route(
        self,
        platform: Platform,
        chat_id: str,
        op: str,
        request: BaseModel,
        reply: type[M],
        local: Callable[[], Awaitable[M]],
    ) -> M:
        partition = partition_of(platform.value, chat_id)
        if self.ownership.serving(partition):
            return await local()
        owner = await self.owner(partition)
        if owner is None or owner == self.ownership.replica:
            raise NotServedHere(f"partition {partition} has no serving owner yet")
        return await self.bus.request(direct_subject(owner, op), request, reply, timeout_s=self.timeout_s)
