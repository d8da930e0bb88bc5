"""How events reach the service from Feishu: the long connection (kept up by a watchdog) or the webhook.

Both are a :class:`Link`: a readiness check and a ``stop``. The long connection can die silently (the
SDK's receive task ends while its ``start()`` keeps blocking, ``adapters.longconn``), so
:class:`SupervisedConnection` looks at it every ``interval_s`` (``ServiceContext.every``) and starts a new
one once it has been down ``restart_after_s``. It holds the current connection; nothing else does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from larkbot.runtime.http import Check

from .. import metrics
from .webhook import WebhookServer

if TYPE_CHECKING:
    from .longconn import LongConnection

log = logging.getLogger(__name__)


class Link(Protocol):
    async def ready(self) -> Check: ...

    async def stop(self) -> None: ...


class WebhookLink:
    """The webhook server as the service's link."""

    def __init__(self, server: WebhookServer) -> None:
        self.server = server

    async def ready(self) -> Check:
        return Check(self.server.running, f"webhook on port {self.server.bound_port}")

    async def stop(self) -> None:
        await self.server.stop()


class SupervisedConnection:
    """The long connection, replaced by a new one when it stays down (see the module docstring)."""

    def __init__(
        self,
        connect: Callable[[], LongConnection],
        *,
        restart_after_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._connect = connect
        self._restart_after_s = restart_after_s
        self._clock = clock
        self._stopped = False
        self._down_since: float | None = None
        #: The connection events arrive on now.
        self.connection = connect()

    @property
    def connected(self) -> bool:
        return self.connection.connected

    async def check(self) -> None:
        """One look of the watchdog: note the connection up, or restart it after ``restart_after_s``."""
        if self._stopped:
            return
        if self.connection.connected:
            self._down_since = None
            metrics.CONNECTED.set(1)
            return
        now = self._clock()
        self._down_since = self._down_since or now
        if now - self._down_since < self._restart_after_s:
            return
        log.error("feishu long connection down for %.0f s; starting a new one", now - self._down_since)
        await asyncio.to_thread(self.connection.stop)
        if not self._stopped:
            self.connection = self._connect()
        self._down_since = None

    async def ready(self) -> Check:
        if self.connection.connected:
            return Check(True, "long connection up")
        return Check(False, "long connection down")

    async def stop(self) -> None:
        self._stopped = True
        await asyncio.to_thread(self.connection.stop)
