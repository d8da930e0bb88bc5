"""``actions.feishu`` against the fake Feishu over real HTTP and a real bus (webhook mode: no lark-oapi)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from larkbot.canonical.actions import (
    ActionRequest,
    ActionResult,
    BanMemberAction,
    DeleteMessageAction,
    DownloadAction,
    ReactAction,
    SendImageAction,
    SendMessageAction,
)
from larkbot.canonical.codec import decode_as
from larkbot.canonical.content import AttachmentType, Mention
from larkbot.canonical.events import EVENT_ADAPTER, CanonicalEvent, DeleteEvent, MessageEvent
from larkbot.canonical.names import OBJECT_STORE_BLOBS, STREAM_EVENTS, Platform, Service, actions_subject
from larkbot.ingress_feishu.app import FeishuIngress, FeishuOptions, IngressFeishuService
from larkbot.ingress_feishu.fake.samples import ALICE, BOB, BOT, CHAT, FIRST_MESSAGE
from larkbot.ingress_feishu.fake.server import FakeFeishu
from larkbot.runtime.bootstrap import bootstrap
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LarkbotConfig, parse_config
from larkbot.runtime.service import built
from larkbot.testkit.ingress_feishu.service import configured


def feishu_config(fake: FakeFeishu, **feishu: Any) -> LarkbotConfig:
    section = {"app_id": fake.app_id, "app_secret": fake.app_secret, "domain": fake.url, "mode": "webhook"}
    section.update(feishu)
    return parse_config({"feishu": section, "utc_offset_min": 480, "chats": {f"feishu:{CHAT}": {}}}, env={})


OPTIONS = FeishuOptions(webhook_host="127.0.0.1", webhook_port=0, api_timeout_s=1.0)


@pytest.fixture
async def fake() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu(users={ALICE: "Alice Wang"}) as server:
        server.message_chats[FIRST_MESSAGE] = CHAT
        yield server


@pytest.fixture
async def service(fake: FakeFeishu, bus: Bus, nats_url: str) -> AsyncIterator[FeishuIngress]:
    config = feishu_config(fake)
    recipe = IngressFeishuService(config, OPTIONS)
    async with built(Service.INGRESS_FEISHU, recipe, config, nats_url=nats_url) as up:
        yield configured(up)


async def act(bus: Bus, action: ActionRequest) -> ActionResult:
    return await bus.request(actions_subject("feishu"), action, ActionResult, timeout_s=20)


async def stream_events(bus: Bus) -> list[CanonicalEvent]:
    info = await bus.js.stream_info(STREAM_EVENTS)
    out: list[CanonicalEvent] = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        if info.state.messages == 0:
            break
        msg = await bus.js.get_msg(STREAM_EVENTS, seq)
        out.append(decode_as(msg.data or b"", EVENT_ADAPTER, dict(msg.headers or {})))
    return out


def send(key: str, text: str, **extra: Any) -> SendMessageAction:
    return SendMessageAction(platform=Platform.FEISHU, idempotency_key=key, chat_id=CHAT, text=text, **extra)


async def test_send_publishes_self_event_with_real_message_id(
    service: FeishuIngress, fake: FakeFeishu, bus: Bus
) -> None:
    text = f'hi <mention uid="{ALICE}">@Alice Wang</mention> and <mention uid="{BOB}">@Bob</mention> **bold**'
    result = await act(bus, send("turn-1:step-1:call-1", text, mentions=(ALICE,)))
    assert result.ok, result
    assert result.outcome == "done"
    [message_id] = result.message_ids
    assert message_id in fake.sent
    sent = fake.sent[message_id]
    assert sent.uuid == "turn-1:step-1:call-1"
    assert sent.msg_type == "post"
    md = json.loads(sent.content)["zh_cn"]["content"][0][0]
    assert md["tag"] == "md"
    assert md["text"] == f'hi <at user_id="{ALICE}"></at> and @Bob **bold**'
    [event] = await stream_events(bus)
    assert isinstance(event, MessageEvent)
    assert event.is_self_sent
    assert event.message_id == message_id
    assert event.dedup_key == message_id
    assert event.chat_id == CHAT
    assert event.sender.id == BOT
    assert event.sender.is_bot
    assert Mention(user_id=ALICE, text="@Alice Wang") in event.content.nodes
    assert event.content.plain_text() == "hi @Alice Wang and @Bob **bold**"


async def test_send_retried_with_same_uuid_after_timeout_appears_once(
    service: FeishuIngress, fake: FakeFeishu, bus: Bus
) -> None:
    fake.delay_next("message.create", 3.0)  # executed, but answered after the 1 s client timeout
    result = await act(bus, send("turn-2:step-1:call-1", "once only"))
    assert result.outcome == "done", result
    attempts = fake.routed("message.create")
    assert len(attempts) == 2
    assert {r.json()["uuid"] for r in attempts} == {"turn-2:step-1:call-1"}
    assert len(fake.sent) == 1
    assert result.message_ids == tuple(fake.sent)
    events = await stream_events(bus)
    assert [e.message_id for e in events if isinstance(e, MessageEvent)] == list(result.message_ids)
    # The driver repeating the request gets the same message back, without a third send.
    again = await act(bus, send("turn-2:step-1:call-1", "once only"))
    assert again.outcome == "duplicate"
    assert again.message_ids == result.message_ids
    assert len(fake.routed("message.create")) == 2


async def test_rate_limit_is_honoured(service: FeishuIngress, fake: FakeFeishu, bus: Bus) -> None:
    fake.fail_next("message.create", status=429, reset_s=1)
    result = await act(bus, send("turn-3", "after the limit"))
    assert result.outcome == "done", result
    first, second = fake.routed("message.create")
    assert second.at - first.at >= 1.0  # waited for x-ogw-ratelimit-reset before retrying
    assert len(fake.sent) == 1


async def test_a_rate_limit_reset_beyond_the_deadline_is_a_retryable_failure(
    service: FeishuIngress, fake: FakeFeishu, bus: Bus
) -> None:
    fake.fail_next("message.create", status=429, reset_s=30)
    deadline = time.time_ns() // 1_000_000 + 5000
    result = await act(bus, send("turn-3b", "never", deadline_ms=deadline))
    assert result.outcome == "failed"
    assert result.error is not None
    error = result.error
    assert (error.code, error.retryable, error.retry_after_s) == ("rate_limited", True, 30)
    assert len(fake.routed("message.create")) == 1  # a wait past the deadline is not taken
    assert not fake.sent


async def test_reply_and_long_text_split(service: FeishuIngress, fake: FakeFeishu, bus: Bus) -> None:
    long_text = ("para " * 4000 + "\n\n") * 4
    result = await act(bus, send("turn-4", long_text, reply_to_message_id=FIRST_MESSAGE))
    assert result.outcome == "done", result
    assert len(result.message_ids) >= 2
    replies = fake.routed("message.reply")
    assert len(replies) == 1
    assert replies[0].path.endswith(f"/{FIRST_MESSAGE}/reply")
    uuids = [r.json()["uuid"] for r in replies + fake.routed("message.create")]
    assert uuids[0] == "turn-4"
    assert uuids[1:] == [f"turn-4-{i}" for i in range(1, len(result.message_ids))]
    events = [e for e in await stream_events(bus) if isinstance(e, MessageEvent)]
    assert [e.reply_to_message_id for e in events][:2] == [FIRST_MESSAGE, None]


async def test_reactions_add_remove_and_unknown(service: FeishuIngress, fake: FakeFeishu, bus: Bus) -> None:
    add = ReactAction(
        platform=Platform.FEISHU, idempotency_key="r1", chat_id=CHAT, message_id=FIRST_MESSAGE, emoji="👍"
    )
    assert (await act(bus, add)).outcome == "done"
    assert [e for (_m, e, _o) in fake.reactions.values()] == ["THUMBSUP"]
    remove = add.model_copy(update={"idempotency_key": "r2", "remove": True})
    assert (await act(bus, remove)).outcome == "done"
    assert fake.reactions == {}
    odd = add.model_copy(update={"idempotency_key": "r3", "emoji": "🦜"})
    result = await act(bus, odd)
    assert result.error is not None
    assert result.error.code == "unknown_emoji"
    named = add.model_copy(update={"idempotency_key": "r4", "emoji": "JIAYI"})
    assert (await act(bus, named)).outcome == "done"


async def test_download_image_send_recall_and_ban(service: FeishuIngress, fake: FakeFeishu, bus: Bus) -> None:
    fake.resources["img_v3_abc"] = b"\x89PNG fake image bytes"
    download = DownloadAction(
        platform=Platform.FEISHU,
        idempotency_key="d1",
        chat_id=CHAT,
        message_id=FIRST_MESSAGE,
        file_id="img_v3_abc",
        attachment_type=AttachmentType.PHOTO,
        max_bytes=1024,
    )
    result = await act(bus, download)
    assert result.outcome == "done", result
    assert result.blob_key is not None
    store = await bus.js.object_store(OBJECT_STORE_BLOBS)
    assert (await store.get(result.blob_key)).data == b"\x89PNG fake image bytes"
    assert fake.routed("message.resource")[0].query == {"type": "image"}
    too_big = await act(bus, download.model_copy(update={"idempotency_key": "d2", "max_bytes": 4}))
    assert too_big.error is not None
    assert too_big.error.code == "too_large"

    image = SendImageAction(
        platform=Platform.FEISHU,
        idempotency_key="i1",
        chat_id=CHAT,
        blob_key=result.blob_key,
        mime="image/png",
    )
    sent = await act(bus, image)
    assert sent.outcome == "done", sent
    [image_message] = sent.message_ids
    image_key = json.loads(fake.sent[image_message].content)["image_key"]
    assert fake.images[image_key] == b"\x89PNG fake image bytes"

    recall = DeleteMessageAction(
        platform=Platform.FEISHU, idempotency_key="x1", chat_id=CHAT, message_ids=(image_message,)
    )
    assert (await act(bus, recall)).outcome == "done"
    assert fake.recalled == [image_message]
    deletes = [e for e in await stream_events(bus) if isinstance(e, DeleteEvent)]
    assert [(d.dedup_key, d.message_ids) for d in deletes] == [(f"recall:{image_message}", (image_message,))]

    ban = BanMemberAction(platform=Platform.FEISHU, idempotency_key="b1", chat_id=CHAT, user_id=BOB)
    fake.managed_chats.add(CHAT)
    assert (await act(bus, ban)).outcome == "done"
    assert fake.removed_members == [(CHAT, BOB)]


async def test_a_self_sent_event_the_bus_refuses_is_published_again_and_the_send_stays_done(
    service: FeishuIngress, fake: FakeFeishu, bus: Bus
) -> None:
    """EVENTS gone under the send (its leader elected anew on a cluster): the message is on Feishu, so the
    answer is ``done`` and its event is asked again until the stream takes it, not answered "failed"."""
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(round(seconds, 6))
        await bootstrap(bus.js)  # the stream is back

    service.actions.sleep = sleep
    service.actions.jitter = lambda: 0.0
    await bus.js.delete_stream(STREAM_EVENTS)
    result = await act(bus, send("k-events-away", "still here"))
    assert result.outcome == "done", result
    assert waits == [0.375]  # one retry of the event (0.5 s, -25 %), none of the send
    [message_id] = result.message_ids
    [event] = await stream_events(bus)
    assert isinstance(event, MessageEvent)
    assert (event.message_id, event.is_self_sent) == (message_id, True)
