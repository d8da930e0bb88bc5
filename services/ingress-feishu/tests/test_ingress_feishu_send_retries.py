"""How a send meets Feishu's failures, against the fake Feishu over real HTTP and a real bus.

One retry loop per send, under the same ``uuid`` (Feishu deduplicates it for an hour): a 5xx answer is
tried again with backoff and jitter, a lost answer (a timeout) too, until the send succeeds or the
action's deadline; a final refusal is not repeated; a send that gives up is ``unknown`` when an attempt
lost its answer, else ``failed``. The service's sleep is wrapped to record each wait and its jitter fixed,
so the tests state the waits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from larkbot.canonical.actions import ActionRequest, ActionResult, SendMessageAction
from larkbot.canonical.names import Platform, Service, actions_subject
from larkbot.ingress_feishu.app import FeishuIngress, FeishuOptions, IngressFeishuService
from larkbot.ingress_feishu.fake.samples import CHAT
from larkbot.ingress_feishu.fake.server import FakeFeishu
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LarkbotConfig, parse_config
from larkbot.runtime.service import built
from larkbot.testkit.ingress_feishu.service import configured

OPTIONS = FeishuOptions(webhook_host="127.0.0.1", webhook_port=0, api_timeout_s=1.0)


def feishu_config(fake: FakeFeishu) -> LarkbotConfig:
    section = {"app_id": fake.app_id, "app_secret": fake.app_secret, "domain": fake.url, "mode": "webhook"}
    return parse_config({"feishu": section, "utc_offset_min": 480, "chats": {f"feishu:{CHAT}": {}}}, env={})


@pytest.fixture
async def fake() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu() as server:
        yield server


@pytest.fixture
async def service(fake: FakeFeishu, bus: Bus, nats_url: str) -> AsyncIterator[FeishuIngress]:
    config = feishu_config(fake)
    recipe = IngressFeishuService(config, OPTIONS)
    async with built(Service.INGRESS_FEISHU, recipe, config, nats_url=nats_url) as up:
        yield configured(up)


@pytest.fixture
def waits(service: FeishuIngress) -> list[float]:
    """The service's sends' waits (pacing slots and retries), really slept; jitter fixed at its low end."""
    actions = service.actions
    recorded: list[float] = []

    async def sleep(seconds: float) -> None:
        recorded.append(round(seconds, 6))
        await asyncio.sleep(seconds)

    actions.sleep = sleep
    actions.jitter = lambda: 0.0
    return recorded


async def act(bus: Bus, action: ActionRequest) -> ActionResult:
    return await bus.request(actions_subject("feishu"), action, ActionResult, timeout_s=30)


def send(key: str, text: str = "hello", deadline_ms: int | None = None) -> SendMessageAction:
    return SendMessageAction(
        platform=Platform.FEISHU, idempotency_key=key, chat_id=CHAT, text=text, deadline_ms=deadline_ms
    )


def in_ms(seconds: float) -> int:
    return time.time_ns() // 1_000_000 + round(seconds * 1000)


async def test_a_500_answer_is_retried_with_backoff_under_the_same_uuid(
    fake: FakeFeishu, bus: Bus, waits: list[float]
) -> None:
    fake.fail_next("message.create", status=500, code=1500)
    result = await act(bus, send("k-500"))
    assert result.outcome == "done", result
    first, second = fake.routed("message.create")
    assert first.json()["uuid"] == second.json()["uuid"] == "k-500"
    assert waits == [0.375]  # 0.5 s backed off, spread -25 % (jitter at 0): not a tight loop
    assert second.at - first.at >= 0.375
    assert list(fake.sent) == list(result.message_ids)


async def test_a_send_failing_until_the_deadline_is_failed_retryable_and_nothing_is_shown(
    fake: FakeFeishu, bus: Bus, waits: list[float]
) -> None:
    for _ in range(20):
        fake.fail_next("message.create", status=500, code=1500)
    started = time.monotonic()
    result = await act(bus, send("k-500s", deadline_ms=in_ms(3.0)))
    assert result.outcome == "failed"
    assert result.error is not None
    assert (result.error.code, result.error.retryable) == ("unavailable", True)
    attempts = fake.routed("message.create")
    # Backoff 0.375 s, 0.75 s, 1.5 s, …: retried, and ended by the deadline, not by the attempt count
    # (how many waits fit depends on how fast this machine answers).
    assert waits
    assert waits == [0.375, 0.75, 1.5][: len(waits)]
    assert len(attempts) == len(waits) + 1
    assert attempts[-1].at - started < 3.0
    assert not fake.sent


async def test_a_send_that_lost_an_answer_and_then_gave_up_is_unknown(
    fake: FakeFeishu, bus: Bus, waits: list[float]
) -> None:
    fake.delay_next("message.create", 2.0)  # executed, answered after the 1 s client timeout
    for _ in range(20):
        fake.fail_next("message.create", status=500, code=1500)
    result = await act(bus, send("k-lost", deadline_ms=in_ms(4.0)))
    assert result.outcome == "unknown"
    assert result.error is not None
    assert (result.error.code, result.error.retryable) == ("outcome_unknown", False)
    assert len(fake.sent) == 1  # the first attempt did post it: "failed" would have been a lie
    assert len(fake.routed("message.create")) >= 2
    assert waits[0] == 0.375


async def test_a_final_refusal_is_not_repeated(fake: FakeFeishu, bus: Bus, waits: list[float]) -> None:
    fake.fail_next("message.create", status=400, code=230002, msg="Bot is not in the chat.")
    result = await act(bus, send("k-refused"))
    assert result.outcome == "failed"
    assert result.error is not None
    assert result.error.retryable is False
    assert "230002" in result.error.message
    assert len(fake.routed("message.create")) == 1
    assert waits == []


async def test_a_repeat_while_the_first_attempt_runs_gets_its_result(
    fake: FakeFeishu, bus: Bus, waits: list[float]
) -> None:
    fake.delay_next("message.create", 0.5)  # slow, but within the client's timeout
    first, again = await asyncio.gather(act(bus, send("k-twice")), act(bus, send("k-twice")))
    assert sorted([first.outcome, again.outcome]) == ["done", "duplicate"]
    assert first.message_ids == again.message_ids
    assert len(fake.routed("message.create")) == 1
    assert waits == []
