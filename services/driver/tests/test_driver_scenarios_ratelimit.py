"""Scenario tests on the real bus: the rate limits as the service wires them from the configuration — a
member hitting the limit and cooling down on the world's clock while a maintainer bypasses it, their held
message in the rendered context and no primary turn run for it; and one member's count shared by two
driver replicas, each driving one of the two chats the member writes in."""

from __future__ import annotations

from prometheus_client import REGISTRY

from larkbot.canonical.names import partition_of
from larkbot.driver.tools.core import tools
from larkbot.runtime.bus import Bus
from larkbot.testkit.driver.harness import PLATFORM, World, decide, world
from larkbot.testkit.driver.synthetic import response, tool_call

MINUTE = 60_000
BOSS = "ou_boss"
#: Two wake-ups in ten minutes, then ten minutes of cooldown.
PERSON = {"max_wakeups": 2, "window_s": 600, "cooldown_s": 600}


def _limited(scope: str, reason: str) -> float:
    labels = {"scope": scope, "reason": reason}
    return REGISTRY.get_sample_value("larkbot_driver_rate_limited_total", labels) or 0.0


def _held() -> float:
    labels = {"reason": "rate_limit"}
    return REGISTRY.get_sample_value("larkbot_driver_manners_suppressions_total", labels) or 0.0


async def _message(
    w: World, n: int, at: int, sender: str, *, chat_id: str | None = None, mentions_me: bool = False
) -> bool:
    """Message ``n`` from ``sender`` at ``t0 + at`` and its wake-up; whether the probe was asked."""
    probes = len(w.requests("probe", chat_id))
    text = f"@Lark message {n}" if mentions_me else f"message {n}"
    await w.say(n, at, chat_id=chat_id, sender=sender, name=sender, text=text, mentions_me=mentions_me)
    await w.tick(at + 2000)
    await w.synced(chat_id)
    return len(w.requests("probe", chat_id)) > probes


async def test_a_member_hitting_the_limit_cools_down_while_a_maintainer_bypasses_it(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    window, cooldown, held = _limited("person", "window"), _limited("person", "cooldown"), _held()
    async with world(bus, nats_url, database_url, maintainers=[BOSS], rate_limit={"person": PERSON}) as w:
        assert await _message(w, 1, 0, "ou_a")
        assert await _message(w, 2, 10_000, "ou_a")
        # The third wake-up in ten minutes, a mention: held before the probe, no model call at all.
        asked = len(w.llm.requests)
        assert not await _message(w, 3, 20_000, "ou_a", mentions_me=True)
        assert len(w.llm.requests) == asked
        # Its message is in the rendered context, as always, and handled: not answered later.
        assert "@Lark message 3" in w.chat.context.segments[-1].xml
        assert w.chat.marks.processed_until_ms == w.t0 + 20_000
        assert w.platform.delivered == []
        # A maintainer wakes the bot as often as they write.
        w.probe_answers.append(decide("send_message", "the maintainer asks"))
        w.primary_answers.append(response(tool_call(tools.SEND, "s", text="yes, boss")))
        for n, at in ((4, 30_000), (5, 40_000), (6, 50_000)):
            assert await _message(w, n, at, BOSS, mentions_me=True)
        assert w.platform.sent_in(w.chat_id) == ["yes, boss"]
        # Still cooling down five minutes later; ten minutes after the refusal a mention is answered.
        assert not await _message(w, 7, 5 * MINUTE, "ou_a", mentions_me=True)
        w.probe_answers.append(decide("send_message", "asked"))
        w.primary_answers.append(response(tool_call(tools.SEND, "s", text="back to you")))
        assert await _message(w, 8, 20_000 + 2000 + 10 * MINUTE, "ou_a", mentions_me=True)
        assert w.platform.sent_in(w.chat_id) == ["yes, boss", "back to you"]
        probe = w.requests("probe")[-1]
        assert "@Lark message 7" in str(probe.messages)  # the held mention, in what the probe judged
    assert _limited("person", "window") == window + 1
    assert _limited("person", "cooldown") == cooldown + 1
    assert _held() == held + 2


def _chats_in_both_halves() -> tuple[str, str]:
    """A chat in an even partition (replica "a" drives it) and one in an odd one ("b")."""
    chats = [f"oc_rate{i}" for i in range(200)]
    even = next(c for c in chats if partition_of(PLATFORM.value, c) % 2 == 0)
    odd = next(c for c in chats if partition_of(PLATFORM.value, c) % 2 == 1)
    return even, odd


async def test_two_replicas_share_one_members_count_across_the_chats_they_drive(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    here, there = _chats_in_both_halves()
    limit = {"max_wakeups": 3, "window_s": 600, "cooldown_s": 600}
    async with world(
        bus, nats_url, database_url, chats=(here, there), replicas=("a", "b"), rate_limit={"person": limit}
    ) as w:
        assert w.owner(here) is w.replicas["a"][0]
        assert w.owner(there) is w.replicas["b"][0]
        # Three wake-ups between the two chats, each counted by the replica driving it.
        assert await _message(w, 1, 0, "ou_a", chat_id=here)
        assert await _message(w, 2, 10_000, "ou_a", chat_id=there)
        assert await _message(w, 3, 20_000, "ou_a", chat_id=here)
        # The fourth, on "b": held, though "b" itself counted only one.
        assert not await _message(w, 4, 30_000, "ou_a", chat_id=there, mentions_me=True)
        assert not await _message(w, 5, 40_000, "ou_a", chat_id=here, mentions_me=True)
        # Another member still wakes the bot in either chat.
        assert await _message(w, 6, 50_000, "ou_b", chat_id=there)
        assert "@Lark message 4" in str(w.requests("probe", there)[-1].messages)
        assert w.requests("primary", here) == []
        assert w.requests("primary", there) == []
