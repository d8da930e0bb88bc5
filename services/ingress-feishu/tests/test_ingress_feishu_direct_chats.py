"""Direct (``p2p``) chats through the running service, in both inbound modes: one the configuration names
reaches EVENTS, another is dropped and counted, and the long connection and the webhook agree."""

from __future__ import annotations

import copy
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY

from larkbot.canonical.codec import decode_as
from larkbot.canonical.events import EVENT_ADAPTER, MessageEvent
from larkbot.canonical.names import STREAM_EVENTS, Service
from larkbot.ingress_feishu.app import FeishuOptions, IngressFeishuService
from larkbot.ingress_feishu.fake.samples import ALICE, CHAT, P2P_CHAT, payload
from larkbot.ingress_feishu.fake.server import FakeFeishu
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import parse_config
from larkbot.runtime.service import built
from larkbot.testkit.ingress_feishu.service import webhook_url

from .test_ingress_feishu_webhook import ENCRYPT_KEY, TOKEN, sealed, signed_headers

UNCONFIGURED_P2P = "oc_0f0e0d0c0b0a09080706050403020100"
Push = Callable[[dict[str, Any]], Awaitable[None]]


def dropped(reason: str) -> float:
    labels = {"event_type": "im.message.receive_v1", "outcome": f"dropped_{reason}"}
    return REGISTRY.get_sample_value("larkbot_ingress_feishu_events_total", labels) or 0.0


async def published(bus: Bus) -> list[MessageEvent]:
    info = await bus.js.stream_info(STREAM_EVENTS)
    if info.state.messages == 0:
        return []
    found = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        event = decode_as((await bus.js.get_msg(STREAM_EVENTS, seq)).data or b"", EVENT_ADAPTER)
        assert isinstance(event, MessageEvent)
        found.append(event)
    return found


@asynccontextmanager
async def ingress(mode: str, nats_url: str) -> AsyncIterator[Push]:
    async with FakeFeishu(users={ALICE: "Alice Wang"}) as fake:
        feishu: dict[str, Any] = {"app_id": fake.app_id, "app_secret": fake.app_secret, "domain": fake.url}
        if mode == "webhook":
            feishu |= {"mode": "webhook", "encrypt_key": ENCRYPT_KEY, "verification_token": TOKEN}
        chats = {f"feishu:{CHAT}": {}, f"feishu:{P2P_CHAT}": {"direct_with": ALICE}}
        config = parse_config({"feishu": feishu, "chats": chats}, env={})
        recipe = IngressFeishuService(config, FeishuOptions(webhook_host="127.0.0.1", webhook_port=0))
        async with built(Service.INGRESS_FEISHU, recipe, config, nats_url=nats_url) as service:
            if mode == "webhook":
                url = webhook_url(service)
                async with httpx.AsyncClient(trust_env=False) as http:

                    async def post(envelope: dict[str, Any]) -> None:
                        body = sealed(envelope)
                        answer = await http.post(url, content=body, headers=signed_headers(body))
                        assert answer.status_code == 200

                    yield post
            else:
                await fake.long_connection.wait_connected()

                async def push(envelope: dict[str, Any]) -> None:
                    assert await fake.long_connection.push(envelope) == 200

                yield push


@pytest.mark.parametrize("mode", ["long_connection", "webhook"])
async def test_a_configured_direct_chat_is_published_and_another_is_dropped(
    mode: str, bus: Bus, nats_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    before = dropped("private_chat")
    async with ingress(mode, nats_url) as push:
        await push(payload("message_private"))
        for n in range(2):
            stranger = copy.deepcopy(payload("message_private"))
            stranger["header"]["event_id"] = f"ev0f0e0d0c0b0a0908070605040302010{n}"
            stranger["event"]["message"].update(message_id=f"om_0f0e0d0c0b0a090{n}", chat_id=UNCONFIGURED_P2P)
            with caplog.at_level(logging.INFO, logger="larkbot.ingress_feishu.adapters.inbound"):
                await push(stranger)
        events = await published(bus)
    # The handler returned (the platform got its answer) only after the PubAck or the drop.
    assert [(e.chat_id, e.chat_type, e.sender.id) for e in events] == [(P2P_CHAT, "private", ALICE)]
    assert dropped("private_chat") == before + 2
    # The operator learns, once, what serving the unconfigured direct chat takes.
    explained = [r.getMessage() for r in caplog.records if UNCONFIGURED_P2P in r.getMessage()]
    assert len(explained) == 1
    assert f'chats."feishu:{UNCONFIGURED_P2P}" with direct_with: {ALICE}' in explained[0]
