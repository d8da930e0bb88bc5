"""The real long connection (lark-oapi's WebSocket client) against the fake Feishu, end to end to EVENTS."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator

import pytest

from larkbot.canonical.codec import decode, decode_as
from larkbot.canonical.events import (
    EVENT_ADAPTER,
    BotIdentity,
    CanonicalEvent,
    DeleteEvent,
    MessageEvent,
    ReactionEvent,
)
from larkbot.canonical.names import (
    KV_IDENTITY,
    STREAM_DEAD_LETTER,
    STREAM_EVENTS,
    Service,
    identity_key,
)
from larkbot.ingress_feishu.adapters.link import SupervisedConnection
from larkbot.ingress_feishu.app import FeishuOptions, IngressFeishuService
from larkbot.ingress_feishu.fake.samples import ALICE, BOT, CHAT, FIRST_MESSAGE, payload
from larkbot.ingress_feishu.fake.server import FakeFeishu
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import parse_config
from larkbot.runtime.service import built
from larkbot.testkit.ingress_feishu.service import configured
from larkbot.testkit.ingress_feishu.watch import ContactsWatch


@pytest.fixture
async def fake() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu(users={ALICE: "Alice Wang"}) as server:
        yield server


async def stream(bus: Bus, name: str) -> list[bytes]:
    info = await bus.js.stream_info(name)
    if info.state.messages == 0:
        return []
    return [
        (await bus.js.get_msg(name, seq)).data or b""
        for seq in range(info.state.first_seq, info.state.last_seq + 1)
    ]


async def events(bus: Bus) -> list[CanonicalEvent]:
    return [decode_as(data, EVENT_ADAPTER) for data in await stream(bus, STREAM_EVENTS)]


async def test_long_connection_end_to_end(fake: FakeFeishu, bus: Bus, nats_url: str) -> None:
    config = parse_config(
        {
            "feishu": {"app_id": fake.app_id, "app_secret": fake.app_secret, "domain": fake.url},
            "utc_offset_min": 480,
            "chats": {f"feishu:{CHAT}": {}},
        },
        env={},
    )
    contacts = ContactsWatch()
    recipe = IngressFeishuService(config, FeishuOptions(api_timeout_s=5.0), contacts_observer=contacts)
    conn = fake.long_connection
    async with built(Service.INGRESS_FEISHU, recipe, config, nats_url=nats_url) as service:
        link = configured(service).link
        assert isinstance(link, SupervisedConnection)
        kv = await bus.js.key_value(KV_IDENTITY)
        identity = decode((await kv.get(identity_key("feishu"))).value or b"", BotIdentity)
        assert identity.bot_id == BOT
        await conn.wait_connected()

        # A message reaches EVENTS once: first push, re-push (Feishu's +15 s), re-push after a reconnect.
        text = payload("message_text")
        assert await conn.push(text) == 200
        assert await conn.redeliver(text["header"]["event_id"]) == 200
        await conn.drop()
        await conn.wait_connected(count=2)
        assert await conn.redeliver(text["header"]["event_id"]) == 200
        messages = [e for e in await events(bus) if isinstance(e, MessageEvent)]
        assert [m.message_id for m in messages] == [FIRST_MESSAGE]
        assert messages[0].received_at_ms > 0

        # A reaction on a message seen before, and one on a message only Feishu knows (GET lookup).
        assert await conn.push(payload("reaction_created")) == 200
        unseen = copy.deepcopy(payload("reaction_created"))
        unseen["header"]["event_id"] = "feedfacefeedfacefeedfacefeedface"
        unseen["event"]["message_id"] = "om_0000000000000000000000000000beef"
        fake.message_chats["om_0000000000000000000000000000beef"] = CHAT
        assert await conn.push(unseen) == 200
        reactions = [e for e in await events(bus) if isinstance(e, ReactionEvent)]
        assert [(r.chat_id, r.message_id, r.emoji) for r in reactions] == [
            (CHAT, FIRST_MESSAGE, "👍"),
            (CHAT, "om_0000000000000000000000000000beef", "👍"),
        ]
        assert len(fake.routed("message.get")) == 1

        # A recall lands on its chat; a private chat and an unconfigured group are dropped.
        assert await conn.push(payload("message_recalled")) == 200
        assert await conn.push(payload("message_private")) == 200
        assert await conn.push(payload("message_unconfigured")) == 200
        all_events = await events(bus)
        deletes = [e for e in all_events if isinstance(e, DeleteEvent)]
        assert [(d.chat_id, d.dedup_key) for d in deletes] == [(CHAT, f"recall:{FIRST_MESSAGE}")]
        assert {e.chat_id for e in all_events} == {CHAT}

        # Unknown event types and malformed payloads are acknowledged and dead-lettered with the reason.
        assert await conn.push(payload("message_read")) == 200
        broken = copy.deepcopy(payload("message_image"))
        del broken["event"]["message"]["chat_id"]
        assert await conn.push(broken) == 200
        info = await bus.js.stream_info(STREAM_DEAD_LETTER)
        assert info.state.messages == 2
        reasons = {
            (await bus.js.get_msg(STREAM_DEAD_LETTER, seq)).headers["Larkbot-Dead-Letter-Reason"]  # type: ignore[index]
            for seq in range(info.state.first_seq, info.state.last_seq + 1)
        }
        assert reasons == {"unknown_event_type", "malformed"}

        # The sender name arrives from the contact API off the event path and is used from then on.
        await contacts.settled()
        second = copy.deepcopy(payload("message_text_reply"))
        assert await conn.push(second) == 200
        reply = [e for e in await events(bus) if isinstance(e, MessageEvent)][-1]
        assert reply.sender.display_name == "Alice Wang"
        assert reply.reply_to_message_id == FIRST_MESSAGE
    assert not link.connected
