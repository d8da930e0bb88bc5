"""Composition root of ingress-telegram: the Telegram platform adapter in both directions.

:class:`IngressTelegramService` is the recipe. Its ``build`` serves ``actions.telegram`` and
``fetch.telegram`` (the read-only actions only: the media workers' downloads and custom emoji, through
the same executor) at once and starts the link in the background (``adapters.link``: ``getMe``, the bot
identity, privacy mode, then long polling — the default — or the webhook receiver); actions are answered
``not_ready`` until the link is up. It returns :class:`TelegramIngress`, frozen; without a ``telegram``
section :class:`IdleTelegram`, which answers ``not_configured``.

The webhook receiver listens on ``telegram.webhook_host``:``telegram.webhook_port`` (apart from the
operations port); with ``telegram.webhook_url`` set, ``setWebhook`` registers it with the secret.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from larkbot.canonical.actions import ActionRequest, ActionResult
from larkbot.canonical.names import Platform, Service
from larkbot.runtime.budgets.store import BudgetPlan
from larkbot.runtime.config import LarkbotConfig, TelegramSettings
from larkbot.runtime.http import Check
from larkbot.runtime.ingress import IngressEndpoints, failed
from larkbot.runtime.process import deployment_offset_min
from larkbot.runtime.retry import RetryPolicy
from larkbot.runtime.service import ServiceContext, run

from . import metrics
from .adapters.botapi import BotApi
from .adapters.link import TelegramLink, Wiring

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TelegramOptions:
    """Process settings, from the ``telegram`` section of ``config.yaml`` (tests change a few)."""

    webhook_host: str = "0.0.0.0"
    webhook_port: int = 8443
    #: The public URL registered with ``setWebhook``; empty: the operator registers it.
    webhook_url: str = ""
    polling_timeout_s: int = 25

    @classmethod
    def from_settings(cls, telegram: TelegramSettings | None) -> TelegramOptions:
        if telegram is None:
            return cls()
        return cls(
            webhook_host=telegram.webhook_host,
            webhook_port=telegram.webhook_port,
            webhook_url=telegram.webhook_url or "",
            polling_timeout_s=telegram.polling_timeout_s,
        )


@dataclass(frozen=True, slots=True)
class TelegramIngress:
    """The wired service when a ``telegram`` section is configured."""

    endpoints: IngressEndpoints
    link: TelegramLink

    async def stop(self) -> None:
        await self.link.stop_receiving()
        await self.endpoints.stop()
        await self.link.close()


@dataclass(frozen=True, slots=True)
class IdleTelegram:
    """The service without a ``telegram`` section: ready, every action ``not_configured``."""

    endpoints: IngressEndpoints

    async def stop(self) -> None:
        await self.endpoints.stop()


async def not_configured(action: ActionRequest) -> ActionResult:
    metrics.ACTIONS.labels(action.kind, "failed").inc()
    return failed(action.idempotency_key, "not_configured", "no telegram section in the configuration")


async def idle_ready() -> Check:
    return Check(True, "not configured: idle")


@dataclass(frozen=True, slots=True)
class IngressTelegramService:
    """The recipe: the configuration and the process options."""

    config: LarkbotConfig
    options: TelegramOptions

    @classmethod
    def of(cls, config: LarkbotConfig) -> IngressTelegramService:
        """The service as ``config.yaml`` describes it."""
        return cls(config, TelegramOptions.from_settings(config.telegram))

    async def build(self, ctx: ServiceContext) -> TelegramIngress | IdleTelegram:
        settings = self.config.telegram
        if settings is None:
            idle = await IngressEndpoints.serve(ctx.bus, Platform.TELEGRAM.value, not_configured)
            ctx.add_check("telegram", idle_ready)
            return IdleTelegram(idle)
        opts = self.options
        token = settings.bot_token.get_secret_value()
        link = TelegramLink(
            Wiring(
                bus=ctx.bus,
                api=BotApi(settings.api_base, token),
                mode=settings.mode,
                api_base=settings.api_base,
                token=token,
                chat_ids=self.config.chat_ids(Platform.TELEGRAM.value),
                offset_min=deployment_offset_min(self.config.utc_offset_min),
                send_retry=RetryPolicy.of(self.config.retry.platform_send),
                background_retry=RetryPolicy.of(self.config.retry.background),
                store_retry=RetryPolicy.of(self.config.retry.inbound_store),
                webhook_secret=settings.webhook_secret.get_secret_value() if settings.webhook_secret else "",
                webhook_host=opts.webhook_host,
                webhook_port=opts.webhook_port,
                webhook_url=opts.webhook_url,
                polling_timeout_s=opts.polling_timeout_s,
                budgets=BudgetPlan.of(self.config, Platform.TELEGRAM.value),
            )
        )
        endpoints = await IngressEndpoints.serve(ctx.bus, Platform.TELEGRAM.value, link.act)
        ctx.add_check("telegram", link.ready_check)
        ctx.spawn(link.connect(ctx.spawn), "telegram-connect")
        return TelegramIngress(endpoints, link)


def main() -> int:
    return run(Service.INGRESS_TELEGRAM, IngressTelegramService.of)
