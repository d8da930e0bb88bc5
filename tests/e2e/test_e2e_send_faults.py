"""A platform that fails a send once still gets exactly one visible reply.

The whole system as in ``test_e2e_flows``, with the fakes told to fail the bot's next send: the Bot API
answers one ``sendMessage`` with its JSON 500 (``{"ok":false,"error_code":500,…}``), Feishu answers one
``message.create`` with an HTTP 500 ``{"code":1500,"msg":"internal error"}``, or executes it and answers
after the ingress has stopped waiting (a timeout). The ingress retries under the same ledger entry (Telegram)
or the same ``uuid`` (Feishu) within the turn's deadline; the driver asks once, and the model is never
asked to send again.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests.harness.world import World, world

from larkbot.canonical.actions import SendMessageAction
from larkbot.canonical.names import Platform
from larkbot.ingress_feishu.core.outbound import feishu_uuid
from larkbot.runtime.bus import Bus, connect
from larkbot.runtime.config import NatsSettings
from larkbot.testkit.botscript import BotScript
from larkbot.testkit.payloads import feishu_text, feishu_user, telegram_text
from larkbot.testkit.stack import until

FEISHU_500, FEISHU_TIMEOUT = "oc_e2e_send_500", "oc_e2e_send_timeout"
TELEGRAM_500 = -1001000000501
MEMBER = feishu_user(1)
#: ingress-feishu's per-request timeout in this stack; the fake answers the delayed send after it.
API_TIMEOUT_S = 2.0
REPLY_WAIT_S = 60.0


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@pytest.fixture(scope="module")
async def faults(tmp_path_factory: pytest.TempPathFactory, nats_url: str) -> AsyncIterator[tuple[World, Bus]]:
    bus = await connect(NatsSettings(), "e2e-send-faults", url=nats_url, give_up_after_s=30)
    chats: dict[str, dict[str, Any]] = {
        f"feishu:{FEISHU_500}": {},
        f"feishu:{FEISHU_TIMEOUT}": {},
        f"telegram:{TELEGRAM_500}": {},
    }
    try:
        root = tmp_path_factory.mktemp("e2e-send-faults")
        async with world(
            root, bus, nats_url, BotScript(), chats, feishu={"api_timeout_s": API_TIMEOUT_S}
        ) as w:
            yield w, bus
    finally:
        await bus.close(drain_timeout_s=5)


async def in_context(w: World, platform: Platform, chat: str, message_id: str) -> bool:
    snap = await w.snapshot(platform, chat)
    return any(s.message_id == message_id and s.is_myself for s in snap.segments)


async def test_telegram_answering_one_500_still_gets_exactly_one_reply(faults: tuple[World, Bus]) -> None:
    w, _ = faults
    w.telegram.fail("sendMessage", 500)
    w.telegram.enqueue(
        telegram_text(TELEGRAM_500, 41, "#send tokfail500 are you there?", user=1, date=now_ms() // 1000)
    )

    def replies() -> list[dict[str, Any]]:
        return [m for m in w.telegram.sent if m["chat"]["id"] == TELEGRAM_500]

    await until(lambda: bool(replies()), "the reply after the Bot API's 500", REPLY_WAIT_S)
    [reply] = replies()
    assert "tokfail500" in reply["text"]
    await until(
        lambda: in_context(w, Platform.TELEGRAM, str(TELEGRAM_500), str(reply["message_id"])),
        "the reply's self-sent event in the context",
    )
    # The ingress tried twice (the 500, then the send); the driver asked once; the model sent once.
    tries = [c for c in w.telegram.calls("sendMessage") if int(c["chat_id"]) == TELEGRAM_500]
    assert len(tries) == 2
    assert tries[0]["text"] == tries[1]["text"]
    assert len(w.tap.of_kind("send_message", str(TELEGRAM_500))) == 1
    assert len(replies()) == 1


@pytest.mark.parametrize(
    ("chat", "fault"),
    [(FEISHU_500, "500"), (FEISHU_TIMEOUT, "timeout")],
    ids=["http-500", "timeout"],
)
async def test_feishu_failing_one_send_still_gets_exactly_one_reply(
    faults: tuple[World, Bus], chat: str, fault: str
) -> None:
    w, _ = faults
    if fault == "500":
        w.feishu.fail_next("message.create", status=500, code=1500)
    else:
        w.feishu.delay_next("message.create", API_TIMEOUT_S + 1.5)  # executed, answered too late
    token = f"tok{fault}f"
    envelope = feishu_text(chat, 1, f"#send {token} hello?", sender=MEMBER, create_time_ms=now_ms())
    assert await w.feishu.long_connection.push(envelope) == 200

    def replies() -> list[Any]:
        return [s for s in w.feishu.sent.values() if s.chat_id == chat]

    await until(lambda: bool(replies()), f"the reply after Feishu's {fault}", REPLY_WAIT_S)
    [reply] = replies()
    assert token in reply.content
    await until(
        lambda: in_context(w, Platform.FEISHU, chat, reply.message_id),
        "the reply's self-sent event in the context",
    )
    [action] = w.tap.of_kind("send_message", chat)
    assert isinstance(action, SendMessageAction)
    # Both attempts carried the driver's key as uuid: Feishu could not have shown the reply twice.
    tries = [r for r in w.feishu.routed("message.create") if r.json()["receive_id"] == chat]
    assert len(tries) == 2
    assert {r.json()["uuid"] for r in tries} == {feishu_uuid(action.idempotency_key)}
    assert reply.uuid == feishu_uuid(action.idempotency_key)
    assert len(replies()) == 1
