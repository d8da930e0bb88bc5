"""Webhook mode: an HTTP endpoint for Feishu's event callbacks (verification in ``core.webhook``).

Answers 200 only after the events are persisted (like the long connection's ack); a rejected callback
gets 401 and one warning line naming the failed rule and the peer, never the payload or a secret; a
failure to persist gets 500 so that Feishu retries.
"""

from __future__ import annotations

import json
import logging
import time
from typing import assert_never

from aiohttp import web

from larkbot.canonical.errors import LarkbotError

from .. import metrics
from ..core.webhook import Accepted, Challenge, Rejected, verify
from .inbound import MAX_ENVELOPE_BYTES, Inbound

log = logging.getLogger(__name__)


class WebhookServer:
    def __init__(
        self,
        inbound: Inbound,
        *,
        host: str,
        port: int,
        path: str,
        encrypt_key: str | None,
        verification_token: str | None,
    ) -> None:
        self.inbound = inbound
        self.host = host
        self.port = port
        self.path = path
        self._encrypt_key = encrypt_key
        self._token = verification_token
        self._runner: web.AppRunner | None = None
        self.bound_port: int | None = None

    @property
    def running(self) -> bool:
        return self._runner is not None

    async def start(self) -> None:
        app = web.Application(client_max_size=MAX_ENVELOPE_BYTES)
        app.router.add_post(self.path, self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.bound_port = int(self._runner.addresses[0][1])
        metrics.CONNECTED.set(1)
        log.info("feishu webhook listening on %s:%d%s", self.host, self.bound_port, self.path)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        metrics.CONNECTED.set(0)

    async def _handle(self, request: web.Request) -> web.Response:
        received_at_ms = time.time_ns() // 1_000_000
        body = await request.read()
        verdict = verify(body, request.headers, encrypt_key=self._encrypt_key, verification_token=self._token)
        match verdict:
            case Rejected():
                metrics.WEBHOOK_REJECTED.labels(verdict.reason).inc()
                log.warning(
                    "rejected a Feishu webhook callback from %s: %s (%s)",
                    request.remote,
                    verdict.reason,
                    verdict.detail,
                )
                return web.json_response({"msg": verdict.reason}, status=401)
            case Challenge():
                return web.json_response({"challenge": verdict.challenge})
            case Accepted():
                payload = verdict.payload
            case _:
                assert_never(verdict)
        try:
            await self.inbound.handle(json.dumps(payload).encode(), received_at_ms)
        except LarkbotError as exc:
            log.warning("webhook event not persisted; Feishu will retry: %s", exc)
            return web.json_response({"msg": "retry"}, status=500)
        return web.json_response({"msg": "success"})
