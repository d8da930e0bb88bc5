"""The service against the fake Bot API and a real JetStream: inbound order, dedup, dead letters,
identity; outbound sends with the ledger, pacing and 429s; the other actions; webhook mode."""

from __future__ import annotations

import asyncio
import copy
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY
from pydantic import SecretStr

from larkbot.canonical.actions import (
    ActionRequest,
    ActionResult,
    BanMemberAction,
    CustomEmojiAction,
    DeleteMessageAction,
    DownloadAction,
    ReactAction,
    SendMessageAction,
    TypingAction,
)
from larkbot.canonical.codec import decode, decode_as
from larkbot.canonical.content import AttachmentType, StickerFormat
from larkbot.canonical.events import EVENT_ADAPTER, BotIdentity, CanonicalEvent, DeleteEvent, MessageEvent
from larkbot.canonical.names import (
    HEADER_DL_REASON,
    KV_IDENTITY,
    OBJECT_STORE_BLOBS,
    STREAM_DEAD_LETTER,
    STREAM_EVENTS,
    Platform,
    Service,
    actions_subject,
)
from larkbot.ingress_telegram.adapters.link import Receiving
from larkbot.ingress_telegram.adapters.webhook import WebhookReceiver
from larkbot.ingress_telegram.app import IngressTelegramService, TelegramOptions
from larkbot.ingress_telegram.fake import FakeBotApi, parse_html
from larkbot.runtime.bootstrap import bootstrap
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LarkbotConfig, TelegramSettings
from larkbot.runtime.service import ServiceContext, built
from larkbot.testkit.ingress_telegram.service import receiving

FIXTURES = Path(__file__).parent / "fixtures" / "updates"
GROUP = "-1001234567890"
TIMEOUT_S = 30.0


def fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return data


async def until(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def stream_messages(bus: Bus, stream: str) -> list[tuple[bytes, dict[str, str]]]:
    info = await bus.js.stream_info(stream)
    out = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        if info.state.messages == 0:
            break
        msg = await bus.js.get_msg(stream, seq)
        out.append((msg.data or b"", dict(msg.headers or {})))
    return out


async def events(bus: Bus) -> list[CanonicalEvent]:
    return [
        decode_as(data, EVENT_ADAPTER, headers) for data, headers in await stream_messages(bus, STREAM_EVENTS)
    ]


async def wait_events(bus: Bus, count: int) -> list[CanonicalEvent]:
    async def enough() -> bool:
        return len(await events(bus)) >= count

    await until(enough, f"{count} events")
    return await events(bus)


def make_config(fake: FakeBotApi, **telegram: Any) -> LarkbotConfig:
    return LarkbotConfig(
        telegram=TelegramSettings(bot_token=SecretStr(fake.token), api_base=fake.base_url, **telegram),
        chats={"default": {}, f"telegram:{GROUP}": {}, "telegram:111111111": {}},  # type: ignore[dict-item]
        utc_offset_min=480,
    )


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotApi]:
    server = FakeBotApi()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@asynccontextmanager
async def service(
    nats_url: str, fake: FakeBotApi, **telegram: Any
) -> AsyncIterator[tuple[Receiving, ServiceContext]]:
    config = make_config(fake, **telegram)
    options = replace(TelegramOptions.from_settings(config.telegram), webhook_port=0, polling_timeout_s=1)
    recipe = IngressTelegramService(config, options)
    async with built(Service.INGRESS_TELEGRAM, recipe, config, nats_url=nats_url) as up:
        yield await receiving(up, TIMEOUT_S), up.ctx


async def act(bus: Bus, action: ActionRequest) -> ActionResult:
    return await bus.request(actions_subject("telegram"), action, ActionResult, timeout_s=TIMEOUT_S)


def send(text: str, key: str = "turn-1:step-1", **extra: Any) -> SendMessageAction:
    return SendMessageAction(
        platform=Platform.TELEGRAM, idempotency_key=key, chat_id=GROUP, text=text, **extra
    )


# -- inbound -------------------------------------------------------------------------------------------
async def test_updates_arrive_in_order_once_with_reactions_and_members(
    bus: Bus, nats_url: str, fake: FakeBotApi
) -> None:
    message, edit = fixture("message_text_plain"), fixture("edited_message")
    reaction, joined = fixture("message_reaction"), fixture("chat_member_joined")
    async with service(nats_url, fake):
        for update in (message, edit, reaction, joined):
            fake.enqueue(copy.deepcopy(update))
        got = await wait_events(bus, 6)
        fake.repeat(copy.deepcopy(message))  # the platform delivers it again (a crash before confirming)
        later = fixture("message_private")
        del later["update_id"]  # the fake numbers it after everything already confirmed
        fake.enqueue(later)
        got = await wait_events(bus, 7)
        await until(lambda: _true(fake.pending_updates == 0), "updates confirmed")
    kinds = [(e.kind, getattr(e, "message_id", None)) for e in got]
    assert kinds == [
        ("message", "501"),
        ("edit", "501"),
        ("reaction", "501"),
        ("reaction", "501"),
        ("reaction", "501"),
        ("service", None),
        ("message", "12"),
    ]
    assert fake.calls("getUpdates")[0]["allowed_updates"] == [
        "message",
        "edited_message",
        "message_reaction",
        "chat_member",
        "my_chat_member",
    ]


async def _true(value: bool) -> bool:
    return value


async def test_unknown_and_malformed_updates_are_dead_lettered_and_polling_goes_on(
    bus: Bus, nats_url: str, fake: FakeBotApi
) -> None:
    async with service(nats_url, fake):
        fake.enqueue(fixture("unsupported_message_kind"))
        broken = fixture("message_text_plain")
        broken["message"]["chat"] = "not an object"  # aiogram cannot parse it either
        broken["update_id"] += 10_000
        fake.enqueue(broken)
        fake.enqueue({**fixture("message_private"), "update_id": broken["update_id"] + 1})
        await wait_events(bus, 1)

        async def two_dead() -> bool:
            return len(await stream_messages(bus, STREAM_DEAD_LETTER)) >= 2

        await until(two_dead, "dead letters")
    dead = await stream_messages(bus, STREAM_DEAD_LETTER)
    reasons = sorted(headers[HEADER_DL_REASON] for _, headers in dead)
    assert reasons == ["malformed", "unsupported"]
    assert json.loads(dead[0][0])["update_id"] == fixture("unsupported_message_kind")["update_id"]
    (event,) = await events(bus)
    assert isinstance(event, MessageEvent)
    assert event.chat_id == "111111111"


async def test_identity_is_published_and_privacy_mode_is_reported(
    bus: Bus, nats_url: str, fake: FakeBotApi
) -> None:
    fake.can_read_all_group_messages = False
    async with service(nats_url, fake) as (app, ctx):
        ready, checks = await ctx.ops.readiness()
        assert app.privacy_mode
    assert ready
    assert "privacy mode on" in str(checks["telegram"]["detail"])
    kv = await bus.js.key_value(KV_IDENTITY)
    identity = decode((await kv.get("telegram")).value or b"", BotIdentity)
    assert (identity.bot_id, identity.username) == ("7000000001", "larkbot_test_bot")


# -- outbound ------------------------------------------------------------------------------------------
async def test_send_is_delivered_once_and_the_self_event_has_the_real_id(
    bus: Bus, nats_url: str, fake: FakeBotApi
) -> None:
    async with service(nats_url, fake):
        first = await act(
            bus, send('**Hello** <mention uid="222222222">@Bob</mention>', reply_to_message_id="501")
        )
        again = await act(
            bus, send('**Hello** <mention uid="222222222">@Bob</mention>', reply_to_message_id="501")
        )
        (event,) = await wait_events(bus, 1)
    assert (first.outcome, again.outcome) == ("done", "duplicate")
    assert first.message_ids == again.message_ids == ("1001",)
    assert len(fake.sent) == 1
    params = fake.calls("sendMessage")[0]
    assert params["text"] == '<b>Hello</b> <a href="tg://user?id=222222222">@Bob</a>'
    assert params["reply_parameters"]["message_id"] == 501
    assert isinstance(event, MessageEvent)
    assert (event.message_id, event.is_self_sent, event.sender.id) == ("1001", True, "7000000001")
    assert event.reply_to_message_id == "501"
    assert event.content.plain_text() == "Hello @Bob"


async def test_rate_limit_is_honoured(bus: Bus, nats_url: str, fake: FakeBotApi) -> None:
    fake.fail("sendMessage", 429, retry_after=1)
    async with service(nats_url, fake):
        result = await act(bus, send("hi"))
    assert result.outcome == "done"
    calls = [r for r in fake.requests if r.method == "sendMessage"]
    assert len(calls) == 2
    assert calls[1].at - calls[0].at >= 1.0  # waited retry_after before trying again
    assert len(fake.sent) == 1


async def test_unknown_outcome_is_never_repeated(bus: Bus, nats_url: str, fake: FakeBotApi) -> None:
    fake.lose_answer("sendMessage")  # Telegram posted it, the answer was lost
    async with service(nats_url, fake):
        first = await act(bus, send("maybe"))
        again = await act(bus, send("maybe"))
    assert (first.outcome, again.outcome) == ("unknown", "unknown")
    assert first.error is not None
    assert first.error.code == "outcome_unknown"
    assert len(fake.sent) == 1
    assert len(fake.calls("sendMessage")) == 1


async def test_refused_send_can_be_retried_and_resumes_after_confirmed_parts(
    bus: Bus, nats_url: str, fake: FakeBotApi
) -> None:
    text = "\n\n".join(["para " * 600] * 2)  # two messages
    async with service(nats_url, fake):
        fake.fail("sendMessage", 403)
        refused = await act(bus, send(text, key="k-long"))
        assert refused.outcome == "failed"
        assert refused.error is not None
        assert refused.error.code == "forbidden"
        retried = await act(bus, send(text, key="k-long"))
        await wait_events(bus, 2)
    assert retried.outcome == "done"
    assert retried.message_ids == ("1001", "1002")
    assert len(fake.sent) == 2
    for message in fake.sent:
        assert len(message["text"]) <= 4096


async def test_other_actions(bus: Bus, nats_url: str, fake: FakeBotApi) -> None:
    fake.add_file("BQACAgIAAxkBAAIBdoc", b"%PDF-1.4 report", "documents/file_1.pdf")
    fake.add_file("big", b"x" * 2048, "documents/big.bin")
    common: dict[str, Any] = {"platform": Platform.TELEGRAM, "chat_id": GROUP}
    async with service(nats_url, fake):
        react = await act(bus, ReactAction(idempotency_key="r1", message_id="501", emoji="👍", **common))
        unreact = await act(
            bus, ReactAction(idempotency_key="r2", message_id="501", emoji="👍", remove=True, **common)
        )
        typing = await act(bus, TypingAction(idempotency_key="t1", **common))
        ban = await act(bus, BanMemberAction(idempotency_key="b1", user_id="333333333", **common))
        delete = await act(
            bus, DeleteMessageAction(idempotency_key="d1", message_ids=("530", "531"), **common)
        )
        download = await act(
            bus,
            DownloadAction(
                idempotency_key="f1",
                file_id="BQACAgIAAxkBAAIBdoc",
                attachment_type=AttachmentType.DOCUMENT,
                max_bytes=1024,
                **common,
            ),
        )
        too_large = await act(
            bus,
            DownloadAction(
                idempotency_key="f2",
                file_id="big",
                attachment_type=AttachmentType.DOCUMENT,
                max_bytes=1024,
                **common,
            ),
        )
        (deleted,) = await wait_events(bus, 1)
    assert [r.outcome for r in (react, unreact, typing, ban, delete, download)] == ["done"] * 6
    assert fake.calls("setMessageReaction")[0]["reaction"] == [{"type": "emoji", "emoji": "👍"}]
    assert fake.reactions[(int(GROUP), 501)] == []
    assert fake.calls("sendChatAction")[0]["action"] == "typing"
    assert fake.banned == [(int(GROUP), 333333333)]
    assert fake.deleted == [(int(GROUP), 530), (int(GROUP), 531)]
    assert isinstance(deleted, DeleteEvent)
    assert deleted.message_ids == ("530", "531")
    store = await bus.js.object_store(OBJECT_STORE_BLOBS)
    assert download.blob_key is not None
    assert (await store.get(download.blob_key)).data == b"%PDF-1.4 report"
    assert too_large.error is not None
    assert too_large.error.code == "too_large"


async def test_custom_emoji_are_resolved_to_their_stickers(bus: Bus, nats_url: str, fake: FakeBotApi) -> None:
    """``getCustomEmojiStickers`` through the ingress: the ids Telegram knows come back with the sticker's
    file id, set name, emoji and format; the sticker's bytes then download like any file."""
    file_id = fake.add_custom_emoji("5368324170671202286", b"RIFF-webp", emoji="🦆", set_name="DuckEmoji")
    fake.add_custom_emoji("5368324170671202287", b"\x1f\x8b-tgs", is_animated=True)
    common: dict[str, Any] = {"platform": Platform.TELEGRAM, "chat_id": GROUP}
    async with service(nats_url, fake):
        resolved = await act(
            bus,
            CustomEmojiAction(
                idempotency_key="e1",
                emoji_ids=("5368324170671202286", "999", "5368324170671202287"),
                **common,
            ),
        )
        download = await act(
            bus,
            DownloadAction(
                idempotency_key="e2",
                file_id=file_id,
                attachment_type=AttachmentType.STICKER,
                max_bytes=1024,
                **common,
            ),
        )
    assert resolved.ok
    assert fake.calls("getCustomEmojiStickers")[0]["custom_emoji_ids"] == [
        "5368324170671202286",
        "999",
        "5368324170671202287",
    ]
    duck, animated = resolved.custom_emoji
    assert (duck.emoji_id, duck.file_id, duck.set_name, duck.emoji) == (
        "5368324170671202286",
        file_id,
        "DuckEmoji",
        "🦆",
    )
    assert duck.format == StickerFormat.STATIC
    assert (animated.emoji_id, animated.set_name, animated.format) == (
        "5368324170671202287",
        None,
        StickerFormat.ANIMATED,
    )
    store = await bus.js.object_store(OBJECT_STORE_BLOBS)
    assert download.blob_key is not None
    assert (await store.get(download.blob_key)).data == b"RIFF-webp"


async def test_actions_answer_not_configured_without_telegram(bus: Bus, nats_url: str) -> None:
    config = LarkbotConfig()
    async with built(
        Service.INGRESS_TELEGRAM, IngressTelegramService.of(config), config, nats_url=nats_url
    ) as up:
        ctx = up.ctx
        # Both connections round-trip the server first: the service's subscription and this client's
        # request then meet on a server that has processed everything either sent before.
        await ctx.bus.flush()
        await bus.flush()
        result = await act(bus, send("hi"))
    assert result.error is not None
    assert result.error.code == "not_configured"


# -- webhook -------------------------------------------------------------------------------------------
async def test_webhook_checks_the_secret_and_stores_before_answering(
    bus: Bus, nats_url: str, fake: FakeBotApi
) -> None:
    async with service(nats_url, fake, mode="webhook", webhook_secret=SecretStr("s3cret-token")) as (app, _):
        assert isinstance(app.receiver, WebhookReceiver)
        url = f"http://127.0.0.1:{app.receiver.bound_port}/telegram/webhook"
        assert await fake.post_webhook(url, fixture("message_text_plain"), "wrong") == 403
        assert await fake.post_webhook(url, fixture("message_text_plain"), None) == 403
        assert await events(bus) == []
        assert await fake.post_webhook(url, fixture("message_text_plain"), "s3cret-token") == 200
        stored = await events(bus)  # already stored when the 200 came back
        assert await fake.post_webhook(url, fixture("edited_message"), "s3cret-token") == 200
        assert await fake.post_webhook(url, fixture("unsupported_callback_query"), "s3cret-token") == 200
    assert [e.kind for e in stored] == ["message"]
    assert [e.kind for e in await events(bus)] == ["message", "edit"]
    assert len(await stream_messages(bus, STREAM_DEAD_LETTER)) == 1
    assert fake.calls("getUpdates") == []


async def test_a_dead_letter_not_written_leaves_the_update_unconfirmed_until_it_is(
    bus: Bus, nats_url: str, fake: FakeBotApi
) -> None:
    """No ``DEADLETTER`` stream answers: the webhook does not answer the unsupported update (Telegram
    neither gets its 200 nor moves on) and its record is tried again; once the stream is back, the record
    is written and the update answered 200."""
    retries = REGISTRY.get_sample_value("larkbot_telegram_publish_retries_total") or 0.0
    async with service(nats_url, fake, mode="webhook", webhook_secret=SecretStr("s3cret-token")) as (app, _):
        assert isinstance(app.receiver, WebhookReceiver)
        url = f"http://127.0.0.1:{app.receiver.bound_port}/telegram/webhook"
        await bus.js.delete_stream(STREAM_DEAD_LETTER)
        answer = asyncio.create_task(
            fake.post_webhook(url, fixture("unsupported_callback_query"), "s3cret-token")
        )

        async def retried() -> bool:
            now = REGISTRY.get_sample_value("larkbot_telegram_publish_retries_total") or 0.0
            return now > retries

        await until(retried, "the dead-letter record to be tried again")
        assert not answer.done()
        await bootstrap(bus.js)
        assert await answer == 200
    [(data, headers)] = await stream_messages(bus, STREAM_DEAD_LETTER)
    assert headers[HEADER_DL_REASON] == "unsupported"
    assert headers["Larkbot-Dead-Letter-Stream"] == "telegram"
    assert headers["Larkbot-Dead-Letter-Consumer"] == "ingress-telegram"
    update_id = fixture("unsupported_callback_query")["update_id"]
    assert headers["Nats-Msg-Id"] == f"dl:telegram:ingress-telegram:update:{update_id}"
    assert json.loads(data)["update_id"] == update_id


def test_fake_parses_what_it_returns() -> None:
    assert parse_html("<b>a</b>") == ("a", [{"offset": 0, "length": 1, "type": "bold"}])
