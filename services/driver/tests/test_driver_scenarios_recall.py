"""Scenario tests on the real bus: ``send_message`` answers with the id the chat log shows for the sent
message, and ``recall_message`` deletes the bot's own messages only (``DeleteMessageAction`` at the
platform). The fake pipeline renders ``m<n>`` ids, so chats that compute aliases are checked within one
wake-up; the pipeline's real rendering is exercised end to end (tests/e2e)."""

from __future__ import annotations

from pathlib import Path

import pytest

from larkbot.canonical.actions import DeleteMessageAction
from larkbot.canonical.aliases import alias_for
from larkbot.canonical.llm import LLMRequest, TextPart, ToolResultMessage
from larkbot.driver.tools.core import tools
from larkbot.runtime.bus import Bus
from larkbot.testkit.driver.harness import CHAT_ID, decide, world
from larkbot.testkit.driver.synthetic import response, segment, tool_call


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"


def _results(request: LLMRequest) -> list[str]:
    return [
        "".join(p.text for p in m.parts if isinstance(p, TextPart))
        for m in request.messages
        if isinstance(m, ToolResultMessage)
    ]


async def test_the_bot_recalls_the_message_it_just_sent_by_its_alias(
    bus: Bus, nats_url: str, db: str
) -> None:
    alias = alias_for(CHAT_ID, "om_1000")  # the fake platform's first message id
    async with world(bus, nats_url, db) as w:
        w.probe_answers.append(decide("send_message", "asked"))
        w.primary_answers.extend(
            [
                response(tool_call(tools.SEND, "s", text="the answer is 41", still_working=True)),
                response(tool_call(tools.RECALL, "r", message_id=alias)),
                response(tool_call(tools.END, "e")),
            ]
        )
        await w.say(1, 0, mentions_me=True, text="what is the answer?")
        await w.tick(1000)
        first, second, third = w.llm.by_purpose("primary")
        assert _results(second)[-1] == f"sent (id {alias})"
        assert _results(third)[-1] == "recalled"
        deletes = [r for r in w.platform.requests if isinstance(r, DeleteMessageAction)]
        assert [(d.chat_id, d.message_ids) for d in deletes] == [(CHAT_ID, ("om_1000",))]
        assert tools.RECALL in [t.name for t in first.tools]


async def test_only_the_bots_own_messages_can_be_recalled(bus: Bus, nats_url: str, db: str) -> None:
    # Canonical ids in the chat log (aliases off), so the fake pipeline's ids resolve across wake-ups.
    async with world(bus, nats_url, db, alias_message_ids=False) as w:
        await w.pipeline.append(
            segment(5, sender="ou_bot", name="Lark", at_ms=w.t0 - 60_000, myself=True, text="an old reply")
        )
        w.probe_answers.append(decide("send_message", "asked to delete"))
        w.primary_answers.extend(
            [
                response(
                    tool_call(tools.RECALL, "r1", message_id="om_1"),
                    tool_call(tools.RECALL, "r2", message_id="om_404"),
                    tool_call(tools.RECALL, "r3", message_id="om_5"),
                ),
                response(tool_call(tools.SEND, "s", text="done")),
            ]
        )
        await w.say(1, 0, mentions_me=True, text="delete this message and your old reply")
        await w.tick(1000)
        _first, second = w.llm.by_purpose("primary")
        assert _results(second) == [
            "error: 'om_1' is not your message; you can recall only your own",
            "error: no message with id 'om_404'",
            "recalled",
        ]
        deletes = [r for r in w.platform.requests if isinstance(r, DeleteMessageAction)]
        assert [d.message_ids for d in deletes] == [("om_5",)]
        assert [d.text for d in w.platform.delivered] == ["done"]
        # With aliases off the send answers with the canonical id.
        w.probe_answers.append(decide("send_message", "asked again"))
        w.primary_answers.extend(
            [
                response(tool_call(tools.SEND, "s", text="again", still_working=True)),
                response(tool_call(tools.END, "e")),
            ]
        )
        await w.say(2, 5000, mentions_me=True, text="say it again")
        await w.tick(6000)
        assert _results(w.llm.by_purpose("primary")[-1])[-1] == "sent (id om_1001)"
