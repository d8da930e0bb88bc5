"""Budgets on the real bus: two replicas racing on the same keys never spend more than the budget."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, cast

import nats.errors
import pytest
from nats.js.kv import KeyValue
from prometheus_client import REGISTRY

from larkbot.canonical.actions import BUDGET_SPENT
from larkbot.canonical.names import KV_PLATFORM_BUDGET_CALLS, KV_PLATFORM_BUDGET_MINUTES
from larkbot.runtime.budgets.core import CallLimits, MinuteWindow
from larkbot.runtime.budgets.store import (
    BudgetPlan,
    BudgetReader,
    Budgets,
    BudgetSpent,
    BudgetUnavailable,
    budget_refusal,
    minute_key,
    read_speaking_budget,
)
from larkbot.runtime.bus import Bus, connect
from larkbot.runtime.config import NatsSettings, parse_config

WAIT = 30.0
GROUP = "-1001234"


@pytest.fixture
async def other(bus: Bus, nats_url: str) -> AsyncIterator[Bus]:
    """A second connection: the other replica."""
    second = await connect(NatsSettings(), "test-2", url=nats_url, give_up_after_s=30)
    try:
        yield second
    finally:
        await second.close(drain_timeout_s=5)


def refusals(platform: str, scope: str) -> float:
    value = REGISTRY.get_sample_value(
        "larkbot_ingress_budget_refusals_total", {"platform": platform, "scope": scope}
    )
    assert value is not None, "refusals are initialised at 0"
    return value


async def spend_all(budgets: Budgets, spend: str, n: int) -> list[bool]:
    async def one() -> bool:
        try:
            if spend == "messages":
                await budgets.spend_messages(GROUP)
            else:
                await budgets.spend_calls()
        except BudgetSpent:
            return False
        return True

    return list(await asyncio.gather(*(one() for _ in range(n))))


async def test_a_groups_minute_holds_across_two_replicas(bus: Bus, other: Bus) -> None:
    plan = BudgetPlan("telegram", messages_per_minute=20, groups_only=True)
    first, second = await Budgets.open(bus.js, plan), await Budgets.open(other.js, plan)
    before = refusals("telegram", "minute")
    async with asyncio.timeout(WAIT):
        granted = await asyncio.gather(spend_all(first, "messages", 30), spend_all(second, "messages", 30))
    # All at once, a replica that wrote the key last books its next part without a read, so the burst
    # may go to one replica: what holds is the limit, and every other spend refused on a fresh read.
    assert sum(sum(g) for g in granted) == 20
    assert refusals("telegram", "minute") - before == 40
    kv = await bus.js.key_value(KV_PLATFORM_BUDGET_MINUTES)
    window = MinuteWindow.decode((await kv.get(minute_key("telegram", GROUP))).value or b"")
    assert (window.limit, len(window.sent_ms)) == (20, 20)
    # What the driver reads for the chat: nothing left this minute.
    seen = await read_speaking_budget(bus.js, "telegram", GROUP, max(window.sent_ms))
    assert (seen.minute, seen.minute_limit, seen.lowest_share()) == (0, 20, 0.0)


async def test_replicas_taking_turns_each_book_on_what_the_other_wrote(bus: Bus, other: Bus) -> None:
    """Each replica's knowledge of the key is stale after the other's spend: its compare-and-set fails,
    it reads and books on top, so turn by turn both get their share and the limit still holds."""
    plan = BudgetPlan("telegram", messages_per_minute=20, groups_only=True)
    first, second = await Budgets.open(bus.js, plan), await Budgets.open(other.js, plan)
    granted: dict[str, int] = {"first": 0, "second": 0}
    async with asyncio.timeout(WAIT):
        for _ in range(15):
            for name, budgets in (("first", first), ("second", second)):
                try:
                    await budgets.spend_messages(GROUP)
                except BudgetSpent:
                    continue
                granted[name] += 1
    assert granted == {"first": 10, "second": 10}
    kv = await bus.js.key_value(KV_PLATFORM_BUDGET_MINUTES)
    window = MinuteWindow.decode((await kv.get(minute_key("telegram", GROUP))).value or b"")
    assert len(window.sent_ms) == 20


async def test_private_chats_and_unlimited_chats_spend_nothing(bus: Bus) -> None:
    plan = BudgetPlan("telegram", messages_per_minute=1, chats={"-42": 0}, groups_only=True)
    budgets = await Budgets.open(bus.js, plan)
    for _ in range(3):
        await budgets.spend_messages("4242")  # a private chat
        await budgets.spend_messages("-42")  # a group the operator set unlimited
    await budgets.spend_messages(GROUP)
    with pytest.raises(BudgetSpent) as spent:
        await budgets.spend_messages(GROUP)
    assert spent.value.refused.scope == "minute"
    assert 0 < spent.value.refused.retry_after_s <= 60


async def test_the_days_calls_hold_across_two_replicas_and_the_refusal_is_typed(bus: Bus, other: Bus) -> None:
    plan = BudgetPlan("feishu", calls=CallLimits(per_day=25, per_month=1000))
    first, second = await Budgets.open(bus.js, plan), await Budgets.open(other.js, plan)
    async with asyncio.timeout(WAIT):
        granted = await asyncio.gather(spend_all(first, "calls", 20), spend_all(second, "calls", 20))
    assert sum(sum(g) for g in granted) == 25
    remaining = REGISTRY.get_sample_value(
        "larkbot_ingress_budget_remaining", {"platform": "feishu", "scope": "day"}
    )
    assert remaining == 0
    assert (
        REGISTRY.get_sample_value("larkbot_ingress_budget_limit", {"platform": "feishu", "scope": "day"})
        == 25
    )
    with pytest.raises(BudgetSpent) as spent:
        await first.spend_calls()
    result = budget_refusal("k1", spent.value)
    assert result.outcome == "failed"
    assert result.error is not None
    assert result.error.code == BUDGET_SPENT
    assert result.error.retryable
    assert result.error.retry_after_s == spent.value.refused.retry_after_s
    assert "25 API calls a UTC day" in result.error.message
    # Forced calls (the tenant token) still go, and are counted.
    await first.spend_calls(force=True)
    seen = await read_speaking_budget(bus.js, "feishu", "oc_x", 0)
    assert seen.day_limit == 25


def test_the_plan_reads_platform_and_chat_settings() -> None:
    config = parse_config(
        {
            "telegram": {"bot_token": "t0ken-123456", "budgets": {"messages_per_minute": 15}},
            "feishu": {
                "app_id": "cli_1",
                "app_secret": "s3cret-1234",
                "budgets": {"api_calls_per_day": 300, "api_calls_per_month": 9000},
            },
            "chats": {
                "default": {},
                "telegram:-100": {"messages_per_minute": 5},
                "telegram:-200": {},
                "feishu:oc_1": {"messages_per_minute": 10},
            },
        },
        {},
    )
    telegram = BudgetPlan.of(config, "telegram")
    assert [telegram.minute_limit(c) for c in ("-100", "-200", "-300", "777")] == [5, 15, 15, 0]
    feishu = BudgetPlan.of(config, "feishu")
    assert (feishu.minute_limit("oc_1"), feishu.minute_limit("oc_2")) == (10, 0)
    assert feishu.calls == CallLimits(300, 9000)
    # Defaults: Telegram 20 a minute per group; Feishu unlimited.
    defaults = parse_config(
        {"telegram": {"bot_token": "t0ken-123456"}, "feishu": {"app_id": "a", "app_secret": "s3cret-1234"}},
        {},
    )
    assert BudgetPlan.of(defaults, "telegram").minute_limit("-1") == 20
    assert BudgetPlan.of(defaults, "feishu").calls.unlimited
    assert BudgetPlan.of(defaults, "feishu").minute_limit("oc_1") == 0


async def test_a_reader_binds_each_bucket_once_and_reads_both_keys_per_read(bus: Bus, other: Bus) -> None:
    """The driver reads a chat's budget at every wake-up: binding a bucket is a stream-info request, so
    the reader binds the two buckets once and then reads only the keys."""
    watch = await other.nc.subscribe("$JS.API.>")
    await other.nc.flush()

    async def asked() -> list[str]:
        # Whatever the server routed before the other connection's PONG is queued once its flush returns.
        await bus.nc.flush()
        await other.nc.flush()
        return [(await watch.next_msg(timeout=WAIT)).subject for _ in range(watch.pending_msgs)]

    plan = BudgetPlan("telegram", messages_per_minute=20, groups_only=True)
    await (await Budgets.open(bus.js, plan)).spend_messages(GROUP, 3)
    await asked()
    reader = BudgetReader(bus.js)
    for _ in range(3):
        seen = await reader.read("telegram", GROUP, time.time_ns() // 1_000_000)
        assert (seen.minute, seen.minute_limit) == (17, 20)
    subjects = await asked()
    await watch.unsubscribe()
    info = [s for s in subjects if s.startswith("$JS.API.STREAM.INFO.")]
    gets = [s for s in subjects if s.startswith(("$JS.API.STREAM.MSG.GET.", "$JS.API.DIRECT.GET."))]
    assert sorted(info) == [
        f"$JS.API.STREAM.INFO.KV_{KV_PLATFORM_BUDGET_CALLS}",
        f"$JS.API.STREAM.INFO.KV_{KV_PLATFORM_BUDGET_MINUTES}",
    ]
    assert len(gets) == 6, subjects


async def test_a_replica_reads_a_key_only_when_another_wrote_it_since(bus: Bus, other: Bus) -> None:
    """A send books its part with one write when the replica knows what it last wrote to the key; the
    compare-and-set sends it to read once another replica has spent there since."""
    watch = await other.nc.subscribe(">")
    await other.nc.flush()

    async def asked() -> list[str]:
        await bus.nc.flush()
        await other.nc.flush()
        subjects = [(await watch.next_msg(timeout=WAIT)).subject for _ in range(watch.pending_msgs)]
        return [s.split(".")[2] if s.startswith("$JS.API.") else s.split(".")[0] for s in subjects]

    async def kv_traffic() -> list[str]:
        """Writes to the buckets (``$KV``) and reads of them (``STREAM``: a message get)."""
        return [s for s in await asked() if s in ("$KV", "STREAM", "DIRECT")]

    plan = BudgetPlan("telegram", messages_per_minute=20, groups_only=True)
    first, second = await Budgets.open(bus.js, plan), await Budgets.open(other.js, plan)
    await asked()
    for _ in range(3):
        await first.spend_messages(GROUP)
    assert await kv_traffic() == ["$KV"] * 3
    # The other replica never wrote the key: its create is refused (the client reads to tell a
    # deleted key from a live one), it reads and writes.
    await second.spend_messages(GROUP)
    assert await kv_traffic() == ["$KV", "STREAM", "STREAM", "$KV"]
    await first.spend_messages(GROUP)  # a write refused (the key moved on), a read, a write
    assert await kv_traffic() == ["$KV", "STREAM", "$KV"]
    await watch.unsubscribe()
    kv = await bus.js.key_value(KV_PLATFORM_BUDGET_MINUTES)
    window = MinuteWindow.decode((await kv.get(minute_key("telegram", GROUP))).value or b"")
    assert len(window.sent_ms) == 5


class _Unanswering:
    """A bucket whose first ``failures`` writes time out (an election), then the real bucket."""

    def __init__(self, kv: Any, failures: int) -> None:
        self._kv = kv
        self.failures = failures

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kv, name)

    async def _fail(self) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise nats.errors.TimeoutError

    async def create(self, key: str, value: bytes) -> int:
        await self._fail()
        written: int = await self._kv.create(key, value)
        return written

    async def update(self, key: str, value: bytes, last: int | None = None) -> int:
        await self._fail()
        written: int = await self._kv.update(key, value, last=last)
        return written


async def test_a_bucket_that_does_not_answer_is_asked_again_while_the_deadline_allows(bus: Bus) -> None:
    """A leader election stalls the budget buckets for seconds; a send waits it out instead of failing
    (a 3-node chaos run lost a reply to one such stall)."""
    plan = BudgetPlan("telegram", messages_per_minute=20, groups_only=True)
    minutes = await bus.js.key_value(KV_PLATFORM_BUDGET_MINUTES)
    calls = await bus.js.key_value(KV_PLATFORM_BUDGET_CALLS)
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    retried = REGISTRY.get_sample_value("larkbot_ingress_budget_retries_total") or 0.0
    stalled = _Unanswering(minutes, failures=3)
    budgets = Budgets(plan, cast(KeyValue, stalled), calls, sleep=sleep)
    await budgets.spend_messages(GROUP, left_s=30)
    assert len(waits) == 3
    assert (REGISTRY.get_sample_value("larkbot_ingress_budget_retries_total") or 0.0) - retried == 3
    window = MinuteWindow.decode((await minutes.get(minute_key("telegram", GROUP))).value or b"")
    assert len(window.sent_ms) == 1  # booked once, however often it was asked

    # Past the caller's deadline nothing is booked and the failure stays retryable (BusUnavailable).
    gone = Budgets(plan, cast(KeyValue, _Unanswering(minutes, failures=10**6)), calls, sleep=sleep)
    with pytest.raises(BudgetUnavailable):
        await gone.spend_messages(GROUP, left_s=0)
    window = MinuteWindow.decode((await minutes.get(minute_key("telegram", GROUP))).value or b"")
    assert len(window.sent_ms) == 1
