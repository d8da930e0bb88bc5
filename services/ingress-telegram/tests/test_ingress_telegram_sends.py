"""Sends and calls against the fake Bot API and a real JetStream: forum topics and upgraded groups.

The executor is driven directly (its own ledger, the KV bucket of upgrades), so that each test states
which chat and topic Telegram was asked for and what the self-sent event recorded."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from larkbot.canonical.actions import ReactAction, SendMessageAction
from larkbot.canonical.codec import decode_as
from larkbot.canonical.events import EVENT_ADAPTER, MessageEvent
from larkbot.canonical.names import STREAM_EVENTS, Platform
from larkbot.ingress_telegram.adapters.actions import ActionExecutor
from larkbot.ingress_telegram.adapters.botapi import BotApi
from larkbot.ingress_telegram.adapters.inbound import Inbound
from larkbot.ingress_telegram.adapters.ledger import SentLedger
from larkbot.ingress_telegram.adapters.migrations import ChatMigrations
from larkbot.ingress_telegram.core import TelegramAdapter
from larkbot.ingress_telegram.fake import FakeBotApi
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import RetrySettings
from larkbot.runtime.deadletter import DeadLetters
from larkbot.runtime.retry import RetryPolicy

FIXTURES = Path(__file__).parent / "fixtures" / "updates"
GROUP, SUPERGROUP = "-4000000001", "-1004000000001"
FORUM = -1009876543210


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return data


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotApi]:
    server = FakeBotApi()
    server.chats[FORUM] = {"id": FORUM, "title": "LarkBot Forum", "is_forum": True, "type": "supergroup"}
    server.chats[int(SUPERGROUP)] = {
        "id": int(SUPERGROUP),
        "title": "LarkBot Small Group",
        "type": "supergroup",
    }
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def executor(
    bus: Bus, fake: FakeBotApi, adapter: TelegramAdapter
) -> tuple[ActionExecutor, ChatMigrations]:
    migrations = await ChatMigrations.open(bus, adapter)
    api = BotApi(fake.base_url, fake.token)
    ledger = await SentLedger.open(bus.js)
    return ActionExecutor(api, bus, ledger, adapter, migrations=migrations), migrations


def send(chat: str, key: str, reply_to: str | None = None) -> SendMessageAction:
    return SendMessageAction(
        platform=Platform.TELEGRAM,
        idempotency_key=key,
        chat_id=chat,
        text="on it",
        reply_to_message_id=reply_to,
    )


async def self_events(bus: Bus) -> list[MessageEvent]:
    info = await bus.js.stream_info(STREAM_EVENTS)
    found = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        if info.state.messages:
            msg = await bus.js.get_msg(STREAM_EVENTS, seq)
            event = decode_as(msg.data or b"", EVENT_ADAPTER, dict(msg.headers or {}))
            if isinstance(event, MessageEvent):
                found.append(event)
    return found


async def test_sends_into_a_forum_name_the_topic_and_elsewhere_none(bus: Bus, fake: FakeBotApi) -> None:
    adapter = TelegramAdapter(str(fake.bot_id), None, 0)
    run, migrations = await executor(bus, fake, adapter)
    try:
        adapter.adapt(load("message_forum_topic"), 1)  # Alice writes in topic 35
        topic_message = adapter.adapt(load("message_forum_general"), 2).events[0]  # then in General
        assert (await run.act(send(str(FORUM), "k1", reply_to="40"))).ok  # a reply to her topic message
        assert (await run.act(send(str(FORUM), "k2"))).ok  # no target: the latest conversation (General)
        adapter.adapt(load("message_forum_topic_reply"), 3)  # Alice again, in topic 41
        assert (await run.act(send(str(FORUM), "k3"))).ok
        assert (await run.act(send("-1001234567890", "k4"))).ok  # no forum: no topic
    finally:
        await migrations.close()
        await run.api.close()
    calls = fake.calls("sendMessage")
    assert [c.get("message_thread_id") for c in calls] == [35, None, 41, None]
    assert calls[0]["reply_parameters"]["message_id"] == 40
    assert isinstance(topic_message, MessageEvent)
    assert topic_message.thread_id is None
    sent = await self_events(bus)
    assert [e.thread_id for e in sent] == ["35", None, "41", None]


async def test_calls_for_an_upgraded_group_go_to_its_supergroup_and_stay_recorded_as_the_group(
    bus: Bus, fake: FakeBotApi
) -> None:
    fake.migrated[int(GROUP)] = int(SUPERGROUP)
    adapter = TelegramAdapter(str(fake.bot_id), frozenset({GROUP}), 0)
    run, migrations = await executor(bus, fake, adapter)
    try:
        first = await run.act(send(GROUP, "k1"))  # refused with migrate_to_chat_id, then sent there
        second = await run.act(send(GROUP, "k2", reply_to=f"s{first.message_ids[0][1:]}"))
        reacted = await run.act(
            ReactAction(
                platform=Platform.TELEGRAM, idempotency_key="k3", chat_id=GROUP, message_id="s7", emoji="👍"
            )
        )
        restarted = TelegramAdapter(str(fake.bot_id), frozenset({GROUP}), 0)
        again = await ChatMigrations.open(bus, restarted)
        await again.close()
    finally:
        await migrations.close()
        await run.api.close()
    assert [first.ok, second.ok, reacted.ok] == [True, True, True], (first, second, reacted)
    calls = fake.calls("sendMessage")
    assert [c["chat_id"] for c in calls] == [GROUP, SUPERGROUP, SUPERGROUP]
    assert calls[-1]["reply_parameters"]["message_id"] == int(first.message_ids[0][1:])
    assert fake.calls("setMessageReaction")[0]["chat_id"] == SUPERGROUP
    assert fake.calls("setMessageReaction")[0]["message_id"] == 7
    assert first.message_ids[0].startswith("s")
    assert {(e.chat_id, e.is_self_sent) for e in await self_events(bus)} == {(GROUP, True)}
    assert restarted.migrations.platform_chat(GROUP) == SUPERGROUP  # stored, so a restart keeps it


async def test_an_upgrade_announced_by_an_update_is_stored_before_the_update_is_done(
    bus: Bus, fake: FakeBotApi
) -> None:
    adapter = TelegramAdapter(str(fake.bot_id), frozenset({GROUP}), 0)
    migrations = await ChatMigrations.open(bus, adapter)
    try:
        inbound = Inbound(
            bus,
            adapter,
            DeadLetters(bus.js),
            migrations=migrations,
            retry=RetryPolicy.of(RetrySettings().inbound_store),
        )
        result = await inbound.handle(load("service_migrate_to_chat_id"), 1)
    finally:
        await migrations.close()
    assert result is not None
    assert result.migration == (GROUP, SUPERGROUP)
    entry = await (await bus.js.key_value("telegram-chat-migrations")).get(GROUP)
    assert entry.value == SUPERGROUP.encode()
