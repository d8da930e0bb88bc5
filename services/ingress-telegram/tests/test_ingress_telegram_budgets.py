"""A group's messages-per-minute budget across two ingress-telegram replicas: two services on the real
bus against the fake Bot API, racing sends into one group."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from typing import Any

import pytest
from prometheus_client import REGISTRY
from pydantic import SecretStr

from larkbot.canonical.actions import BUDGET_SPENT, ActionResult, SendMessageAction
from larkbot.canonical.names import Platform, Service, actions_subject
from larkbot.ingress_telegram.adapters.link import Receiving
from larkbot.ingress_telegram.app import IngressTelegramService, TelegramOptions
from larkbot.ingress_telegram.fake import FakeBotApi
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LarkbotConfig, TelegramSettings
from larkbot.runtime.service import built
from larkbot.testkit.ingress_telegram.service import receiving

GROUP, OTHER = "-1001234567890", "-1009999999999"
TIMEOUT_S = 60.0


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotApi]:
    server = FakeBotApi()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def config(fake: FakeBotApi) -> LarkbotConfig:
    chats: Any = {"default": {}, f"telegram:{GROUP}": {"messages_per_minute": 5}, f"telegram:{OTHER}": {}}
    return LarkbotConfig(
        telegram=TelegramSettings(
            bot_token=SecretStr(fake.token),
            api_base=fake.base_url,
            mode="webhook",
            webhook_port=0,
            webhook_secret=SecretStr("budget-test-secret"),
        ),
        chats=chats,
    )


@asynccontextmanager
async def replicas(nats_url: str, fake: FakeBotApi, count: int) -> AsyncIterator[list[Receiving]]:
    """``count`` ingress-telegram services, each with its own connection, pacer and budget client."""
    cfg = config(fake)
    options = replace(TelegramOptions.from_settings(cfg.telegram), webhook_port=0)
    async with AsyncExitStack() as stack:
        up = [
            await stack.enter_async_context(
                built(Service.INGRESS_TELEGRAM, IngressTelegramService(cfg, options), cfg, nats_url=nats_url)
            )
            for _ in range(count)
        ]
        yield [await receiving(service, TIMEOUT_S) for service in up]


def send(chat: str, key: str, text: str = "on it") -> SendMessageAction:
    return SendMessageAction(platform=Platform.TELEGRAM, idempotency_key=key, chat_id=chat, text=text)


def refusals() -> float:
    value = REGISTRY.get_sample_value(
        "larkbot_ingress_budget_refusals_total", {"platform": "telegram", "scope": "minute"}
    )
    assert value is not None
    return value


async def test_a_groups_minute_budget_holds_across_two_replicas(
    bus: Bus, nats_url: str, fake: FakeBotApi
) -> None:
    async with replicas(nats_url, fake, 2) as (first, second):
        before = refusals()  # initialised at 0 when the budgets open
        # Each replica is asked six times at once: twelve sends racing for the group's five.
        async with asyncio.timeout(TIMEOUT_S):
            results = await asyncio.gather(
                *(first.executor.act(send(GROUP, f"a{i}")) for i in range(6)),
                *(second.executor.act(send(GROUP, f"b{i}")) for i in range(6)),
            )
        granted = [r for r in results if r.ok]
        refused = [r for r in results if not r.ok]
        assert len(granted) == 5
        assert {r.error.code for r in refused if r.error is not None} == {BUDGET_SPENT}
        assert all(r.error is not None and r.error.retryable for r in refused)
        assert all(r.error is not None and 0 < (r.error.retry_after_s or 0) <= 60 for r in refused)
        assert "5 messages a minute in this chat" in (refused[0].error.message if refused[0].error else "")
        assert len([c for c in fake.calls("sendMessage") if str(c["chat_id"]) == GROUP]) == 5
        assert refusals() - before == 7
        # A repeat of a refused key is refused again (not a duplicate: nothing was sent) ...
        again = await bus.request(
            actions_subject("telegram"),
            send(GROUP, refused[0].idempotency_key),
            ActionResult,
            timeout_s=TIMEOUT_S,
        )
        assert again.error is not None
        assert again.error.code == BUDGET_SPENT
        # ... and another group keeps its own budget (the platform's 20).
        other = await bus.request(
            actions_subject("telegram"), send(OTHER, "c1"), ActionResult, timeout_s=TIMEOUT_S
        )
        assert other.ok


async def test_a_long_text_is_booked_whole_or_refused_whole(
    bus: Bus, nats_url: str, fake: FakeBotApi
) -> None:
    long_text = "\n\n".join(f"paragraph {i} " + "x" * 3000 for i in range(3))  # three messages
    async with replicas(nats_url, fake, 1) as (only,):
        async with asyncio.timeout(TIMEOUT_S):
            first = await only.executor.act(send(GROUP, "long-1", long_text))
            second = await only.executor.act(send(GROUP, "long-2", long_text))
    assert first.ok
    assert len(first.message_ids) == 3
    assert second.error is not None
    assert second.error.code == BUDGET_SPENT
    assert second.message_ids == ()
    assert len(fake.calls("sendMessage")) == 3
