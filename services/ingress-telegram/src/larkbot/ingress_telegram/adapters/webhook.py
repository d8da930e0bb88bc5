"""Webhook mode: Telegram POSTs each update; we answer 200 only once its events are stored.

The ``X-Telegram-Bot-Api-Secret-Token`` header must equal the configured secret (constant-time
comparison) or the request is refused with 403 and nothing is read. Deliveries are handled one at a
time, in arrival order, under a lock: Telegram keeps several connections open and would otherwise
interleave a message and its edit. A body that is not JSON is dead-lettered and acknowledged (Telegram
would resend it forever). While the bus is down the handler keeps retrying; Telegram times the request
out and redelivers, and the redelivery waits behind the first attempt.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from typing import Final

from aiohttp import web

from .. import metrics
from ..core import MalformedUpdate
from .inbound import Inbound

log = logging.getLogger(__name__)

SECRET_HEADER: Final = "X-Telegram-Bot-Api-Secret-Token"
DEFAULT_PATH: Final = "/telegram/webhook"


class WebhookReceiver:
    def __init__(self, inbound: Inbound, secret: str, host: str, port: int, path: str = DEFAULT_PATH) -> None:
        if not secret:
            raise ValueError("webhook mode needs a secret token")
        self.inbound = inbound
        self._secret = secret.encode()
        self.host = host
        self.port = port
        self.path = path
        self._lock = asyncio.Lock()
        self._runner: web.AppRunner | None = None
        self.bound_port: int | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post(self.path, self._receive)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        self.bound_port = sockets[0].getsockname()[1] if sockets else self.port
        log.info("webhook receiver on %s:%d%s", self.host, self.bound_port, self.path)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _receive(self, request: web.Request) -> web.Response:
        received_at_ms = time.time_ns() // 1_000_000
        given = request.headers.get(SECRET_HEADER, "").encode()
        if not hmac.compare_digest(given, self._secret):
            metrics.WEBHOOK_REQUESTS.labels("forbidden").inc()
            log.warning("webhook request refused: missing or wrong secret token")
            return web.Response(status=403)
        body = await request.read()
        async with self._lock:
            try:
                update = json.loads(body)
            except ValueError:
                await self.inbound.dead_letter(body, MalformedUpdate("body", "not JSON"))
            else:
                if isinstance(update, dict):
                    await self.inbound.handle(update, received_at_ms)
                else:
                    await self.inbound.dead_letter(body, MalformedUpdate("body", "not a JSON object"))
        metrics.WEBHOOK_REQUESTS.labels("ok").inc()
        return web.Response(status=200)
