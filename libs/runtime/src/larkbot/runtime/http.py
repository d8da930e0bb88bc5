"""The operations endpoint of every service: ``/healthz``, ``/readyz``, ``/metrics``.

``/healthz`` answers 200 while the process's loop runs. ``/readyz`` runs every registered readiness check
and answers 200 only when all pass, with a JSON body naming each check and its detail (a blocked chat, a
lost platform connection, consumer lag) so an operator sees *why* without reading logs.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

__all__ = ["Check", "OpsServer", "ReadinessCheck"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Check:
    ok: bool
    detail: str = ""


ReadinessCheck = Callable[[], Awaitable[Check]]


class OpsServer:
    def __init__(self, service: str, host: str, port: int) -> None:
        self.service = service
        self.host = host
        self.port = port
        self.checks: dict[str, ReadinessCheck] = {}
        self.extra_routes: list[web.RouteDef] = []
        self._runner: web.AppRunner | None = None
        self.bound_port: int | None = None

    def add_check(self, name: str, check: ReadinessCheck) -> None:
        self.checks[name] = check

    def add_route(self, route: web.RouteDef) -> None:
        """Extra routes (e.g. a webhook receiver) served on the same port; add before ``start``."""
        self.extra_routes.append(route)

    async def readiness(self) -> tuple[bool, dict[str, dict[str, object]]]:
        results: dict[str, dict[str, object]] = {}
        ready = True
        for name, check in self.checks.items():
            try:
                result = await check()
            except Exception as exc:
                result = Check(False, f"check failed: {type(exc).__name__}")
            results[name] = {"ok": result.ok, "detail": result.detail}
            ready = ready and result.ok
        return ready, results

    async def _healthz(self, _request: web.Request) -> web.Response:
        return web.json_response({"service": self.service, "status": "alive"})

    async def _readyz(self, _request: web.Request) -> web.Response:
        ready, results = await self.readiness()
        body = {"service": self.service, "ready": ready, "checks": results}
        return web.Response(
            status=200 if ready else 503,
            text=json.dumps(body, sort_keys=True),
            content_type="application/json",
        )

    async def _metrics(self, _request: web.Request) -> web.Response:
        resp = web.Response(body=generate_latest(REGISTRY))
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp

    async def start(self) -> None:
        app = web.Application()
        app.add_routes(
            [
                web.get("/healthz", self._healthz),
                web.get("/readyz", self._readyz),
                web.get("/metrics", self._metrics),
                *self.extra_routes,
            ]
        )
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.bound_port = sockets[0].getsockname()[1] if sockets else self.port
        log.info("operations endpoint on http://%s:%d", self.host, self.bound_port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
