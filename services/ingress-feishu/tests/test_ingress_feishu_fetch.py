"""``fetch.feishu``, where the media workers ask their downloads: served by the same actions as
``actions.feishu``, booked in the same budgets and counted in the same metrics; every action that is not
read-only is refused there before anything reaches Feishu (fake Feishu over real HTTP, a real bus)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import REGISTRY

from larkbot.canonical.actions import (
    ActionRequest,
    ActionResult,
    CustomEmojiAction,
    DownloadAction,
)
from larkbot.canonical.content import AttachmentType
from larkbot.canonical.names import (
    KV_PLATFORM_BUDGET_CALLS,
    STREAM_EVENTS,
    Platform,
    Service,
    actions_subject,
    fetch_subject,
)
from larkbot.ingress_feishu.app import FeishuOptions, IngressFeishuService
from larkbot.ingress_feishu.fake.samples import ALICE, BOB, CHAT, FIRST_MESSAGE
from larkbot.ingress_feishu.fake.server import FakeFeishu
from larkbot.runtime.budgets.core import Calls
from larkbot.runtime.budgets.store import calls_key
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LarkbotConfig, parse_config
from larkbot.runtime.service import built
from larkbot.testkit.actions import acting_actions, refused_as_not_read_only
from larkbot.testkit.ingress_feishu.service import configured

OPTIONS = FeishuOptions(webhook_host="127.0.0.1", webhook_port=0, api_timeout_s=1.0)


def feishu_config(fake: FakeFeishu, budgets: dict[str, int], chat: dict[str, Any]) -> LarkbotConfig:
    section = {
        "app_id": fake.app_id,
        "app_secret": fake.app_secret,
        "domain": fake.url,
        "mode": "webhook",
        "budgets": budgets,
    }
    return parse_config({"feishu": section, "chats": {f"feishu:{CHAT}": chat}}, env={})


@pytest.fixture
async def fake() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu(users={ALICE: "Alice Wang"}) as server:
        server.message_chats[FIRST_MESSAGE] = CHAT
        yield server


async def ask(bus: Bus, subject: str, action: ActionRequest) -> ActionResult:
    return await bus.request(subject, action, ActionResult, timeout_s=20)


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_a_download_on_fetch_is_served_booked_and_counted_like_an_action(
    fake: FakeFeishu, bus: Bus, nats_url: str
) -> None:
    fake.resources["img_v3_fetched"] = b"\x89PNG fetched bytes"
    config = feishu_config(fake, {"api_calls_per_day": 100}, {})
    actions_done = ("larkbot_ingress_feishu_actions_total", {"kind": "download", "outcome": "done"})
    async with built(
        Service.INGRESS_FEISHU, IngressFeishuService(config, OPTIONS), config, nats_url=nats_url
    ) as up:
        configured(up)
        done_before = sample(actions_done[0], **actions_done[1])
        download = DownloadAction(
            platform=Platform.FEISHU,
            idempotency_key="media-download:1",
            chat_id=CHAT,
            message_id=FIRST_MESSAGE,
            file_id="img_v3_fetched",
            attachment_type=AttachmentType.PHOTO,
            max_bytes=1024,
        )
        result = await ask(bus, fetch_subject("feishu"), download)
        emoji = CustomEmojiAction(
            platform=Platform.FEISHU, idempotency_key="media-emoji:1", chat_id=CHAT, emoji_ids=("smile",)
        )
        unsupported = await ask(bus, fetch_subject("feishu"), emoji)
        entry = await (await bus.js.key_value(KV_PLATFORM_BUDGET_CALLS)).get(calls_key("feishu"))
    assert result.outcome == "done", result
    assert result.blob_key is not None
    store = await bus.js.object_store("blobs")
    assert (await store.get(result.blob_key)).data == b"\x89PNG fetched bytes"
    assert fake.routed("message.resource")[0].query == {"type": "image"}
    # The budget saw every OpenAPI request: the token and the bot's info at start-up, then the download.
    assert Calls.decode(entry.value or b"").day_calls == len(fake.requests) == 3
    assert sample(actions_done[0], **actions_done[1]) == done_before + 1
    # Answered as actions.feishu answers it: Feishu has no custom emoji to resolve.
    assert unsupported.error is not None
    assert unsupported.error.code == "unsupported"


async def test_an_action_that_is_not_read_only_is_refused_on_fetch_and_nothing_reaches_feishu(
    fake: FakeFeishu, bus: Bus, nats_url: str
) -> None:
    """Every kind that acts — send, react, typing, image, recall, ban, moderate — is answered
    ``not_read_only`` without a request to Feishu, an event or a booked message; the key it named stays
    free, so the same send on ``actions.feishu`` is delivered (within a minute budget of one)."""
    fake.managed_chats.add(CHAT)  # the bot may remove and recall here: only the subject stops it
    config = feishu_config(fake, {}, {"messages_per_minute": 1})
    refused = ("larkbot_bus_requests_total", {"handler": "fetch.feishu", "outcome": "bad_request"})
    acting = acting_actions(
        Platform.FEISHU, CHAT, message_id=FIRST_MESSAGE, user_id=BOB, blob_key="sha256:" + "0" * 64
    )
    async with built(
        Service.INGRESS_FEISHU, IngressFeishuService(config, OPTIONS), config, nats_url=nats_url
    ) as up:
        configured(up)
        requests, refused_before = len(fake.requests), sample(refused[0], **refused[1])
        results = [await ask(bus, fetch_subject("feishu"), action) for action in acting]
        assert len(fake.requests) == requests
        assert (await bus.js.stream_info(STREAM_EVENTS)).state.messages == 0
        assert sample(refused[0], **refused[1]) == refused_before + len(acting)
        send = acting[0]
        sent = await ask(bus, actions_subject("feishu"), send)
    assert refused_as_not_read_only(acting, results) == []
    assert sent.outcome == "done", sent
    assert [s.message_id for s in fake.sent.values()] == list(sent.message_ids)
    assert fake.recalled == []
    assert fake.removed_members == []
    assert fake.reactions == {}


async def test_fetch_answers_not_configured_without_feishu(bus: Bus, nats_url: str) -> None:
    config = parse_config({}, env={})
    async with built(Service.INGRESS_FEISHU, IngressFeishuService.of(config), config, nats_url=nats_url):
        emoji = CustomEmojiAction(
            platform=Platform.FEISHU, idempotency_key="media-emoji:2", chat_id=CHAT, emoji_ids=("smile",)
        )
        result = await ask(bus, fetch_subject("feishu"), emoji)
    assert result.error is not None
    assert result.error.code == "not_configured"
