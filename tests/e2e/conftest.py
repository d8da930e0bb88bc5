"""One running system per module and database (SQLite always, PostgreSQL with ``TEST_DATABASE_URL``):
starting six processes costs seconds, so the end-to-end scenarios share it and each uses its own chats."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests.harness.world import World, world

from larkbot.runtime.bus import Bus, connect
from larkbot.runtime.config import NatsSettings
from larkbot.testkit.botscript import BotScript
from larkbot.testkit.payloads import feishu_user

FEISHU_CHATS = tuple(f"oc_e2e_{name}" for name in ("reply", "silent", "react", "image", "long", "recall"))
TELEGRAM_CHATS = (
    -1001000000001,
    -1001000000002,
    -1001000000003,
    -1001000000004,
    -1001000000005,
    -1001000000006,
)
#: The chats of the voice scenarios (test_e2e_voice.py).
FEISHU_VOICE, TELEGRAM_VOICE = "oc_e2e_voice", -1001000000007
MEMBER = feishu_user(1)


@pytest.fixture(scope="module")
async def e2e_bus(nats_url: str) -> AsyncIterator[Bus]:
    bus = await connect(NatsSettings(), "e2e-tests", url=nats_url, give_up_after_s=30)
    try:
        yield bus
    finally:
        await bus.close(drain_timeout_s=5)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
async def e2e(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    e2e_bus: Bus,
    nats_url: str,
) -> AsyncIterator[tuple[World, BotScript]]:
    postgres = os.environ.get("TEST_DATABASE_URL")
    if request.param == "postgres" and not postgres:
        pytest.skip("PostgreSQL end-to-end runs need TEST_DATABASE_URL")
    script = BotScript()
    chats: dict[str, dict[str, Any]] = {f"feishu:{c}": {} for c in (*FEISHU_CHATS, FEISHU_VOICE)}
    chats.update({f"telegram:{c}": {} for c in TELEGRAM_CHATS})
    chats[f"telegram:{TELEGRAM_VOICE}"] = {"media": {"transcription": {"language": "en"}}}
    root = tmp_path_factory.mktemp(f"e2e-{request.param}")
    async with world(
        root, e2e_bus, nats_url, script, chats, database=request.param, postgres_url=postgres
    ) as w:
        yield w, script
