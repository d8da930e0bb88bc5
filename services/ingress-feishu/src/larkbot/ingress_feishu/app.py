"""Composition root of ingress-feishu: the Feishu adapter in both directions.

Inbound (long connection by default, webhook optional) → :class:`Inbound` → ``events.feishu.<chat>``;
``actions.feishu`` (queue group) → :class:`Actions` → Feishu OpenAPI, and ``fetch.feishu`` → the same
:class:`Actions` for the read-only actions only (the media workers' downloads). Without a ``feishu``
section the service runs idle: ready, publishing nothing, answering every action ``not_configured``.

:class:`IngressFeishuService` is the recipe; its ``build`` wires, in this order: bot info (who "myself"
is) → identity published → adapter, names, inbound → the platform link → the action endpoints, and
returns them frozen (:class:`FeishuIngress`, or :class:`IdleFeishu` without a ``feishu`` section).
``stop`` reverses it; the long connection's thread is stopped deliberately (the SDK has no ``stop()``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Final

from larkbot.canonical.actions import ActionRequest, ActionResult
from larkbot.canonical.events import BotIdentity
from larkbot.canonical.names import Platform, Service
from larkbot.runtime.budgets.store import BudgetPlan, Budgets
from larkbot.runtime.bus import BusUnavailable
from larkbot.runtime.config import FeishuSettings, LarkbotConfig
from larkbot.runtime.deadletter import DeadLetters
from larkbot.runtime.http import Check
from larkbot.runtime.ingress import IngressEndpoints, failed, publish_identity
from larkbot.runtime.process import deployment_offset_min
from larkbot.runtime.retry import Backoff
from larkbot.runtime.service import ServiceContext, run

from . import metrics
from .adapters.actions import Actions, BotSelf
from .adapters.api import FeishuApi
from .adapters.contacts import UNOBSERVED, Contacts, ContactsObserver
from .adapters.inbound import Inbound
from .adapters.link import Link, SupervisedConnection, WebhookLink
from .adapters.rest import FeishuRest
from .adapters.webhook import WebhookServer
from .core.adapter import FeishuAdapter
from .core.pacing import SendPacer

log = logging.getLogger(__name__)

#: How often the API-call budget's remaining counts are read back for the metrics.
BUDGET_REFRESH_S: Final = 60.0


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


@dataclass(frozen=True, slots=True)
class FeishuIngress:
    """The wired service when a ``feishu`` section is configured."""

    endpoints: IngressEndpoints
    rest: FeishuRest
    contacts: Contacts
    inbound: Inbound
    actions: Actions
    link: Link

    async def stop(self) -> None:
        await self.endpoints.stop()
        await self.link.stop()
        await self.contacts.close()
        await self.rest.close()


@dataclass(frozen=True, slots=True)
class IdleFeishu:
    """The service without a ``feishu`` section: ready, publishing nothing, every action
    ``not_configured``."""

    endpoints: IngressEndpoints

    async def stop(self) -> None:
        await self.endpoints.stop()


async def not_configured(action: ActionRequest) -> ActionResult:
    metrics.ACTIONS.labels(action.kind, "not_configured").inc()
    return failed(action.idempotency_key, "not_configured", "no feishu section in the configuration")


async def idle_ready() -> Check:
    return Check(True, "not configured: idle")


@dataclass(frozen=True, slots=True)
class IngressFeishuService:
    """The recipe: the configuration, the process options and the contact table's observer."""

    config: LarkbotConfig
    options: FeishuOptions
    #: Told of the contact-name table's mirror and lookups (``adapters.contacts.ContactsObserver``).
    contacts_observer: ContactsObserver = UNOBSERVED

    @classmethod
    def of(cls, config: LarkbotConfig) -> IngressFeishuService:
        """The service as ``config.yaml`` describes it."""
        return cls(config, FeishuOptions.from_settings(config.feishu))

    async def build(self, ctx: ServiceContext) -> FeishuIngress | IdleFeishu:
        feishu = self.config.feishu
        if feishu is None:
            idle = await IngressEndpoints.serve(ctx.bus, Platform.FEISHU.value, not_configured)
            ctx.add_check("feishu", idle_ready)
            return IdleFeishu(idle)
        opts = self.options
        pacer = SendPacer()
        budgets = await Budgets.open(ctx.bus.js, BudgetPlan.of(self.config, Platform.FEISHU.value))
        if not budgets.plan.calls.unlimited:
            # What is left is exported after each request; this shows a new day on an idle replica too.
            ctx.every(BUDGET_REFRESH_S, budgets.refresh, "feishu-budget-refresh", tolerate=(BusUnavailable,))
        rest = FeishuRest(
            feishu.domain,
            feishu.app_id,
            feishu.app_secret,
            timeout_s=opts.api_timeout_s,
            on_rate_limit=lambda reset: pacer.back_off(time.monotonic() + reset),
            budgets=budgets,
        )
        api = FeishuApi(rest)
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
        adapter = FeishuAdapter(
            info.open_id,
            self.config.chat_ids(Platform.FEISHU.value),
            offset,
            bot_app_id=feishu.app_id,
            direct_chats=direct_chats(self.config),
        )
        contacts = Contacts(
            ctx.bus, api, opts.name_ttl_s, wait_s=opts.name_wait_s, observer=self.contacts_observer
        )
        await contacts.start()
        ctx.spawn(contacts.follow(), "feishu-contact-names")
        await contacts.learn(info.open_id, info.name)
        inbound = Inbound(ctx.bus, adapter, contacts, api, DeadLetters(ctx.bus.js))
        await inbound.start()
        actions = Actions(
            api,
            ctx.bus,
            inbound,
            adapter,
            BotSelf(info.open_id, info.name),
            offset,
            pacer,
            budgets=budgets,
            send_attempts=opts.send_attempts,
            backoff=Backoff.of(self.config.retry.platform_send),
        )
        link = await self._link(ctx, feishu, inbound)
        log.info("feishu ingress started as %s in %s mode", info.open_id, feishu.mode)
        endpoints = await IngressEndpoints.serve(ctx.bus, Platform.FEISHU.value, actions.act)
        ctx.add_check("feishu", link.ready)
        return FeishuIngress(endpoints, rest, contacts, inbound, actions, link)

    async def _link(self, ctx: ServiceContext, feishu: FeishuSettings, inbound: Inbound) -> Link:
        opts = self.options
        if feishu.mode == "webhook":
            server = WebhookServer(
                inbound,
                host=opts.webhook_host,
                port=opts.webhook_port,
                path=opts.webhook_path,
                encrypt_key=feishu.encrypt_key.get_secret_value() if feishu.encrypt_key else None,
                verification_token=(
                    feishu.verification_token.get_secret_value() if feishu.verification_token else None
                ),
            )
            await server.start()
            return WebhookLink(server)
        # Imported here: lark-oapi costs seconds to import and only this mode needs it.
        from .adapters.longconn import LongConnection

        loop = asyncio.get_running_loop()

        def connect() -> LongConnection:
            connection = LongConnection(
                feishu.app_id,
                feishu.app_secret.get_secret_value(),
                feishu.domain,
                loop,
                inbound.handle,
                ack_timeout_s=opts.ack_timeout_s,
            )
            connection.start()
            return connection

        supervised = SupervisedConnection(connect, restart_after_s=opts.reconnect_watchdog_s)
        ctx.every(opts.watchdog_interval_s, supervised.check, "feishu-watchdog")
        return supervised


def main() -> int:
    return run(Service.INGRESS_FEISHU, IngressFeishuService.of)
