"""Composition root of ingress-telegram: the Telegram platform adapter in both directions.

Start-up: serve ``actions.telegram`` at once (answering ``not_ready`` until the platform is up), then in
the background: ``getMe`` (retried while Telegram is unreachable; a refused token stops the service),
publish the bot identity, warn when privacy mode hides group messages, and start receiving — long polling
(default) or the webhook receiver. Without a ``telegram`` section the service idles and answers
``not_configured``.

The webhook receiver listens on ``telegram.webhook_host``:``telegram.webhook_port`` (apart from the
operations port); with ``telegram.webhook_url`` set, ``setWebhook`` registers it with the secret.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from larkbot.canonical.actions import ActionRequest, ActionResult
from larkbot.canonical.events import BotIdentity
from larkbot.canonical.names import Platform, Service
from larkbot.runtime.config import LarkbotConfig, TelegramSettings
from larkbot.runtime.http import Check
from larkbot.runtime.ingress import actions_endpoint, failed, publish_identity
from larkbot.runtime.process import deployment_offset_min
from larkbot.runtime.retry import RetryPolicy
from larkbot.runtime.serve import Endpoint
from larkbot.runtime.service import ServiceContext, run

from . import metrics
from .adapters.actions import ActionExecutor
from .adapters.botapi import BotApi, BotApiError, NotSent, OutcomeUnknown
from .adapters.inbound import Inbound
from .adapters.ledger import SentLedger
from .adapters.migrations import ChatMigrations
from .adapters.polling import Poller
from .adapters.webhook import WebhookReceiver
from .core import ALLOWED_UPDATES, TelegramAdapter, send_failure

log = logging.getLogger(__name__)

PRIVACY_WARNING = (
    "privacy mode is on: in groups this bot only receives commands, replies to it and mentions. "
    "Turn it off with @BotFather (/setprivacy → Disable, then re-add the bot) or make the bot an admin."
)


class IngressTelegramService:
    def __init__(
        self,
        config: LarkbotConfig,
        *,
        webhook_port: int | None = None,
        webhook_url: str | None = None,
        polling_timeout_s: int | None = None,
    ) -> None:
        self.config = config
        telegram = config.telegram
        self.webhook_host = telegram.webhook_host if telegram is not None else "0.0.0.0"
        self.webhook_port = (
            webhook_port if webhook_port is not None else (telegram.webhook_port if telegram else 8443)
        )
        self.webhook_url = webhook_url or (telegram.webhook_url if telegram else None)
        self.polling_timeout_s = (
            polling_timeout_s
            if polling_timeout_s is not None
            else (telegram.polling_timeout_s if telegram else 25)
        )
        self.endpoint: Endpoint[ActionRequest] | None = None
        self.api: BotApi | None = None
        self.executor: ActionExecutor | None = None
        self.poller: Poller | None = None
        self.webhook: WebhookReceiver | None = None
        self.migrations: ChatMigrations | None = None
        self.identity: BotIdentity | None = None
        self.privacy_mode = False
        self.ready = asyncio.Event()

    async def start(self, ctx: ServiceContext) -> None:
        self.endpoint = actions_endpoint(ctx.bus, Platform.TELEGRAM.value, self.act)
        await self.endpoint.start()
        ctx.add_check("telegram", self._platform_ready)
        if self.config.telegram is not None:
            ctx.spawn(self._connect(ctx, self.config.telegram), "telegram-connect")

    async def _connect(self, ctx: ServiceContext, settings: TelegramSettings) -> None:
        token = settings.bot_token.get_secret_value()
        self.api = BotApi(settings.api_base, token)
        me = await self._get_me(self.api)
        self.identity = BotIdentity(
            platform=Platform.TELEGRAM,
            bot_id=str(me["id"]),
            name=str(me.get("first_name") or ""),
            username=me.get("username"),
            updated_at_ms=time.time_ns() // 1_000_000,
        )
        await publish_identity(ctx.bus, self.identity)
        self.privacy_mode = not me.get("can_read_all_group_messages", False)
        if self.privacy_mode:
            log.warning(PRIVACY_WARNING)
        adapter = TelegramAdapter(
            self.identity.bot_id,
            self.config.chat_ids(Platform.TELEGRAM.value),
            deployment_offset_min(self.config.utc_offset_min),
        )
        ledger = await SentLedger.open(ctx.bus.js)
        # Upgrades known before any update is taken: a supergroup's first update must already map.
        self.migrations = await ChatMigrations.open(ctx.bus.js, adapter)
        ctx.spawn(self.migrations.watch(), "telegram-chat-migrations")
        self.executor = ActionExecutor(
            self.api,
            ctx.bus,
            ledger,
            adapter,
            migrations=self.migrations,
            retry=RetryPolicy.of(self.config.retry.platform_send),
        )
        inbound = Inbound(ctx.bus, adapter, migrations=self.migrations)
        if settings.mode == "webhook":
            secret = settings.webhook_secret.get_secret_value() if settings.webhook_secret else ""
            self.webhook = WebhookReceiver(inbound, secret, self.webhook_host, self.webhook_port)
            await self.webhook.start()
            if self.webhook_url:
                await self.api.call(
                    "setWebhook",
                    {
                        "url": self.webhook_url,
                        "secret_token": secret,
                        "allowed_updates": list(ALLOWED_UPDATES),
                    },
                )
        else:
            await self.api.call("deleteWebhook", {"drop_pending_updates": False})
            self.poller = Poller(settings.api_base, token, inbound, polling_timeout_s=self.polling_timeout_s)
            self.poller.start()
        self.ready.set()
        log.info("telegram ready as @%s (%s)", self.identity.username, settings.mode)

    async def _get_me(self, api: BotApi) -> dict[str, Any]:
        delay = 0.5
        while True:
            try:
                me = await api.call("getMe")
            except (BotApiError, NotSent, OutcomeUnknown) as exc:
                # Telegram's own faults (429, 5xx) pass; a refusal of the token (401, 404) stops here.
                if isinstance(exc, BotApiError) and send_failure(exc.code) is None:
                    raise
                log.warning("getMe failed (%s); retrying in %.1f s", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
                continue
            if not isinstance(me, dict) or not isinstance(me.get("id"), int):
                raise RuntimeError("getMe returned no bot id")
            return me

    async def act(self, action: ActionRequest) -> ActionResult:
        if self.config.telegram is None:
            metrics.ACTIONS.labels(action.kind, "failed").inc()
            return failed(
                action.idempotency_key, "not_configured", "no telegram section in the configuration"
            )
        if self.executor is None:
            metrics.ACTIONS.labels(action.kind, "failed").inc()
            return failed(
                action.idempotency_key, "not_ready", "telegram is not connected yet", retryable=True
            )
        return await self.executor.act(action)

    async def _platform_ready(self) -> Check:
        if self.config.telegram is None:
            return Check(True, "not configured: idle")
        if not self.ready.is_set():
            return Check(False, "connecting to the Bot API")
        detail = f"{self.config.telegram.mode} as @{self.identity.username if self.identity else '?'}"
        if self.poller is not None and self.poller.failed:
            return Check(False, f"{detail}; getUpdates failing")
        return Check(True, detail + ("; privacy mode on" if self.privacy_mode else ""))

    async def stop(self) -> None:
        if self.poller is not None:
            await self.poller.stop()
        if self.webhook is not None:
            await self.webhook.stop()
        if self.endpoint is not None:
            await self.endpoint.stop()
        if self.migrations is not None:
            await self.migrations.close()
        if self.api is not None:
            await self.api.close()


def main() -> int:
    return run(Service.INGRESS_TELEGRAM, IngressTelegramService)
