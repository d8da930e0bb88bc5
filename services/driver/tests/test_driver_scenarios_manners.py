"""Scenario tests on the real bus: a chat's manners as the service wires them from the configuration — a
chatty group where the bot's share of voice stays within its hard limit while a mention is still
answered, and quiet hours in the chat's own offset that hold undirected input but answer a mention."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from larkbot.canonical.context import Segment
from larkbot.driver.tools.core import tools
from larkbot.runtime.bus import Bus
from larkbot.testkit.driver.harness import World, decide, world
from larkbot.testkit.driver.synthetic import response, tool_call

#: Ten messages in the window, the bot at most three of them.
VOICE = {"window_messages": 10, "window_s": 600, "soft_share": 0.2, "hard_share": 0.3}


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"


def _suppressions(reason: str) -> float:
    return REGISTRY.get_sample_value("larkbot_driver_manners_suppressions_total", {"reason": reason}) or 0.0


def _messages(w: World) -> list[Segment]:
    return [s for s in w.chat.context.segments if s.node_type == "message"]


async def _chatter(w: World, n: int, at: int, **flags: object) -> bool:
    """Message ``n`` from one of three members at ``t0 + at``; whether the bot was asked about it."""
    probes = len(w.requests("probe"))
    await w.say(n, at, sender=f"ou_{n % 3}", name=f"Member {n % 3}", text=f"chatter {n}", **flags)
    await w.tick(at + 2000)
    await w.synced()
    return len(w.requests("probe")) > probes


async def test_a_chatty_group_keeps_the_bots_share_under_the_hard_limit_and_a_mention_is_answered(
    bus: Bus, nats_url: str, db: str
) -> None:
    held = _suppressions("share_of_voice")
    async with world(bus, nats_url, db, share_of_voice=VOICE) as w:
        # A model that would answer everything: only the gate keeps the bot's share down.
        w.probe_answers.extend(decide("send_message", "join in") for _ in range(40))
        w.primary_answers.extend(response(tool_call(tools.SEND, "s", text=f"me too {k}")) for k in range(40))
        probed = [await _chatter(w, n, n * 10_000) for n in range(1, 21)]
        messages = _messages(w)
        for start in range(len(messages) - 9):
            assert sum(s.is_myself for s in messages[start : start + 10]) <= 3
        assert sum(s.is_myself for s in messages) >= 5  # it took part, within its share
        assert not all(probed)
        assert _suppressions("share_of_voice") - held == probed.count(False)

        # Until an undirected message is held; a mention right after it is still answered.
        n = 21
        while await _chatter(w, n, n * 10_000):
            n += 1
        sent = len(w.platform.delivered)
        assert await _chatter(w, n + 1, (n + 1) * 10_000, mentions_me=True)
        assert len(w.platform.delivered) == sent + 1
        probe = w.requests("probe")[-1]
        assert "3 of the last 10 (soft limit 20%, hard limit 30%)" in str(probe.messages[-1])


async def test_quiet_hours_in_the_chats_offset_hold_chatter_and_answer_a_mention(
    bus: Bus, nats_url: str, db: str
) -> None:
    held = _suppressions("quiet_hours")
    # The world's clock starts at 08:00 UTC: 16:00 in the deployment's +08:00, inside the chat's quiet
    # hours at its own +00:00 (past midnight, up to 08:30).
    quiet = {"start": "23:00", "end": "08:30"}
    async with world(bus, nats_url, db, utc_offset_min=0, quiet_hours=quiet) as w:
        assert not await _chatter(w, 1, 0)
        assert w.llm.requests == []
        assert w.chat.marks.processed_until_ms == w.t0  # held input is handled: not answered later
        w.probe_answers.append(decide("send_message", "asked at night"))
        w.primary_answers.append(response(tool_call(tools.SEND, "s", text="shh, here")))
        assert await _chatter(w, 2, 10_000, mentions_me=True)
        assert w.platform.sent_in(w.chat_id) == ["shh, here"]
        probe = w.requests("probe")[-1]
        assert "Quiet hours in this chat (23:00–08:30 local time)" in str(probe.messages[-1])
    assert _suppressions("quiet_hours") == held + 1
