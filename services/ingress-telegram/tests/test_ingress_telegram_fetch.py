"""``fetch.telegram``, where the media workers ask downloads and custom emoji: served by the same executor
as ``actions.telegram`` and counted in the same metrics; every action that is not read-only is refused
there before anything reaches Telegram (fake Bot API over real HTTP, a real bus)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from prometheus_client import REGISTRY
from pydantic import SecretStr

from larkbot.canonical.actions import (
    ActionRequest,
    ActionResult,
    CustomEmojiAction,
    DownloadAction,
)
from larkbot.canonical.content import AttachmentType
from larkbot.canonical.names import (
    OBJECT_STORE_BLOBS,
    STREAM_EVENTS,
    Platform,
    Service,
    actions_subject,
    fetch_subject,
)
from larkbot.ingress_telegram.app import IngressTelegramService, TelegramOptions
from larkbot.ingress_telegram.fake import FakeBotApi
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LarkbotConfig, TelegramSettings
from larkbot.runtime.service import built
from larkbot.testkit.actions import acting_actions, refused_as_not_read_only
from larkbot.testkit.ingress_telegram.service import receiving

GROUP = "-1001234567890"
TIMEOUT_S = 30.0


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotApi]:
    server = FakeBotApi()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def recipe(fake: FakeBotApi) -> tuple[IngressTelegramService, LarkbotConfig]:
    # A minute budget of one message in the group: a refused send that booked it would leave none.
    config = LarkbotConfig(
        telegram=TelegramSettings(bot_token=SecretStr(fake.token), api_base=fake.base_url),
        chats={"default": {}, f"telegram:{GROUP}": {"messages_per_minute": 1}},  # type: ignore[dict-item]
    )
    options = replace(TelegramOptions.from_settings(config.telegram), webhook_port=0, polling_timeout_s=1)
    return IngressTelegramService(config, options), config


async def ask(bus: Bus, subject: str, action: ActionRequest) -> ActionResult:
    return await bus.request(subject, action, ActionResult, timeout_s=TIMEOUT_S)


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


#: What the link calls on its own while it connects and polls (aiogram's poller asks getMe again).
LINK_METHODS = frozenset({"getMe", "deleteWebhook", "getUpdates"})


def acted(fake: FakeBotApi) -> list[str]:
    """The Bot API methods called for actions."""
    return [r.method for r in fake.requests if r.method not in LINK_METHODS]


async def test_downloads_and_custom_emoji_on_fetch_are_served_and_counted_like_actions(
    fake: FakeBotApi, bus: Bus, nats_url: str
) -> None:
    file_id = fake.add_custom_emoji("5368324170671202286", b"RIFF-webp", emoji="🦆", set_name="DuckEmoji")
    service, config = recipe(fake)
    counted = {
        kind: ("larkbot_telegram_actions_total", {"kind": kind, "outcome": "done"})
        for kind in ("download", "custom_emoji")
    }
    async with built(Service.INGRESS_TELEGRAM, service, config, nats_url=nats_url) as up:
        await receiving(up, TIMEOUT_S)
        before = {kind: sample(name, **labels) for kind, (name, labels) in counted.items()}
        common = {"platform": Platform.TELEGRAM, "chat_id": GROUP}
        resolved = await ask(
            bus,
            fetch_subject("telegram"),
            CustomEmojiAction(idempotency_key="media-emoji:1", emoji_ids=("5368324170671202286",), **common),
        )
        download = await ask(
            bus,
            fetch_subject("telegram"),
            DownloadAction(
                idempotency_key="media-download:1",
                file_id=file_id,
                attachment_type=AttachmentType.STICKER,
                max_bytes=1024,
                **common,
            ),
        )
        after = {kind: sample(name, **labels) for kind, (name, labels) in counted.items()}
    assert resolved.ok
    assert [s.file_id for s in resolved.custom_emoji] == [file_id]
    assert download.blob_key is not None
    store = await bus.js.object_store(OBJECT_STORE_BLOBS)
    assert (await store.get(download.blob_key)).data == b"RIFF-webp"
    assert acted(fake)[-2:] == ["getCustomEmojiStickers", "getFile"]
    assert after == {kind: value + 1 for kind, value in before.items()}


async def test_an_action_that_is_not_read_only_is_refused_on_fetch_and_nothing_reaches_telegram(
    fake: FakeBotApi, bus: Bus, nats_url: str
) -> None:
    """Every kind that acts — send, react, typing, image, delete, ban, moderate — is answered
    ``not_read_only`` without a Bot API call, an event, a ledger record or a booked message: the same
    send on ``actions.telegram`` is then delivered, within the group's minute budget of one."""
    service, config = recipe(fake)
    refused = ("larkbot_bus_requests_total", {"handler": "fetch.telegram", "outcome": "bad_request"})
    acting = acting_actions(
        Platform.TELEGRAM, GROUP, message_id="501", user_id="333333333", blob_key="sha256:" + "0" * 64
    )
    async with built(Service.INGRESS_TELEGRAM, service, config, nats_url=nats_url) as up:
        await receiving(up, TIMEOUT_S)
        calls, refused_before = acted(fake), sample(refused[0], **refused[1])
        results = [await ask(bus, fetch_subject("telegram"), action) for action in acting]
        assert acted(fake) == calls
        assert (await bus.js.stream_info(STREAM_EVENTS)).state.messages == 0
        assert sample(refused[0], **refused[1]) == refused_before + len(acting)
        sent = await ask(bus, actions_subject("telegram"), acting[0])
    assert refused_as_not_read_only(acting, results) == []
    assert sent.outcome == "done", sent
    assert [str(m["message_id"]) for m in fake.sent] == list(sent.message_ids)
    assert fake.deleted == []
    assert fake.banned == []
    assert fake.calls("setMessageReaction") == []


async def test_fetch_answers_not_configured_without_telegram(bus: Bus, nats_url: str) -> None:
    config = LarkbotConfig()
    async with built(Service.INGRESS_TELEGRAM, IngressTelegramService.of(config), config, nats_url=nats_url):
        emoji = CustomEmojiAction(
            platform=Platform.TELEGRAM, idempotency_key="media-emoji:2", chat_id=GROUP, emoji_ids=("1",)
        )
        result = await ask(bus, fetch_subject("telegram"), emoji)
    assert result.error is not None
    assert result.error.code == "not_configured"
