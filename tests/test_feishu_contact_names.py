"""Contact names stay the same across an ingress-feishu restart and between its replicas, and a name from a
mention never replaces the contact API's: the rendered context shows no false rename.

ingress-feishu in webhook mode (no lark-oapi) against the fake Feishu and a real JetStream; the events it
published are rendered by the pipeline's pure projection, as the pipeline would.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from larkbot.canonical.codec import decode_as
from larkbot.canonical.events import EVENT_ADAPTER, CanonicalEvent, MessageEvent
from larkbot.canonical.names import STREAM_EVENTS, Platform, Service
from larkbot.ingress_feishu.app import FeishuIngress, FeishuOptions, IngressFeishuService
from larkbot.ingress_feishu.fake.samples import BOB, BOT, CAROL, CHAT, payload
from larkbot.ingress_feishu.fake.server import FakeFeishu
from larkbot.pipeline.core import RenderParams, replay_chat
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import parse_config
from larkbot.runtime.service import built
from larkbot.testkit.ingress_feishu.service import configured, webhook_url
from larkbot.testkit.ingress_feishu.watch import ContactsWatch

DIRECTORY = {BOB: "Robert Li", CAROL: "Carol Chen"}


@pytest.fixture
async def fake() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu(users=DIRECTORY) as server:
        yield server


@asynccontextmanager
async def ingress(fake: FakeFeishu, nats_url: str) -> AsyncIterator[tuple[FeishuIngress, str]]:
    section = {"app_id": fake.app_id, "app_secret": fake.app_secret, "domain": fake.url, "mode": "webhook"}
    config = parse_config({"feishu": section, "utc_offset_min": 480, "chats": {f"feishu:{CHAT}": {}}}, env={})
    # A contact answer normally arrives within the first-sight wait; 5 s keeps it so on a loaded machine.
    options = FeishuOptions(webhook_host="127.0.0.1", webhook_port=0, name_wait_s=5.0)
    seen = ContactsWatch()
    recipe = IngressFeishuService(config, options, contacts_observer=seen)
    async with built(Service.INGRESS_FEISHU, recipe, config, nats_url=nats_url) as service:
        yield configured(service), webhook_url(service)
        await seen.settled()


def message(n: int, sender: str, text: str, mentions: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    data = copy.deepcopy(payload("message_text"))
    data["header"]["event_id"] = f"ev{n:032x}"
    msg = data["event"]["message"]
    data["event"]["sender"]["sender_id"]["open_id"] = sender
    msg["message_id"] = f"om_{n:032x}"
    msg["create_time"] = str(1_715_000_000_000 + n * 1000)
    msg["content"] = json.dumps({"text": text + "".join(f" @_user_{i}" for i in range(1, len(mentions) + 1))})
    msg["mentions"] = [
        {"key": f"@_user_{i}", "id": {"open_id": open_id}, "name": name, "tenant_key": "t"}
        for i, (open_id, name) in enumerate(mentions, start=1)
    ]
    return data


async def post(url: str, data: dict[str, Any]) -> None:
    async with httpx.AsyncClient(trust_env=False, timeout=30) as http:
        answer = await http.post(url, json=data)
    assert answer.status_code == 200, answer.text


async def published(bus: Bus) -> list[CanonicalEvent]:
    info = await bus.js.stream_info(STREAM_EVENTS)
    return [
        decode_as((msg := await bus.js.get_msg(STREAM_EVENTS, seq)).data or b"", EVENT_ADAPTER, msg.headers)
        for seq in range(info.state.first_seq, info.state.last_seq + 1)
        if info.state.messages
    ]


async def senders(bus: Bus) -> list[tuple[str, str]]:
    return [(e.sender.id, e.sender.display_name) for e in await published(bus) if isinstance(e, MessageEvent)]


async def rendered(bus: Bus) -> str:
    params = RenderParams(
        platform=Platform.FEISHU, chat_id=CHAT, bot_user_id=BOT, deployment_utc_offset_min=480
    )
    return replay_chat(await published(bus), params)


async def test_names_survive_a_restart_and_mentions_do_not_replace_them(
    fake: FakeFeishu, bus: Bus, nats_url: str
) -> None:
    async with ingress(fake, nats_url) as (_app, url):
        await post(url, message(1, BOB, "hello"))
    lookups = len(fake.routed("contact.user"))

    # A new process: it knows Bob's name before his next message, and a mention calling him "Bob" (the
    # payload's name) does not replace the directory's.
    async with ingress(fake, nats_url) as (_app, url):
        await post(url, message(2, CAROL, "hi", mentions=((BOB, "Bob"),)))
        await post(url, message(3, BOB, "hi Carol"))
    assert await senders(bus) == [(BOB, "Robert Li"), (CAROL, "Carol Chen"), (BOB, "Robert Li")]
    assert len(fake.routed("contact.user")) == lookups + 1  # Carol only: Bob's answer is still fresh
    assert "name_change" not in await rendered(bus)


async def test_replicas_render_the_same_names(fake: FakeFeishu, bus: Bus, nats_url: str) -> None:
    async with ingress(fake, nats_url) as (_a, url_a), ingress(fake, nats_url) as (_b, url_b):
        await post(url_a, message(1, BOB, "hello"))
        # Feishu delivers each event to one connection at random: the next may reach the other replica.
        await post(url_b, message(2, BOB, "again"))
        await post(url_b, message(3, CAROL, "hi", mentions=((BOB, "Bob"),)))
        await post(url_a, message(4, BOB, "hi Carol"))
    assert await senders(bus) == [
        (BOB, "Robert Li"),
        (BOB, "Robert Li"),
        (CAROL, "Carol Chen"),
        (BOB, "Robert Li"),
    ]
    assert [r.path for r in fake.routed("contact.user")].count(f"/open-apis/contact/v3/users/{BOB}") == 1
    assert "name_change" not in await rendered(bus)


async def test_a_name_known_only_from_mentions_stays_the_first_one_disclosed(
    fake: FakeFeishu, bus: Bus, nats_url: str
) -> None:
    """The app may not read Dave from the directory (41050): the first name a payload disclosed stays,
    whichever replica or process sees the next mention."""
    dave = "ou_d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0"
    async with ingress(fake, nats_url) as (_a, url_a), ingress(fake, nats_url) as (_b, url_b):
        await post(url_a, message(1, CAROL, "hi", mentions=((dave, "Dave"),)))
        await post(url_b, message(2, CAROL, "hi", mentions=((dave, "David W."),)))
        await post(url_b, message(3, dave, "hello"))
    async with ingress(fake, nats_url) as (_app, url):
        await post(url, message(4, CAROL, "hi", mentions=((dave, "D."),)))
        await post(url, message(5, dave, "me again"))
    assert [name for sender, name in await senders(bus) if sender == dave] == ["Dave", "Dave"]
    assert "name_change" not in await rendered(bus)
