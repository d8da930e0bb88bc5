"""Feishu budgets against the fake Feishu over real HTTP and a real bus: every OpenAPI request booked in
the day's and month's calls, a spent budget refusing sends with the typed result and the metrics the
alerts read, a chat's messages per minute."""

from __future__ import annotations

import copy
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from nats.js.errors import NoKeysError
from prometheus_client import REGISTRY

from larkbot.canonical.actions import (
    BUDGET_SPENT,
    ActionRequest,
    ActionResult,
    ReactAction,
    SendMessageAction,
)
from larkbot.canonical.names import (
    KV_PLATFORM_BUDGET_CALLS,
    STREAM_EVENTS,
    Platform,
    Service,
    actions_subject,
)
from larkbot.ingress_feishu.app import FeishuOptions, IngressFeishuService
from larkbot.ingress_feishu.fake.samples import ALICE, CHAT, FIRST_MESSAGE, payload
from larkbot.ingress_feishu.fake.server import FakeFeishu
from larkbot.runtime.budgets.core import Calls
from larkbot.runtime.budgets.store import calls_key, read_speaking_budget
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LarkbotConfig, parse_config
from larkbot.runtime.service import built
from larkbot.testkit.ingress_feishu.service import configured

OPTIONS = FeishuOptions(webhook_host="127.0.0.1", webhook_port=0, api_timeout_s=1.0)
PER_DAY = 6


def feishu_config(
    fake: FakeFeishu, budgets: dict[str, int], chat: dict[str, Any] | None = None
) -> LarkbotConfig:
    section = {
        "app_id": fake.app_id,
        "app_secret": fake.app_secret,
        "domain": fake.url,
        "mode": "webhook",
        "budgets": budgets,
    }
    return parse_config({"feishu": section, "chats": {f"feishu:{CHAT}": chat or {}}}, env={})


@pytest.fixture
async def fake() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu(users={ALICE: "Alice Wang"}) as server:
        server.message_chats[FIRST_MESSAGE] = CHAT
        yield server


async def act(bus: Bus, action: ActionRequest) -> ActionResult:
    return await bus.request(actions_subject("feishu"), action, ActionResult, timeout_s=20)


def send(key: str, text: str = "hello") -> SendMessageAction:
    return SendMessageAction(platform=Platform.FEISHU, idempotency_key=key, chat_id=CHAT, text=text)


def sample(name: str, scope: str) -> float | None:
    return REGISTRY.get_sample_value(name, {"platform": "feishu", "scope": scope})


async def booked(bus: Bus) -> Calls:
    entry = await (await bus.js.key_value(KV_PLATFORM_BUDGET_CALLS)).get(calls_key("feishu"))
    return Calls.decode(entry.value or b"")


async def test_a_spent_day_refuses_sends_with_the_typed_result_and_the_alerts_metric(
    fake: FakeFeishu, bus: Bus, nats_url: str
) -> None:
    config = feishu_config(fake, {"api_calls_per_day": PER_DAY, "api_calls_per_month": 1000})
    async with built(
        Service.INGRESS_FEISHU, IngressFeishuService(config, OPTIONS), config, nats_url=nats_url
    ) as up:
        configured(up)
        refused_before = sample("larkbot_ingress_budget_refusals_total", "day") or 0.0
        # Start-up spent the tenant token and the bot's info: every request the fake saw is booked.
        assert (await booked(bus)).day_calls == len(fake.requests) == 2
        results = [await act(bus, send(f"turn-{i}")) for i in range(PER_DAY)]
        assert [r.ok for r in results] == [True] * (PER_DAY - 2) + [False, False]
        spent = results[-1]
        assert spent.outcome == "failed"
        assert spent.error is not None
        assert spent.error.code == BUDGET_SPENT
        assert spent.error.retryable
        assert 0 < (spent.error.retry_after_s or 0) <= 86400
        assert f"{PER_DAY} API calls a UTC day" in spent.error.message
        # Nothing past the budget reached Feishu, and the count is what the fake saw.
        assert len(fake.routed("message.create")) == PER_DAY - 2
        assert (await booked(bus)).day_calls == len(fake.requests) == PER_DAY
        # What the alerts read: nothing left today, the limit, and the refusals.
        assert sample("larkbot_ingress_budget_remaining", "day") == 0
        assert sample("larkbot_ingress_budget_remaining", "month") == 1000 - PER_DAY
        assert sample("larkbot_ingress_budget_limit", "day") == PER_DAY
        assert (sample("larkbot_ingress_budget_refusals_total", "day") or 0) - refused_before == 2
        assert sample("larkbot_ingress_budget_refusals_total", "minute") is not None  # initialised
        # Other actions are refused the same way; the driver can read what is left.
        reaction = await act(
            bus,
            ReactAction(
                platform=Platform.FEISHU,
                idempotency_key="r1",
                chat_id=CHAT,
                message_id=FIRST_MESSAGE,
                emoji="👍",
            ),
        )
        assert reaction.error is not None
        assert reaction.error.code == BUDGET_SPENT
        seen = await read_speaking_budget(bus.js, "feishu", CHAT, time.time_ns() // 1_000_000)
        assert (seen.day, seen.day_limit, seen.month_limit) == (0, PER_DAY, 1000)


async def test_a_chats_messages_per_minute_on_feishu(fake: FakeFeishu, bus: Bus, nats_url: str) -> None:
    config = feishu_config(fake, {}, {"messages_per_minute": 2})
    async with built(
        Service.INGRESS_FEISHU, IngressFeishuService(config, OPTIONS), config, nats_url=nats_url
    ) as up:
        configured(up)
        results = [await act(bus, send(f"m-{i}")) for i in range(3)]
    assert [r.ok for r in results] == [True, True, False]
    assert results[2].error is not None
    assert results[2].error.code == BUDGET_SPENT
    assert "2 messages a minute in this chat" in results[2].error.message
    assert len(fake.routed("message.create")) == 2
    # Unlimited calls by default: nothing booked in the calls bucket.
    kv = await bus.js.key_value(KV_PLATFORM_BUDGET_CALLS)
    with pytest.raises(NoKeysError):
        await kv.keys()


async def test_a_spent_budget_spends_nothing_on_the_inbound_path(
    fake: FakeFeishu, bus: Bus, nats_url: str
) -> None:
    """Start-up books the token and the bot's info (2); with a day of 2 nothing is left. A message from
    someone nobody has named is still published (its name looked up later), and a reaction on a message
    this process has not seen is dropped rather than re-pushed for hours — no call leaves."""
    section = {
        "app_id": fake.app_id,
        "app_secret": fake.app_secret,
        "domain": fake.url,
        "budgets": {"api_calls_per_day": 2},
    }
    config = parse_config({"feishu": section, "chats": {f"feishu:{CHAT}": {}}}, env={})
    recipe = IngressFeishuService(config, FeishuOptions(api_timeout_s=5.0, ack_timeout_s=10.0))
    dropped = "larkbot_ingress_feishu_events_total"
    labels = {"event_type": "im.message.reaction.created_v1", "outcome": "dropped_budget_spent"}
    async with built(Service.INGRESS_FEISHU, recipe, config, nats_url=nats_url):
        await fake.long_connection.wait_connected()
        before = REGISTRY.get_sample_value(dropped, labels) or 0.0
        requests = len(fake.requests)
        assert await fake.long_connection.push(payload("message_text")) == 200
        reaction = copy.deepcopy(payload("reaction_created"))
        reaction["event"]["message_id"] = "om_000000000000000000000000000000cc"
        assert await fake.long_connection.push(reaction) == 200
        assert (REGISTRY.get_sample_value(dropped, labels) or 0.0) == before + 1
        assert len(fake.requests) == requests  # nothing reached Feishu
        info = await bus.js.stream_info(STREAM_EVENTS)
        assert info.state.messages == 1  # the message, named by its open_id for now
