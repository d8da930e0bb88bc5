"""The whole system with a NATS user per service (``deploy/nats/users.conf``): every service does its
work within its own permissions — a member's message is answered exactly once — and the server refused
nothing any of them tried."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from tests.harness.world import World, world

from larkbot.canonical.names import KV_RATE_LIMITS
from larkbot.runtime.bus import connect
from larkbot.runtime.config import NatsSettings
from larkbot.runtime.natsserver import EmbeddedNats
from larkbot.runtime.permissions import PERMISSIONS, authorization_conf
from larkbot.testkit.botscript import BotScript
from larkbot.testkit.payloads import telegram_text
from larkbot.testkit.stack import SERVICES, until

CHAT = -1001000000777
ADMIN = "e2e-admin"  # the test's own user: it resets streams and watches every action
REPLY_WAIT_S = 60.0


def password(user: str) -> str:
    return f"pw-{user}-0123456789"


@pytest.fixture(scope="module")
def users_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedNats]:
    block = authorization_conf(lambda u: f'"{password(u)}"').replace(
        "  users: [\n", f'  users: [\n    {{ user: "{ADMIN}", password: "{password(ADMIN)}" }}\n', 1
    )
    server = EmbeddedNats(tmp_path_factory.mktemp("nats-users"), extra_conf=block)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
async def users_world(
    tmp_path_factory: pytest.TempPathFactory, users_server: EmbeddedNats
) -> AsyncIterator[World]:
    admin = NatsSettings(user=ADMIN, password=password(ADMIN))  # type: ignore[arg-type]
    bus = await connect(admin, "e2e-nats-users", url=users_server.url, give_up_after_s=30)
    own = {
        name: {"NATS_USER": name, "NATS_PASSWORD": password(name)} for name in SERVICES if name in PERMISSIONS
    }
    # Rate limits on, so the driver counts the member in its rate-limits bucket under its own user.
    limit = {"person": {"max_wakeups": 5, "window_s": 60}, "chat": {"max_turns": 5, "window_s": 60}}
    chats: dict[str, dict[str, Any]] = {f"telegram:{CHAT}": {"rate_limit": limit}}
    try:
        async with world(
            tmp_path_factory.mktemp("e2e-nats-users"),
            bus,
            users_server.url,
            BotScript(),
            chats,
            config={"nats": {"user": "${NATS_USER}", "password": "${NATS_PASSWORD}"}},
            service_env=own,
        ) as w:
            yield w
    finally:
        await bus.close(drain_timeout_s=5)


def violations(w: World) -> dict[str, list[str]]:
    found = {}
    for name in SERVICES:
        lines = [
            line for line in w.stack.log_text(name).splitlines() if "permissions violation" in line.lower()
        ]
        if lines:
            found[name] = lines[:3]
    return found


async def test_each_service_works_within_its_own_permissions(users_world: World) -> None:
    w = users_world
    assert set(SERVICES) <= set(PERMISSIONS)
    w.telegram.enqueue(telegram_text(CHAT, 7, "#send tokusers anyone here?", user=1, date=int(time.time())))

    def replies() -> list[dict[str, Any]]:
        return [m for m in w.telegram.sent if m["chat"]["id"] == CHAT]

    await until(lambda: bool(replies()), "the reply through services with their own users", REPLY_WAIT_S)
    assert "tokusers" in replies()[0]["text"]
    assert len(w.tap.of_kind("send_message", str(CHAT))) == 1
    counted = await w.bus.js.stream_info(f"KV_{KV_RATE_LIMITS}")
    assert counted.state.messages == 2  # the member's window and the chat's
    assert violations(w) == {}
