"""A service run in-process: operations endpoint, readiness, metrics, clean stop."""

from __future__ import annotations

import aiohttp

from larkbot.canonical.names import Service
from larkbot.runtime.config import LarkbotConfig
from larkbot.runtime.http import Check
from larkbot.runtime.service import ServiceContext, running


class _App:
    def __init__(self) -> None:
        self.ready = False
        self.stopped = False

    async def start(self, ctx: ServiceContext) -> None:
        async def check() -> Check:
            return Check(self.ready, "warming up" if not self.ready else "ok")

        ctx.add_check("warm", check)

    async def stop(self) -> None:
        self.stopped = True


async def test_ops_endpoint_reports_health_readiness_and_metrics(nats_url: str) -> None:
    app = _App()
    async with running(Service.MEDIA, app, LarkbotConfig(), nats_url=nats_url) as ctx:
        base = f"http://127.0.0.1:{ctx.ops.bound_port}"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/healthz") as resp:
                assert resp.status == 200
            async with http.get(f"{base}/readyz") as resp:
                body = await resp.json()
                assert resp.status == 503
                assert body["checks"]["warm"] == {"ok": False, "detail": "warming up"}
                assert body["checks"]["nats"]["ok"] is True
            app.ready = True
            async with http.get(f"{base}/readyz") as resp:
                assert resp.status == 200
            async with http.get(f"{base}/metrics") as resp:
                text = await resp.text()
                assert 'larkbot_service_info{service="media",version=' in text
                assert "larkbot_bus_connected" in text
    assert app.stopped
