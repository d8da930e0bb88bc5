"""``ban_spammer`` through the whole system on both platforms: a member reports a spam account, the model
bans it, the ingress removes (Feishu) or bans (Telegram) it and deletes its known messages, and the bot
sends the announcement the tool result gave.

Asserted where it happens: the calls the fake platforms received (which endpoints, which ids; nothing for
a Telegram message older than 48 h), the ``delete`` events by the bot in the pipeline's ``events`` table
and the rendered context, the announcement's text, and that the deletions woke nobody — the only later
wake-up is the one a later message causes.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from tests.harness.world import World, world

from larkbot.canonical.actions import ModerateAction
from larkbot.canonical.llm import TextPart, ToolResultMessage
from larkbot.canonical.names import Platform
from larkbot.llm_gateway.fake import Action, FakeCall, Reply
from larkbot.runtime.bus import Bus
from larkbot.testkit.botscript import acted_after, newest_member_message, reply_text
from larkbot.testkit.payloads import feishu_message_id, feishu_text, feishu_user, telegram_text, telegram_user
from larkbot.testkit.stack import until

FEISHU_CHAT = "oc_e2e_ban"
TG_CHAT = -1001000000009
REPORTER = feishu_user(1)
SPAMMER = feishu_user(66)
TG_SPAMMER = 66
HOUR = 3600
_MESSAGE = re.compile(r'<message id="([^"]*)"[^>]*?(?:/>|>(.*?)</message>)', re.DOTALL)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _text(message: object) -> str:
    parts = getattr(message, "parts", ())
    return "".join(p.text for p in parts if isinstance(p, TextPart))


@dataclass
class BanScript:
    """``#ban`` in the newest member message: the probe activates; the primary bans the author of the
    newest message that says ``SPAM``, then sends the announcement the result gave (the result's last
    line) or ends the turn when there is none. ``#send <token>``: a reply, as in the flows' script."""

    probes: list[FakeCall] = field(default_factory=list)
    primaries: list[FakeCall] = field(default_factory=list)

    def __call__(self, call: FakeCall) -> Action:
        names = {tool.name for tool in call.request.tools}
        if not names:
            return Reply.text("an image")
        seen = newest_member_message(call)
        body = seen.body if seen is not None else ""
        if "decide" in names:
            self.probes.append(call)
            act = "#ban" in body or "#send" in body
            decision = {"should_act": "send_message" if act else "no_action", "reason": "scripted"}
            return Reply.tool_call("decide", decision, call_id="call_decide")
        self.primaries.append(call)
        if seen is None or acted_after(call, seen.index):
            return Reply.tool_call("end_turn", {}, call_id="call_end")
        token = re.search(r"#send\s+(\S+)", body)
        if token is not None:
            text = reply_text(seen.rendered_id, token.group(1))
            return Reply.tool_call("send_message", {"text": text}, call_id="call_send")
        results = [
            _text(m) for m in call.request.messages[seen.index + 1 :] if isinstance(m, ToolResultMessage)
        ]
        if not results:
            spam = [
                m.group(1)
                for t in map(_text, call.request.messages)
                for m in _MESSAGE.finditer(t)
                if "SPAM" in (m.group(2) or "")
            ]
            args = {"message_id": spam[-1], "reason": "one-off solicitation, nothing else"}
            return Reply.tool_call("ban_spammer", args, call_id="call_ban")
        if "Announce it now" in results[-1]:
            announcement = results[-1].splitlines()[-1]
            return Reply.tool_call("send_message", {"text": announcement}, call_id="call_announce")
        return Reply.tool_call("end_turn", {}, call_id="call_end")

    def probes_mentioning(self, needle: str) -> int:
        return sum(needle in call.raw.decode("utf-8", "replace") for call in self.probes)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
async def banning(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, e2e_bus: Bus, nats_url: str
) -> AsyncIterator[tuple[World, BanScript]]:
    postgres = os.environ.get("TEST_DATABASE_URL")
    if request.param == "postgres" and not postgres:
        pytest.skip("PostgreSQL end-to-end runs need TEST_DATABASE_URL")
    script = BanScript()
    chats: dict[str, dict[str, Any]] = {
        f"feishu:{FEISHU_CHAT}": {"ban_spammer_enabled": True},
        f"telegram:{TG_CHAT}": {"ban_spammer_enabled": True},
    }
    root = tmp_path_factory.mktemp(f"e2e-ban-{request.param}")
    async with world(
        root, e2e_bus, nats_url, script, chats, database=request.param, postgres_url=postgres
    ) as w:
        w.feishu.managed_chats.add(FEISHU_CHAT)
        w.telegram.admin(TG_CHAT)
        yield w, script


async def settled(w: World, platform: Platform, chat: str, deleted: set[str], announced: str) -> bool:
    """The deletions and the bot's announcement have both reached the rendered context."""
    snap = await w.snapshot(platform, chat)
    shown = {s.message_id for s in snap.segments}
    return deleted <= {s.message_id for s in snap.segments if s.is_deleted} and announced in shown


async def test_feishu_spam_account_is_removed_its_messages_recalled_and_the_ban_announced(
    banning: tuple[World, BanScript],
) -> None:
    w, script = banning
    spam = [feishu_message_id(FEISHU_CHAT, n) for n in (1, 2)]
    for n, message_id in enumerate(spam, start=1):
        w.feishu.message_chats[message_id] = FEISHU_CHAT
        envelope = feishu_text(
            FEISHU_CHAT, n, f"SPAM cheap followers {n}", sender=SPAMMER, create_time_ms=now_ms()
        )
        assert await w.feishu.long_connection.push(envelope) == 200
    report = feishu_text(FEISHU_CHAT, 3, "#ban that account again", sender=REPORTER, create_time_ms=now_ms())
    assert await w.feishu.long_connection.push(report) == 200

    announcement = "已将一个 spam 账号移出本群，并撤回其 2 条消息。"
    await until(
        lambda: any(s.chat_id == FEISHU_CHAT and announcement in s.content for s in w.feishu.sent.values()),
        "the announcement at the fake Feishu",
    )
    [action] = w.tap.of_kind("moderate", FEISHU_CHAT)
    assert isinstance(action, ModerateAction)
    assert action.user_id == SPAMMER
    assert [m.message_id for m in action.messages] == spam

    [removal] = w.feishu.routed("chat.members.delete")
    assert (removal.method, removal.path) == ("DELETE", f"/open-apis/im/v1/chats/{FEISHU_CHAT}/members")
    assert removal.json() == {"id_list": [SPAMMER]}
    assert [(r.method, r.path) for r in w.feishu.routed("message.recall")] == [
        ("DELETE", f"/open-apis/im/v1/messages/{m}") for m in spam
    ]
    assert w.feishu.removed_members == [(FEISHU_CHAT, SPAMMER)]
    sent = [s for s in w.feishu.sent.values() if s.chat_id == FEISHU_CHAT]
    assert len(sent) == 1
    assert "<at" not in sent[0].content

    await until(
        lambda: settled(w, Platform.FEISHU, FEISHU_CHAT, set(spam), sent[0].message_id),
        "the recalls and the announcement in the context",
    )
    rows = await w.event_rows("feishu", FEISHU_CHAT)
    deletes = [r for r in rows if r.kind == "delete"]
    assert [(r.dedup_key, r.message_id) for r in deletes] == [(f"recall:{m}", m) for m in spam]
    assert all(f'"actor_id":"{w.feishu.bot_open_id}"' in r.payload for r in deletes)

    # The recalls changed the messages in place: no new node, nothing that could wake the bot.
    snap = await w.snapshot(Platform.FEISHU, FEISHU_CHAT)
    assert [seg.message_id for seg in snap.segments] == [
        *spam,
        feishu_message_id(FEISHU_CHAT, 3),
        sent[0].message_id,
    ]
    # The next wake-up is the next message's: no probe between the ban's and its.
    later = feishu_text(FEISHU_CHAT, 4, "#send tokafterfs thanks", sender=REPORTER, create_time_ms=now_ms())
    assert await w.feishu.long_connection.push(later) == 200
    await until(
        lambda: any("tokafterfs" in s.content for s in w.feishu.sent.values()),
        "the reply to the later message",
    )
    assert script.probes_mentioning("tokafterfs") == 1
    assert "tokafterfs" in script.probes[-1].raw.decode()
    assert "#ban that account" in script.probes[-2].raw.decode()


async def test_telegram_spam_account_is_banned_and_only_messages_younger_than_48_h_deleted(
    banning: tuple[World, BanScript],
) -> None:
    w, script = banning
    now = now_ms() // 1000
    spam = {901: now - 1 * HOUR, 902: now - 47 * HOUR, 903: now - 49 * HOUR}
    for message_id, date in spam.items():
        w.telegram.enqueue(
            telegram_text(TG_CHAT, message_id, f"SPAM buy now {message_id}", user=TG_SPAMMER, date=date)
        )
    w.telegram.enqueue(telegram_text(TG_CHAT, 904, "#ban please", user=1, date=now))

    user_id = telegram_user(TG_SPAMMER)["id"]
    await until(
        lambda: any(m["chat"]["id"] == TG_CHAT for m in w.telegram.sent),
        "the announcement at the fake Bot API",
    )
    [sent] = [m for m in w.telegram.sent if m["chat"]["id"] == TG_CHAT]
    # A partial clean-up, said as such; the account is a link labelled "spam 账号", never a name.
    assert sent["text"] == "已封禁 spam 账号。已删除其 2 条消息，另有 1 条未能删除。"
    [link] = sent["entities"]
    assert link["type"] == "text_mention"
    assert link["user"]["id"] == user_id
    assert sent["text"][link["offset"] : link["offset"] + link["length"]] == "spam 账号"

    moderation_calls = ("getChatMember", "banChatMember", "deleteMessage", "deleteMessages")
    calls = [(r.method, r.params) for r in w.telegram.requests if r.method in moderation_calls]
    assert calls == [
        ("getChatMember", {"chat_id": str(TG_CHAT), "user_id": w.telegram.bot_id}),
        ("banChatMember", {"chat_id": str(TG_CHAT), "user_id": user_id}),
        ("deleteMessage", {"chat_id": str(TG_CHAT), "message_id": 901}),
        ("deleteMessage", {"chat_id": str(TG_CHAT), "message_id": 902}),
    ]  # 903 is older than 48 h: Telegram would refuse it, and it was never asked
    assert w.telegram.banned == [(TG_CHAT, user_id)]

    await until(
        lambda: settled(w, Platform.TELEGRAM, str(TG_CHAT), {"901", "902"}, str(sent["message_id"])),
        "the deletions and the announcement in the context",
    )
    snap = await w.snapshot(Platform.TELEGRAM, str(TG_CHAT))
    assert not next(s for s in snap.segments if s.message_id == "903").is_deleted
    rows = await w.event_rows("telegram", str(TG_CHAT))
    deletes = [r for r in rows if r.kind == "delete"]
    assert [(r.dedup_key, r.message_id) for r in deletes] == [
        (f"{TG_CHAT}:delete:{m}", str(m)) for m in (901, 902)
    ]
    assert all(f'"actor_id":"{w.telegram.bot_id}"' in r.payload for r in deletes)

    # In place: no new node. The next wake-up is the next message's: no probe between the ban's and its.
    assert [seg.message_id for seg in snap.segments] == ["901", "902", "903", "904", str(sent["message_id"])]
    w.telegram.enqueue(telegram_text(TG_CHAT, 905, "#send tokaftertg thanks", user=1, date=now_ms() // 1000))
    await until(
        lambda: any("tokaftertg" in m["text"] for m in w.telegram.sent), "the reply to the later message"
    )
    assert script.probes_mentioning("tokaftertg") == 1
    assert "tokaftertg" in script.probes[-1].raw.decode()
    assert "#ban please" in script.probes[-2].raw.decode()
