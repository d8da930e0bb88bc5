"""One owner per partition (and per singleton lease) at every moment, as the lease bucket shows it.

Every write to the ``leases`` bucket reaches a watcher of its own connection (``$KV.leases.>``): a
renewal, a create by a new holder, a delete on a clean hand-over. A partition changes hands either after
its holder deleted its lease or after the lease expired (the bucket's TTL since the holder's last write);
a new holder writing sooner means two replicas held the partition at once — what a lease bucket that
lost its newest writes in an election would cause.

Writes made while the watcher was disconnected are not seen, so a hand-over with a disconnection between
the old holder's last seen write and the new holder's create is counted as unobserved, not judged.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg

from larkbot.canonical.names import KV_LEASES

#: Receipt times of two writes on one connection differ from their store times by far less than this.
SLACK_S = 1.5


@dataclass(slots=True)
class Holding:
    holder: str
    last_write: float
    released: bool = False


@dataclass(slots=True)
class LeaseWatch:
    ttl_s: float
    writes: int = 0
    handovers: int = 0
    unobserved: int = 0
    overlaps: list[str] = field(default_factory=list)
    _held: dict[str, Holding] = field(default_factory=dict)
    _outages: list[tuple[float, float]] = field(default_factory=list)
    _down_since: float | None = None
    _nc: Client | None = None

    async def start(self, servers: str) -> None:
        async def disconnected() -> None:
            self._down_since = time.monotonic()

        async def reconnected() -> None:
            if self._down_since is not None:
                self._outages.append((self._down_since, time.monotonic()))
                self._down_since = None

        self._nc = await nats.connect(
            servers.split(","),
            name="chaos-lease-watch",
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.2,
            disconnected_cb=disconnected,
            reconnected_cb=reconnected,
        )
        await self._nc.subscribe(f"$KV.{KV_LEASES}.>", cb=self._on_write)

    async def stop(self) -> None:
        if self._nc is not None:
            await self._nc.close()

    def _unseen_between(self, a: float, b: float) -> bool:
        if self._down_since is not None and self._down_since <= b:
            return True
        return any(start <= b and end >= a for start, end in self._outages)

    async def _on_write(self, msg: Msg) -> None:
        now = time.monotonic()
        key = msg.subject.removeprefix(f"$KV.{KV_LEASES}.")
        if ".members." in key:
            return  # heartbeats of members, not leases: partition and singleton leases are judged
        self.writes += 1
        op = (msg.headers or {}).get("KV-Operation")
        held = self._held.get(key)
        if op in ("DEL", "PURGE"):
            if held is not None:
                held.released = True
                held.last_write = now
            return
        holder = msg.data.decode()
        if held is not None and held.holder != holder:
            self.handovers += 1
            if held.released:
                pass
            elif self._unseen_between(held.last_write, now):
                self.unobserved += 1
            elif now - held.last_write < self.ttl_s - SLACK_S:
                self.overlaps.append(
                    f"{key}: {holder} took it {now - held.last_write:.1f} s after {held.holder}'s last "
                    f"write, without a release (lease TTL {self.ttl_s:.0f} s)"
                )
        if held is None or held.holder != holder or held.released:
            self._held[key] = Holding(holder, now)
        else:
            held.last_write = now
