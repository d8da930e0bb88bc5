"""Direct chats through the whole system: a person's ``private`` memory is saved in their direct chat with
the bot and recalled there — on Feishu (a ``p2p`` chat configured with ``direct_with``) and on Telegram (a
private chat, whose id is the person's) — while a group they are in never sees it, and a direct chat the
configuration does not name is dropped at the ingress and counted.

The fake model follows two markers in the newest member message:

- ``#remember <person> <fact>``: the probe says ``send_message``; the primary saves ``<fact>`` about
  ``<person>`` (scope ``private``, importance ``high``, the message as evidence), then sends
  ``noted: <the tool's result>``;
- ``#ask``: the probe says ``send_message``; the primary sends ``facts: <the facts of its late-binding
  memory block>`` (``none`` without one).
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from tests.harness.world import World, world

from larkbot.canonical.llm import TextPart, UserMessage
from larkbot.llm_gateway.fake import Action, FakeCall, Reply
from larkbot.runtime.bus import Bus
from larkbot.testkit.botscript import acted_after, newest_member_message, tool_results_after
from larkbot.testkit.payloads import feishu_message_id, feishu_text, feishu_user, telegram_user
from larkbot.testkit.stack import until

PERSON = feishu_user(1)
DIRECT = "oc_e2e_direct_person1"
GROUP = "oc_e2e_direct_group"
STRANGER = "oc_e2e_direct_stranger"
TG_PERSON = telegram_user(7)
TG_DIRECT = TG_PERSON["id"]
TG_STRANGER = telegram_user(8)

_MARK = re.compile(r"#(remember|ask)\b\s*(\S*)\s*(.*)", re.DOTALL)
_FACT = re.compile(r"<fact [^>]*>(.*?)</fact>")


@dataclass
class MemoryScript:
    """The model of this module (see the module docstring); ``probes`` records every probe call."""

    probes: list[FakeCall] = field(default_factory=list)

    def __call__(self, call: FakeCall) -> Action:
        names = {tool.name for tool in call.request.tools}
        if not names:
            return Reply.text("an image")
        seen = newest_member_message(call)
        mark = _MARK.search(seen.body) if seen is not None else None
        if "decide" in names:
            self.probes.append(call)
            decision = "send_message" if mark else "no_action"
            return Reply.tool_call(
                "decide", {"should_act": decision, "reason": "scripted"}, call_id="c_decide"
            )
        if seen is None or mark is None or acted_after(call, seen.index):
            return Reply.tool_call("end_turn", {}, call_id="c_end")
        if mark.group(1) == "remember":
            results = tool_results_after(call, seen.index)
            if results:
                return Reply.tool_call("send_message", {"text": f"noted: {results[-1]}"}, call_id="c_send")
            save = {
                "person": mark.group(2),
                "content": mark.group(3).strip(),
                "evidence_message_ids": [seen.rendered_id],
                "importance": "high",
                "scope": "private",
            }
            return Reply.tool_call("memory_save", save, call_id="c_save")
        last = call.request.messages[-1]
        shown = (
            "".join(p.text for p in last.parts if isinstance(p, TextPart))
            if isinstance(last, UserMessage)
            else ""
        )
        facts = "; ".join(_FACT.findall(shown)) or "none"
        return Reply.tool_call("send_message", {"text": f"facts: {facts}"}, call_id="c_send")

    def probed(self, needle: str) -> int:
        return sum(needle in call.raw.decode("utf-8", "replace") for call in self.probes)


@pytest.fixture(scope="module")
async def direct(
    tmp_path_factory: pytest.TempPathFactory, e2e_bus: Bus, nats_url: str
) -> AsyncIterator[tuple[World, MemoryScript]]:
    script = MemoryScript()
    chats: dict[str, dict[str, Any]] = {
        f"feishu:{DIRECT}": {"direct_with": PERSON},
        f"feishu:{GROUP}": {},
        f"telegram:{TG_DIRECT}": {},
    }
    async with world(tmp_path_factory.mktemp("e2e-direct"), e2e_bus, nats_url, script, chats) as w:
        yield w, script


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def feishu_direct_text(chat_id: str, n: int, text: str, *, sender: str) -> dict[str, Any]:
    """A message in a direct chat, as Feishu delivers it: ``chat_type`` ``p2p``, the chat's ``oc_`` id."""
    envelope = feishu_text(chat_id, n, text, sender=sender, create_time_ms=now_ms())
    envelope["event"]["message"]["chat_type"] = "p2p"
    return envelope


def telegram_private_text(user: dict[str, Any], message_id: int, text: str) -> dict[str, Any]:
    """An ``Update`` (without ``update_id``) of a private chat: the chat is the user."""
    chat = {
        "id": user["id"],
        "type": "private",
        "first_name": user["first_name"],
        "username": user["username"],
    }
    message = {"message_id": message_id, "from": user, "chat": chat, "date": now_ms() // 1000, "text": text}
    return {"message": copy.deepcopy(message)}


def feishu_replies(w: World, chat_id: str) -> list[str]:
    return [s.content for s in w.feishu.sent.values() if s.chat_id == chat_id]


def telegram_replies(w: World, chat_id: int) -> list[str]:
    return [m["text"] for m in w.telegram.sent if m["chat"]["id"] == chat_id]


async def push(w: World, envelope: dict[str, Any]) -> None:
    assert await w.feishu.long_connection.push(envelope) == 200


async def test_a_private_memory_is_saved_and_recalled_in_a_feishu_direct_chat(
    direct: tuple[World, MemoryScript],
) -> None:
    w, _ = direct
    await push(w, feishu_direct_text(DIRECT, 1, f"#remember {PERSON} likes green tea", sender=PERSON))
    await until(lambda: len(feishu_replies(w, DIRECT)) == 1, "the reply to the fact in the direct chat")
    assert "noted: saved memory" in feishu_replies(w, DIRECT)[0]
    assert "(high, private)" in feishu_replies(w, DIRECT)[0]

    # The same person in a group: the private memory stays out of it.
    await push(w, feishu_text(GROUP, 1, "#ask", sender=PERSON, create_time_ms=now_ms()))
    await until(lambda: len(feishu_replies(w, GROUP)) == 1, "the answer in the group")
    assert "facts: none" in feishu_replies(w, GROUP)[0]

    # Back in the direct chat it is recalled.
    await push(w, feishu_direct_text(DIRECT, 2, "#ask", sender=PERSON))
    await until(lambda: len(feishu_replies(w, DIRECT)) == 2, "the answer in the direct chat")
    assert "facts: likes green tea" in feishu_replies(w, DIRECT)[1]

    # The pipeline recorded the chat like a group: the person's two messages and the bot's two replies.
    async def recorded() -> bool:
        return len(await w.event_rows("feishu", DIRECT)) >= 4

    await until(recorded, "the direct chat's messages in the pipeline")
    rows = await w.event_rows("feishu", DIRECT)
    assert len(rows) == 4
    assert {feishu_message_id(DIRECT, 1), feishu_message_id(DIRECT, 2)} < {r.message_id for r in rows}


async def test_a_private_memory_is_saved_and_recalled_in_a_telegram_private_chat(
    direct: tuple[World, MemoryScript],
) -> None:
    w, _ = direct
    w.telegram.enqueue(telegram_private_text(TG_PERSON, 1, f"#remember {TG_DIRECT} drinks black coffee"))
    await until(lambda: len(telegram_replies(w, TG_DIRECT)) == 1, "the reply to the fact in the private chat")
    assert "(high, private)" in telegram_replies(w, TG_DIRECT)[0]
    w.telegram.enqueue(telegram_private_text(TG_PERSON, 3, "#ask"))
    await until(lambda: len(telegram_replies(w, TG_DIRECT)) == 2, "the answer in the private chat")
    assert "facts: drinks black coffee" in telegram_replies(w, TG_DIRECT)[1]


async def test_direct_chats_the_configuration_does_not_name_are_dropped_and_counted(
    direct: tuple[World, MemoryScript],
) -> None:
    w, script = direct
    feishu_before = await w.metric(
        "ingress-feishu", "larkbot_ingress_feishu_events_total", outcome="dropped_private_chat"
    )
    telegram_before = await w.metric(
        "ingress-telegram", "larkbot_telegram_updates_total", outcome="dropped", detail="chat_not_configured"
    )
    await push(w, feishu_direct_text(STRANGER, 1, "#ask tokstrangerf", sender=feishu_user(2)))
    w.telegram.enqueue(telegram_private_text(TG_STRANGER, 1, "#ask tokstrangert"))

    async def both_counted() -> bool:
        feishu = await w.metric(
            "ingress-feishu", "larkbot_ingress_feishu_events_total", outcome="dropped_private_chat"
        )
        telegram = await w.metric(
            "ingress-telegram",
            "larkbot_telegram_updates_total",
            outcome="dropped",
            detail="chat_not_configured",
        )
        return feishu == feishu_before + 1 and telegram == telegram_before + 1

    await until(both_counted, "both drops counted")
    assert await w.event_rows("feishu", STRANGER) == []
    assert await w.event_rows("telegram", str(TG_STRANGER["id"])) == []
    assert not feishu_replies(w, STRANGER)
    assert not telegram_replies(w, TG_STRANGER["id"])
    assert script.probed("tokstranger") == 0
