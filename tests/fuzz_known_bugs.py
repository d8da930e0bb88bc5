"""Reproductions of ingress bugs found by the fuzz run, kept out of the collected suite (the file name does
not match ``test_*.py``) until the services are fixed. Run them with::

    uv run --frozen pytest tests/fuzz_known_bugs.py -p no:cacheprovider

Each test states the expected behaviour and fails today (fixed ones moved to
``tests/test_ingress_bad_input.py``). When one passes, move it into
``tests/test_fuzz_ingress.py`` and drop the corresponding exclusion there (see ``KNOWN_BUG_*``).
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator

import aiohttp
import pytest

from larkbot.canonical.errors import ContractError
from larkbot.canonical.names import Service
from larkbot.ingress_feishu.app import IngressFeishuService
from larkbot.ingress_feishu.core import FeishuAdapter
from larkbot.ingress_feishu.fake import samples
from larkbot.ingress_feishu.fake.server import FakeFeishu
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import parse_config
from larkbot.runtime.service import running

SURROGATE = "\ud800"  # what json.loads makes of the (valid JSON) escape "\\ud800"


def feishu_adapter() -> FeishuAdapter:
    return FeishuAdapter(samples.BOT, frozenset({samples.CHAT}), 480, bot_app_id=samples.APP_ID)


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
    app = IngressFeishuService(config)
    payload = copy.deepcopy(samples.payload("message_text"))
    payload["header"]["event_type"] = "x" * 70_000
    async with running(Service.INGRESS_FEISHU, app, config, nats_url=nats_url):
        assert app.webhook is not None
        url = f"http://127.0.0.1:{app.webhook.bound_port}{app.webhook.path}"
        async with aiohttp.ClientSession() as http, http.post(url, json=payload) as resp:
            assert resp.status == 200
