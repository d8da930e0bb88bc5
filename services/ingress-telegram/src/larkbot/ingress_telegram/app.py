"""Composition root of ingress-telegram: the platform adapter in both directions.

Serves ``actions.telegram`` (queue group). Without a ``telegram`` section in the configuration the service
runs idle: it reports ready, publishes nothing, and answers every action with a ``not_configured`` error.
"""

from __future__ import annotations

from larkbot.canonical.actions import ActionRequest, ActionResult
from larkbot.canonical.names import Platform, Service
from larkbot.runtime.config import LarkbotConfig
from larkbot.runtime.http import Check
from larkbot.runtime.ingress import actions_endpoint, failed
from larkbot.runtime.serve import Endpoint
from larkbot.runtime.service import ServiceContext, run

from . import metrics


class IngressTelegramService:
    def __init__(self, config: LarkbotConfig) -> None:
        self.config = config
        self.endpoint: Endpoint[ActionRequest] | None = None

    async def start(self, ctx: ServiceContext) -> None:
        self.endpoint = actions_endpoint(ctx.bus, Platform.TELEGRAM.value, self.act)
        await self.endpoint.start()
        ctx.add_check("telegram", self._platform_ready)

    async def act(self, action: ActionRequest) -> ActionResult:
        metrics.ACTIONS.labels(action.kind, "not_configured").inc()
        if self.config.telegram is None:
            return failed(
                action.idempotency_key, "not_configured", "no telegram section in the configuration"
            )
        return failed(
            action.idempotency_key, "not_configured", "the telegram connection is not available in this build"
        )

    async def _platform_ready(self) -> Check:
        if self.config.telegram is None:
            return Check(True, "not configured: idle")
        return Check(True, "configured; connection not available in this build")

    async def stop(self) -> None:
        if self.endpoint is not None:
            await self.endpoint.stop()


def main() -> int:
    return run(Service.INGRESS_TELEGRAM, IngressTelegramService)
