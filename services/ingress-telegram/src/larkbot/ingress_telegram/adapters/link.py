"""The service's link to Telegram, made in the background while ``actions.telegram`` and
``fetch.telegram`` already answer.

:meth:`TelegramLink.connect` runs as a task of the service: ``getMe`` (retried through
:mod:`larkbot.runtime.retry` while Telegram is unreachable or at fault; a refused token ends the task,
and so the service), the bot identity published, a warning when privacy mode hides group messages, then
the chat migrations loaded and receiving started — long polling, or the webhook receiver (registered with
``setWebhook`` when a public URL is configured). Until then the link is :data:`CONNECTING` and every
action is answered ``not_ready`` (retryable); once up it is :class:`Receiving`, the wired parts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final, Literal

from larkbot.canonical.actions import ActionRequest, ActionResult
from larkbot.canonical.errors import ContractError
from larkbot.canonical.events import BotIdentity
from larkbot.canonical.names import Platform
from larkbot.runtime.budgets.store import BudgetPlan, Budgets
from larkbot.runtime.bus import Bus
from larkbot.runtime.deadletter import DeadLetters
from larkbot.runtime.http import Check
from larkbot.runtime.ingress import failed, publish_identity
from larkbot.runtime.retry import Failure, RetryPolicy, retrying

from .. import metrics
from ..core import ALLOWED_UPDATES, TelegramAdapter
from .actions import ActionExecutor
from .botapi import BotApi, BotApiFault, NotSent, OutcomeUnknown
from .inbound import Inbound
from .ledger import SentLedger
from .migrations import ChatMigrations
from .polling import Poller
from .webhook import WebhookReceiver

log = logging.getLogger(__name__)

Spawn = Callable[[Coroutine[Any, Any, None], str], object]

PRIVACY_WARNING: Final = (
    "privacy mode is on: in groups this bot only receives commands, replies to it and mentions. "
    "Turn it off with @BotFather (/setprivacy → Disable, then re-add the bot) or make the bot an admin."
)


class Connecting(Enum):
    CONNECTING = "connecting"


CONNECTING: Final = Connecting.CONNECTING


@dataclass(frozen=True, slots=True)
class Wiring:
    """What the link is made of: the platform's settings as the service runs them."""

    bus: Bus
    api: BotApi
    mode: Literal["polling", "webhook"]
    api_base: str
    token: str
    chat_ids: frozenset[str]
    offset_min: int
    send_retry: RetryPolicy
    background_retry: RetryPolicy
    store_retry: RetryPolicy
    webhook_secret: str
    webhook_host: str
    webhook_port: int
    #: The public URL registered with ``setWebhook``; empty: not registered by the service.
    webhook_url: str
    polling_timeout_s: int
    #: The platform budgets (``telegram.budgets``, ``chats.<key>.messages_per_minute``).
    budgets: BudgetPlan = field(default_factory=lambda: BudgetPlan(Platform.TELEGRAM.value))


@dataclass(frozen=True, slots=True)
class Receiving:
    """The link once up."""

    identity: BotIdentity
    privacy_mode: bool
    executor: ActionExecutor
    migrations: ChatMigrations
    receiver: Poller | WebhookReceiver


async def get_me(api: BotApi, policy: RetryPolicy) -> dict[str, Any]:
    """``getMe``; Telegram's own faults (429, 5xx) and an unreachable API are retried, a refusal of the
    token (401, 404) is raised."""

    def classify(exc: BaseException) -> Failure | None:
        return Failure.TRANSIENT if isinstance(exc, BotApiFault | NotSent | OutcomeUnknown) else None

    def retried(_failure: Failure, _attempts: int, wait: float, exc: BaseException | None) -> None:
        log.warning("getMe failed (%s); retrying in %.1f s", exc, wait)

    async for attempt in retrying(policy, classify, on_retry=retried):
        with attempt:
            me = await api.call("getMe")
    if not isinstance(me, dict) or not isinstance(me.get("id"), int):
        raise ContractError("getMe returned no bot id")
    return me


class TelegramLink:
    def __init__(self, wiring: Wiring) -> None:
        self.wiring = wiring
        self.state: Connecting | Receiving = CONNECTING
        #: Set once the link is up (its readiness check reads it too).
        self.ready = asyncio.Event()

    async def connect(self, spawn: Spawn) -> None:
        """Connect (see the module docstring); ``spawn`` runs the link's own loop (the migrations' watch)
        as a task of the service."""
        w = self.wiring
        me = await get_me(w.api, w.background_retry)
        identity = BotIdentity(
            platform=Platform.TELEGRAM,
            bot_id=str(me["id"]),
            name=str(me.get("first_name") or ""),
            username=me.get("username"),
            updated_at_ms=time.time_ns() // 1_000_000,
        )
        await publish_identity(w.bus, identity)
        privacy_mode = not me.get("can_read_all_group_messages", False)
        if privacy_mode:
            log.warning(PRIVACY_WARNING)
        adapter = TelegramAdapter(identity.bot_id, w.chat_ids, w.offset_min)
        ledger = await SentLedger.open(w.bus.js)
        # Upgrades known before any update is taken: a supergroup's first update must already map.
        migrations = await ChatMigrations.open(w.bus, adapter)
        spawn(migrations.follow(), "telegram-chat-migrations")
        budgets = await Budgets.open(w.bus.js, w.budgets)
        executor = ActionExecutor(
            w.api, w.bus, ledger, adapter, migrations=migrations, budgets=budgets, retry=w.send_retry
        )
        inbound = Inbound(w.bus, adapter, DeadLetters(w.bus.js), migrations=migrations, retry=w.store_retry)
        receiver = await self._receive(inbound)
        self.state = Receiving(identity, privacy_mode, executor, migrations, receiver)
        self.ready.set()
        log.info("telegram ready as @%s (%s)", identity.username, w.mode)

    async def _receive(self, inbound: Inbound) -> Poller | WebhookReceiver:
        w = self.wiring
        if w.mode == "webhook":
            webhook = WebhookReceiver(inbound, w.webhook_secret, w.webhook_host, w.webhook_port)
            await webhook.start()
            if w.webhook_url:
                await w.api.call(
                    "setWebhook",
                    {
                        "url": w.webhook_url,
                        "secret_token": w.webhook_secret,
                        "allowed_updates": list(ALLOWED_UPDATES),
                    },
                )
            return webhook
        await w.api.call("deleteWebhook", {"drop_pending_updates": False})
        poller = Poller(w.api_base, w.token, inbound, polling_timeout_s=w.polling_timeout_s)
        poller.start()
        return poller

    async def act(self, action: ActionRequest) -> ActionResult:
        state = self.state
        if isinstance(state, Connecting):
            metrics.ACTIONS.labels(action.kind, "failed").inc()
            return failed(
                action.idempotency_key, "not_ready", "telegram is not connected yet", retryable=True
            )
        return await state.executor.act(action)

    async def ready_check(self) -> Check:
        state = self.state
        if isinstance(state, Connecting):
            return Check(False, "connecting to the Bot API")
        detail = f"{self.wiring.mode} as @{state.identity.username}"
        if isinstance(state.receiver, Poller) and state.receiver.failed:
            return Check(False, f"{detail}; getUpdates failing")
        return Check(True, detail + ("; privacy mode on" if state.privacy_mode else ""))

    async def stop_receiving(self) -> None:
        """No more updates: the poller or the webhook receiver stops."""
        state = self.state
        if isinstance(state, Receiving):
            await state.receiver.stop()

    async def close(self) -> None:
        """After the actions endpoint stopped: the migrations' watch and the API client."""
        state = self.state
        if isinstance(state, Receiving):
            await state.migrations.close()
        await self.wiring.api.close()
