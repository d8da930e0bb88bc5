"""Single-owner lease in the ``leases`` KV bucket (TTL 15 s, CAS on the revision).

One replica owns the pipeline at a time: it creates the key (only possible when absent or expired) and
renews it every ``renew_s`` with a compare-and-set on the revision it holds. A failed renewal means someone
else owns it now (our entry expired, e.g. after a long pause): :class:`LeaseLost` ends the service, which
exits non-zero and comes back as a standby. Standbys poll for the key to become free.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket

import nats
from nats.js.kv import KeyValue

from larkbot.canonical.errors import LarkbotError
from larkbot.canonical.names import KV_LEASES

from .. import metrics

log = logging.getLogger(__name__)


class LeaseLost(LarkbotError):
    """Another replica owns the lease now; this one must stop consuming."""


def replica_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Lease:
    def __init__(
        self, kv: KeyValue, key: str, holder: str, *, renew_s: float = 5.0, poll_s: float = 2.0
    ) -> None:
        self.kv = kv
        self.key = key
        self.holder = holder
        self.renew_s = renew_s
        self.poll_s = poll_s
        self.revision: int | None = None

    @classmethod
    async def open(cls, js: nats.js.JetStreamContext, key: str, holder: str | None = None) -> Lease:
        return cls(await js.key_value(KV_LEASES), key, holder or replica_id())

    @property
    def held(self) -> bool:
        return self.revision is not None

    async def acquire(self, stopping: asyncio.Event) -> bool:
        """Wait until this replica owns the lease (``False`` if asked to stop first)."""
        while not stopping.is_set():
            try:
                self.revision = await self.kv.create(self.key, self.holder.encode())
            except nats.js.errors.KeyWrongLastSequenceError:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), timeout=self.poll_s)
                continue
            metrics.LEASE_HELD.set(1)
            log.info("pipeline lease %s acquired", self.key)
            return True
        return False

    async def keep(self, stopping: asyncio.Event) -> None:
        """Renew until ``stopping``; raises :class:`LeaseLost` when the CAS fails."""
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), timeout=self.renew_s)
            if stopping.is_set() or self.revision is None:
                return
            try:
                self.revision = await self.kv.update(self.key, self.holder.encode(), last=self.revision)
            except nats.js.errors.KeyWrongLastSequenceError:
                self.revision = None
                metrics.LEASE_HELD.set(0)
                raise LeaseLost(f"lease {self.key} is owned by another replica") from None

    async def release(self) -> None:
        if self.revision is None:
            return
        with contextlib.suppress(nats.errors.Error, nats.js.errors.Error):
            await self.kv.delete(self.key, last=self.revision)
        self.revision = None
        metrics.LEASE_HELD.set(0)
