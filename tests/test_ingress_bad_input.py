"""Regressions from the ingress fuzz run: inputs that once escaped as crashes or unencodable events.

Lone surrogates (from ``\\ud800`` escapes) are replaced by U+FFFD at the adapters' edge, values the
canonical contract refuses become a ``ContractError`` with a reason, and a dead-letter record can hold any
payload. Ids beyond what the events table and NATS headers hold are refused with a reason.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from dataclasses import replace

import aiohttp
import pytest

from larkbot.canonical.codec import encode
from larkbot.canonical.errors import ContractError
from larkbot.canonical.names import Service
from larkbot.ingress_feishu.app import IngressFeishuService
from larkbot.ingress_feishu.core import FeishuAdapter
from larkbot.ingress_feishu.core.adapter import Adapted
from larkbot.ingress_feishu.fake import samples
from larkbot.ingress_feishu.fake.server import FakeFeishu
from larkbot.ingress_telegram.app import IngressTelegramService, TelegramOptions
from larkbot.ingress_telegram.core import TelegramAdapter
from larkbot.ingress_telegram.fake import FakeBotApi
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import parse_config
from larkbot.runtime.service import built
from larkbot.testkit.ingress_feishu.service import webhook_url
from larkbot.testkit.ingress_telegram.service import webhook_url as telegram_webhook_url

SURROGATE = "\ud800"  # what json.loads makes of the (valid JSON) escape "\\ud800"


def feishu_adapter() -> FeishuAdapter:
    return FeishuAdapter(samples.BOT, frozenset({samples.CHAT}), 480, bot_app_id=samples.APP_ID)


def test_bug1_feishu_lone_surrogate_in_an_id_is_a_contract_error() -> None:
    """A lone surrogate in ``event.users[].user_id.open_id``: refused with a reason, or adapted into an
    event that encodes (the surrogate replaced) — never pydantic's ValidationError escaping."""
    payload = copy.deepcopy(samples.payload("member_user_added"))
    payload["event"]["users"][0]["user_id"]["open_id"] = "ou_" + SURROGATE
    try:
        result = feishu_adapter().adapt(payload, 1_715_000_001_000)
    except ContractError:
        return
    assert isinstance(result, Adapted)
    for event in result.events:
        encode(event)


def test_bug2_feishu_lone_surrogate_in_text_is_rejected_or_replaced() -> None:
    """A lone surrogate in message text is adapted into an event that cannot be encoded (publish fails)."""
    payload = copy.deepcopy(samples.payload("message_text"))
    payload["event"]["message"]["content"] = json.dumps({"text": "hi " + SURROGATE})
    try:
        result = feishu_adapter().adapt(payload, 1_715_000_001_000)
    except ContractError:
        return
    assert isinstance(result, Adapted)
    for event in result.events:
        encode(event)


def test_bug3_telegram_lone_surrogate_text_is_rejected_or_replaced() -> None:
    update = {
        "update_id": 1,
        "message": {
            "message_id": 5,
            "from": {"id": 1, "is_bot": False, "first_name": "A"},
            "chat": {"id": -1001234567890, "type": "supergroup", "title": "G"},
            "date": 1715000000,
            "text": "hi " + SURROGATE,
        },
    }
    try:
        result = TelegramAdapter("7000000001", frozenset({"-1001234567890"}), 480).adapt(update, 0)
    except ContractError:
        return
    for event in result.events:
        encode(event)


def test_bug7_feishu_negative_create_time_is_a_contract_error() -> None:
    """``"create_time": -1`` → ``timestamp_sec=-0.001`` → pydantic ValidationError, not a ContractError
    (the webhook answers 500; the long connection acks 500 and Feishu re-pushes)."""
    payload = copy.deepcopy(samples.payload("message_text"))
    payload["event"]["message"]["create_time"] = -1
    with pytest.raises(ContractError):
        feishu_adapter().adapt(payload, 1_715_000_001_000)


async def test_bug5_telegram_webhook_lone_surrogate_is_dead_lettered(bus: Bus, nats_url: str) -> None:
    """``{"update_id": 1, "a": "\\ud800"}``: the adapter rejects the unknown kind, then the dead-letter
    path's ``json.dumps(...).encode()`` raises UnicodeEncodeError → aiohttp answers 500 (Telegram retries
    the delivery for 24 h and holds every later update behind it)."""
    fake = FakeBotApi()
    await fake.start()
    secret = "known-bug-secret-123456"
    config = parse_config(
        {
            "telegram": {"bot_token": fake.token, "api_base": fake.base_url, "mode": "webhook",
                         "webhook_secret": secret, "webhook_host": "127.0.0.1"},
            "chats": {"telegram:-1001234567890": {}},
        },
        env={},
    )  # fmt: skip
    recipe = IngressTelegramService(
        config, replace(TelegramOptions.from_settings(config.telegram), webhook_port=0)
    )
    try:
        async with built(Service.INGRESS_TELEGRAM, recipe, config, nats_url=nats_url) as service:
            url = await telegram_webhook_url(service)
            headers = {"X-Telegram-Bot-Api-Secret-Token": secret, "Content-Type": "application/json"}
            async with (
                aiohttp.ClientSession() as http,
                http.post(url, data=b'{"update_id": 1, "a": "\\ud800"}', headers=headers) as resp,
            ):
                assert resp.status == 200
    finally:
        await fake.stop()


def test_bug6_feishu_huge_message_id_is_a_contract_error() -> None:
    """Canonical ``Id`` has no length bound: a 200 kB ``message_id`` is adapted, then its
    ``Nats-Msg-Id`` header (``feishu:<dedup_key>``) exceeds NATS's 64 KiB header limit, the publish fails
    with BadRequestError and the callback answers 500 (re-pushed forever). ``events.dedup_key`` is
    ``String(512)``, so PostgreSQL would refuse it too."""
    payload = copy.deepcopy(samples.payload("message_text"))
    payload["event"]["message"]["message_id"] = "om_" + "x" * 200_000
    with pytest.raises(ContractError):
        feishu_adapter().adapt(payload, 1_715_000_001_000)


@pytest.fixture
async def fake_feishu() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu() as server:
        yield server


async def test_bug4_feishu_webhook_huge_event_type_is_dead_lettered(
    bus: Bus, nats_url: str, fake_feishu: FakeFeishu
) -> None:
    """The dead-letter header ``Larkbot-Dead-Letter-Subject`` carries ``header.event_type`` unbounded: NATS
    refuses headers over 64 KiB, so the record is not written and the callback answers 500 — Feishu would
    re-push the same poison payload forever (the long connection acks 500 the same way)."""
    config = parse_config(
        {
            "feishu": {"app_id": fake_feishu.app_id, "app_secret": fake_feishu.app_secret,
                       "domain": fake_feishu.url, "mode": "webhook", "webhook_port": 0,
                       "webhook_host": "127.0.0.1"},
            "chats": {f"feishu:{samples.CHAT}": {}},
        },
        env={},
    )  # fmt: skip
    payload = copy.deepcopy(samples.payload("message_text"))
    payload["header"]["event_type"] = "x" * 70_000
    recipe = IngressFeishuService.of(config)
    async with built(Service.INGRESS_FEISHU, recipe, config, nats_url=nats_url) as service:
        url = webhook_url(service)
        async with aiohttp.ClientSession() as http, http.post(url, json=payload) as resp:
            assert resp.status == 200
