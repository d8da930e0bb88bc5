"""Composition root of ingress-feishu: the Feishu adapter in both directions.

Inbound (long connection by default, webhook optional) → :class:`Inbound` → ``events.feishu.<chat>``;
``actions.feishu`` (queue group) → :class:`Actions` → Feishu OpenAPI. Without a ``feishu`` section the
service runs idle: ready, publishing nothing, answering every action ``not_configured``.

Start-up order: bot info (who "myself" is) → identity published → adapter, names, inbound → the platform
connection → the actions endpoint. Shutdown reverses it; the long connection's thread is stopped
deliberately (the SDK has no ``stop()``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from larkbot.canonical.actions import ActionRequest, ActionResult
from larkbot.canonical.events import BotIdentity
from larkbot.canonical.names import Platform, Service
from larkbot.runtime.config import FeishuSettings, LarkbotConfig
from larkbot.runtime.http import Check
from larkbot.runtime.ingress import actions_endpoint, failed, publish_identity
from larkbot.runtime.process import deployment_offset_min
from larkbot.runtime.retry import Backoff
from larkbot.runtime.serve import Endpoint
from larkbot.runtime.service import ServiceContext, run

from . import metrics
from .adapters.actions import Actions, BotSelf
from .adapters.api import FeishuApi
from .adapters.contacts import UNOBSERVED, Contacts, ContactsObserver
from .adapters.inbound import Inbound
from .adapters.rest import FeishuRest
from .adapters.webhook import WebhookServer
from .core.adapter import FeishuAdapter
from .core.pacing import SendPacer

if TYPE_CHECKING:
    from .adapters.longconn import LongConnection

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FeishuOptions:
    """Process settings, from the ``feishu`` section of ``config.yaml`` (tests build them directly)."""

    webhook_host: str = "0.0.0.0"
    webhook_port: int = 9111
    webhook_path: str = "/feishu/events"
    name_ttl_s: float = 6 * 3600.0
    #: How long the first event of a person nobody has named waits for the contact API (0: never).
    name_wait_s: float = 0.5
    ack_timeout_s: float = 2.5
    api_timeout_s: float = 10.0
    #: At most this many attempts of one send; its deadline (the turn's) normally ends it first.
    send_attempts: int = 8
    #: Restart the long connection after it has been down this long (the SDK can die silently).
    reconnect_watchdog_s: float = 60.0
    watchdog_interval_s: float = 5.0

    @classmethod
    def from_settings(cls, feishu: FeishuSettings | None) -> FeishuOptions:
        if feishu is None:
            return cls()
        return cls(
            webhook_host=feishu.webhook_host,
            webhook_port=feishu.webhook_port,
            webhook_path=feishu.webhook_path,
            name_ttl_s=feishu.name_ttl_s,
            ack_timeout_s=feishu.ack_timeout_s,
            api_timeout_s=feishu.api_timeout_s,
            send_attempts=feishu.send_attempts,
            reconnect_watchdog_s=feishu.reconnect_watchdog_s,
        )


def direct_chats(config: LarkbotConfig) -> dict[str, str]:
    """Configured Feishu chats that are direct chats: chat id → the person (``direct_with``)."""
    found: dict[str, str] = {}
    for chat_id in config.chat_ids(Platform.FEISHU.value):
        settings = config.chat(Platform.FEISHU.value, chat_id)
        if settings is not None and settings.direct_with is not None:
            found[chat_id] = settings.direct_with
    return found


class IngressFeishuService:
    def __init__(
        self,
        config: LarkbotConfig,
        options: FeishuOptions | None = None,
        *,
        contacts_observer: ContactsObserver = UNOBSERVED,
    ) -> None:
        self.config = config
        self.options = options or FeishuOptions.from_settings(config.feishu)
        #: Told of the contact-name table's mirror and lookups (``adapters.contacts.ContactsObserver``).
        self.contacts_observer = contacts_observer
        self.endpoint: Endpoint[ActionRequest] | None = None
        self.rest: FeishuRest | None = None
        self.adapter: FeishuAdapter | None = None
        self.contacts: Contacts | None = None
        self.inbound: Inbound | None = None
        self.actions: Actions | None = None
        self.connection: LongConnection | None = None
        self.webhook: WebhookServer | None = None
        self._stopping = asyncio.Event()
        self._down_since: float | None = None

    async def start(self, ctx: ServiceContext) -> None:
        feishu = self.config.feishu
        if feishu is not None:
            opts = self.options
            pacer = SendPacer()
            self.rest = FeishuRest(
                feishu.domain,
                feishu.app_id,
                feishu.app_secret,
                timeout_s=opts.api_timeout_s,
                on_rate_limit=lambda reset: pacer.back_off(time.monotonic() + reset),
            )
            api = FeishuApi(self.rest)
            info = await api.bot_info()
            await publish_identity(
                ctx.bus,
                BotIdentity(
                    platform=Platform.FEISHU,
                    bot_id=info.open_id,
                    name=info.name,
                    app_id=feishu.app_id,
                    updated_at_ms=time.time_ns() // 1_000_000,
                ),
            )
            offset = deployment_offset_min(self.config.utc_offset_min)
            self.adapter = FeishuAdapter(
                info.open_id,
                self.config.chat_ids(Platform.FEISHU.value),
                offset,
                bot_app_id=feishu.app_id,
                direct_chats=direct_chats(self.config),
            )
            self.contacts = Contacts(
                ctx.bus, api, opts.name_ttl_s, wait_s=opts.name_wait_s, observer=self.contacts_observer
            )
            await self.contacts.start()
            ctx.spawn(self.contacts.watch(), "feishu-contact-names")
            await self.contacts.learn(info.open_id, info.name)
            self.inbound = Inbound(ctx.bus, self.adapter, self.contacts, api)
            await self.inbound.start()
            me = BotSelf(info.open_id, info.name)
            self.actions = Actions(
                api,
                ctx.bus,
                self.inbound,
                self.adapter,
                me,
                offset,
                pacer,
                send_attempts=opts.send_attempts,
                backoff=Backoff.of(self.config.retry.platform_send),
            )
            if feishu.mode == "webhook":
                self.webhook = WebhookServer(
                    self.inbound,
                    host=opts.webhook_host,
                    port=opts.webhook_port,
                    path=opts.webhook_path,
                    encrypt_key=feishu.encrypt_key.get_secret_value() if feishu.encrypt_key else None,
                    verification_token=(
                        feishu.verification_token.get_secret_value() if feishu.verification_token else None
                    ),
                )
                await self.webhook.start()
            else:
                self.connection = self._connect()
                ctx.spawn(self._watchdog(), "feishu-watchdog")
            log.info("feishu ingress started as %s in %s mode", info.open_id, feishu.mode)
        self.endpoint = actions_endpoint(ctx.bus, Platform.FEISHU.value, self.act)
        await self.endpoint.start()
        ctx.add_check("feishu", self._platform_ready)

    def _connect(self) -> LongConnection:
        # Imported here: lark-oapi costs seconds to import and only this mode needs it.
        from .adapters.longconn import LongConnection

        feishu = self.config.feishu
        assert feishu is not None
        assert self.inbound is not None
        connection = LongConnection(
            feishu.app_id,
            feishu.app_secret.get_secret_value(),
            feishu.domain,
            asyncio.get_running_loop(),
            self.inbound.handle,
            ack_timeout_s=self.options.ack_timeout_s,
        )
        connection.start()
        return connection

    async def _watchdog(self) -> None:
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.options.watchdog_interval_s)
            if self._stopping.is_set() or self.connection is None:
                return
            if self.connection.connected:
                self._down_since = None
                metrics.CONNECTED.set(1)
                continue
            now = time.monotonic()
            self._down_since = self._down_since or now
            if now - self._down_since >= self.options.reconnect_watchdog_s:
                log.error(
                    "feishu long connection down for %.0f s; starting a new one", now - self._down_since
                )
                old, self.connection = self.connection, None
                await asyncio.to_thread(old.stop)
                self.connection = self._connect()
                self._down_since = None

    async def act(self, action: ActionRequest) -> ActionResult:
        if self.actions is None:
            metrics.ACTIONS.labels(action.kind, "not_configured").inc()
            return failed(action.idempotency_key, "not_configured", "no feishu section in the configuration")
        return await self.actions.act(action)

    async def _platform_ready(self) -> Check:
        if self.config.feishu is None:
            return Check(True, "not configured: idle")
        if self.webhook is not None:
            return Check(self.webhook.running, f"webhook on port {self.webhook.bound_port}")
        if self.connection is not None and self.connection.connected:
            return Check(True, "long connection up")
        return Check(False, "long connection down")

    async def stop(self) -> None:
        self._stopping.set()
        if self.endpoint is not None:
            await self.endpoint.stop()
        if self.connection is not None:
            await asyncio.to_thread(self.connection.stop)
        if self.webhook is not None:
            await self.webhook.stop()
        if self.contacts is not None:
            await self.contacts.close()
        if self.rest is not None:
            await self.rest.close()


def main() -> int:
    return run(Service.INGRESS_FEISHU, IngressFeishuService)
