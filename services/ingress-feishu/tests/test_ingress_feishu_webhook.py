"""Webhook mode over real HTTP: challenge, signature, token and decryption checks, then EVENTS."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from larkbot.canonical.names import STREAM_EVENTS, Service
from larkbot.ingress_feishu.app import FeishuOptions, IngressFeishuService
from larkbot.ingress_feishu.core.webhook import encrypt, signature
from larkbot.ingress_feishu.fake.samples import CHAT, payload
from larkbot.ingress_feishu.fake.server import FakeFeishu
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import parse_config
from larkbot.runtime.service import built
from larkbot.testkit.ingress_feishu import service as running_feishu

ENCRYPT_KEY = "kE7yLm0nEncrypt"
TOKEN = "v3rIfIcAt10nT0k3n"  # the token in the payload fixtures


@pytest.fixture
async def webhook_url(bus: Bus, nats_url: str) -> AsyncIterator[str]:
    async with FakeFeishu() as fake:
        feishu = {
            "app_id": fake.app_id,
            "app_secret": fake.app_secret,
            "domain": fake.url,
            "mode": "webhook",
            "encrypt_key": ENCRYPT_KEY,
            "verification_token": TOKEN,
        }
        config = parse_config({"feishu": feishu, "chats": {f"feishu:{CHAT}": {}}}, env={})
        recipe = IngressFeishuService(config, FeishuOptions(webhook_host="127.0.0.1", webhook_port=0))
        async with built(Service.INGRESS_FEISHU, recipe, config, nats_url=nats_url) as service:
            yield running_feishu.webhook_url(service)


def sealed(data: object) -> bytes:
    return json.dumps(
        {"encrypt": encrypt(json.dumps(data).encode(), ENCRYPT_KEY, b"0123456789abcdef")}
    ).encode()


def signed_headers(body: bytes, key: str = ENCRYPT_KEY) -> dict[str, str]:
    return {
        "X-Lark-Request-Timestamp": "1715000000",
        "X-Lark-Request-Nonce": "n0nce",
        "X-Lark-Signature": signature("1715000000", "n0nce", key, body),
        "Content-Type": "application/json",
    }


async def event_count(bus: Bus) -> int:
    return int((await bus.js.stream_info(STREAM_EVENTS)).state.messages)


async def test_webhook_checks_and_delivery(webhook_url: str, bus: Bus) -> None:
    async with httpx.AsyncClient(trust_env=False) as http:
        challenge = sealed({"challenge": "ch-4711", "token": TOKEN, "type": "url_verification"})
        answer = await http.post(webhook_url, content=challenge)
        assert answer.status_code == 200
        assert answer.json() == {"challenge": "ch-4711"}

        body = sealed(payload("message_text"))
        forged = await http.post(webhook_url, content=body, headers=signed_headers(body, key="not-the-key"))
        assert forged.status_code == 401
        assert forged.json() == {"msg": "bad_signature"}
        unsigned = await http.post(webhook_url, content=body)
        assert unsigned.status_code == 401
        assert await event_count(bus) == 0

        wrong_token = payload("message_text")
        wrong_token["header"]["token"] = "someone-else"
        body_wrong = sealed(wrong_token)
        rejected = await http.post(webhook_url, content=body_wrong, headers=signed_headers(body_wrong))
        assert rejected.json() == {"msg": "bad_token"}
        assert await event_count(bus) == 0

        accepted = await http.post(webhook_url, content=body, headers=signed_headers(body))
        assert accepted.status_code == 200
        assert await event_count(bus) == 1
        again = await http.post(webhook_url, content=body, headers=signed_headers(body))
        assert again.status_code == 200
        assert await event_count(bus) == 1


async def test_webhook_takes_an_envelope_over_four_mib(webhook_url: str, bus: Bus) -> None:
    """A body the HTTP server refused (413) is re-sent by Feishu for hours; the webhook reads envelopes
    up to the same bound as the long connection and leaves the verdict to the inbound path."""
    big = payload("message_text")
    big["event"]["message"]["content"] = json.dumps({"text": "中" * 700_000})
    big["event"]["message"]["mentions"] = []
    body = sealed(big)
    assert len(body) > 4 * 1024 * 1024
    async with httpx.AsyncClient(trust_env=False, timeout=30) as http:
        accepted = await http.post(webhook_url, content=body, headers=signed_headers(body))
    assert accepted.status_code == 200
    assert await event_count(bus) == 1
