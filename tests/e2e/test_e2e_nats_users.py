"""The whole system with a NATS user per service (``deploy/nats/users.conf``): every service does its
work within its own permissions — a member's message is answered exactly once; photos and custom emoji
are downloaded through the ingresses (``fetch.<platform>``: the media user may not publish actions) and
described — and the server refused nothing any of them tried."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from nats.aio.msg import Msg
from tests.harness.world import World, world

from larkbot.canonical.actions import ACTION_ADAPTER
from larkbot.canonical.codec import decode_as
from larkbot.canonical.names import KV_RATE_LIMITS, Platform
from larkbot.runtime.bus import connect
from larkbot.runtime.config import NatsSettings
from larkbot.runtime.natsserver import EmbeddedNats
from larkbot.runtime.permissions import PERMISSIONS, authorization_conf
from larkbot.testkit.botscript import ALT_TEXT, BotScript
from larkbot.testkit.media import samples
from larkbot.testkit.payloads import (
    feishu_image,
    feishu_message_id,
    feishu_user,
    telegram_chat,
    telegram_text,
    telegram_user,
)
from larkbot.testkit.stack import SERVICES, until

CHAT = -1001000000777
MEDIA_CHAT = -1001000000778  # Telegram: a photo and a custom emoji
FEISHU_MEDIA_CHAT = "oc_e2e_users_media"  # Feishu: an image
ADMIN = "e2e-admin"  # the test's own user: it resets streams and watches every action
REPLY_WAIT_S = 60.0
MEDIA_WAIT_S = 180.0


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
    chats: dict[str, dict[str, Any]] = {
        f"telegram:{CHAT}": {"rate_limit": limit},
        f"telegram:{MEDIA_CHAT}": {},
        f"feishu:{FEISHU_MEDIA_CHAT}": {},
    }
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


async def test_media_is_fetched_and_described_with_every_service_under_its_own_user(
    users_world: World,
) -> None:
    """A Telegram photo, a Telegram custom emoji and a Feishu image: the media worker (user ``media``)
    resolves and downloads each through its ingress on ``fetch.<platform>`` — never ``actions.>`` — and
    the descriptions enter the rendered context."""
    w = users_world
    fetches: list[tuple[str, str]] = []

    async def on_fetch(msg: Msg) -> None:
        action = decode_as(msg.data, ACTION_ADAPTER, dict(msg.headers or {}))
        fetches.append((msg.subject, action.kind))

    sub = await w.bus.nc.subscribe("fetch.>", cb=on_fetch)
    await w.bus.flush()
    try:
        photo = samples.solid((220, 20, 20), (64, 48))
        w.telegram.add_file("photo_users", photo, "photos/file_1.png")
        emoji_id = "5368324170671202299"
        w.telegram.add_custom_emoji(
            emoji_id, samples.solid((250, 200, 0), (100, 100), fmt="WEBP"), emoji="🦆", set_name="UsersDuck"
        )
        now = int(time.time())
        size = {"file_id": "photo_users", "file_unique_id": "u_photo_users", "file_size": len(photo)}
        w.telegram.enqueue(
            {
                "message": {
                    "message_id": 21,
                    "from": telegram_user(3),
                    "chat": telegram_chat(MEDIA_CHAT),
                    "date": now,
                    "photo": [{**size, "width": 64, "height": 48}],
                }
            }
        )
        with_emoji = telegram_text(MEDIA_CHAT, 22, "hi 🦆 there", user=3, date=now)
        entity = {"type": "custom_emoji", "offset": 3, "length": 2, "custom_emoji_id": emoji_id}
        with_emoji["message"]["entities"] = [entity]
        w.telegram.enqueue(with_emoji)
        key = "img_v3_e2e_users"
        w.feishu.resources[key] = samples.solid((20, 20, 220), (64, 48))
        feishu_id = feishu_message_id(FEISHU_MEDIA_CHAT, 1)
        w.feishu.message_chats[feishu_id] = FEISHU_MEDIA_CHAT
        image = feishu_image(FEISHU_MEDIA_CHAT, 1, key, sender=feishu_user(1), create_time_ms=now * 1000)
        assert await w.feishu.long_connection.push(image) == 200

        async def rendered(platform: Platform, chat_id: str, message_id: str, text: str) -> bool:
            snap = await w.snapshot(platform, chat_id)
            return any(s.message_id == message_id and text in s.xml for s in snap.segments)

        described = f'<custom-emoji pack="UsersDuck">{ALT_TEXT}</custom-emoji>'
        await until(
            lambda: rendered(Platform.TELEGRAM, str(MEDIA_CHAT), "21", ALT_TEXT),
            "the Telegram photo's description",
            MEDIA_WAIT_S,
        )
        await until(
            lambda: rendered(Platform.TELEGRAM, str(MEDIA_CHAT), "22", described),
            "the custom emoji's description",
            MEDIA_WAIT_S,
        )
        await until(
            lambda: rendered(Platform.FEISHU, FEISHU_MEDIA_CHAT, feishu_id, ALT_TEXT),
            "the Feishu image's description",
            MEDIA_WAIT_S,
        )
    finally:
        await sub.unsubscribe()
    assert {
        ("fetch.telegram", "download"),
        ("fetch.telegram", "custom_emoji"),
        ("fetch.feishu", "download"),
    } <= set(fetches)
    assert [r.kind for r in w.tap.requests if r.kind in ("download", "custom_emoji")] == []
    assert w.feishu.routed("message.resource")
    assert violations(w) == {}
