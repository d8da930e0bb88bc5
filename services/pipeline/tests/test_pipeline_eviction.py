"""Resident chats within a byte budget: the chats idle longest are evicted and rebuilt from the database on
their next event or request, and a consumer never notices — the update sequence continues where it was,
and what is rebuilt is exactly what live processing had published (issue 27)."""

from __future__ import annotations

from prometheus_client import REGISTRY

from larkbot.canonical.context import ContextSnapshot, CursorMove
from larkbot.canonical.names import SUBJECT_PIPELINE_CURSOR, Platform
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import parse_config
from larkbot.testkit.pipeline import synthetic as s

from .test_pipeline_service import TIMEOUT, pipeline, publish, snapshot, watching

CHATS = [f"oc_lru_{n}" for n in range(5)]
#: Messages per chat: each chat is estimated at ~300 KB (3 KB a node), so a 1 MiB budget holds three of
#: the five.
PER_CHAT = 100


def _sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


async def test_idle_chats_are_evicted_and_rebuilt_without_a_gap(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    cfg = parse_config(
        {
            "services": {"pipeline": {"database_url": database_url, "resident_budget_mb": 1}},
            "chats": {"default": {}, **{f"feishu:{chat}": {} for chat in CHATS}},
        }
    )
    alice = s.person("ou_alice", "Alice")
    evicted_before = _sample("larkbot_pipeline_chat_evictions_total")
    reloads_before = _sample("larkbot_pipeline_chat_reload_seconds_count")
    async with watching(bus) as updates, pipeline(bus, nats_url, cfg) as (app, _):
        chats = app.chats
        for n, chat in enumerate(CHATS):
            events = [
                s.message(f"om_{chat}_{i}", f"line {i} of {chat}", sender=alice, chat=chat, at=s.BASE_SEC + i)
                for i in range(PER_CHAT)
            ]
            await publish(bus, *events)
            last = f"line {PER_CHAT - 1} of {chat}"
            await updates.until(lambda chat=chat, last=last: last in "".join(updates.xml(chat)))
            assert len(chats.chats) + len(chats.asleep) == len(CHATS), n

        # The oldest went to sleep; what stays is within the budget and holds the newest.
        first, newest = ("feishu", CHATS[0]), ("feishu", CHATS[-1])
        assert first in chats.asleep
        assert newest in chats.chats
        assert 0 < chats.held_bytes <= chats.budget_bytes
        assert _sample("larkbot_pipeline_chat_evictions_total") > evicted_before
        held_seq = max(u.seq for u in updates.items if u.chat_id == CHATS[0])
        assert chats.asleep[first] == held_seq

        # A snapshot of a sleeping chat is rebuilt: exactly what the consumer holds, at the same seq.
        woken = await snapshot(bus, CHATS[0])
        assert [seg.xml for seg in woken.segments] == updates.xml(CHATS[0])
        assert woken.seq == held_seq
        assert first in chats.chats

        # Its next event continues the sequence the consumer holds: no gap, the same context.
        seen = len(updates.items)
        await publish(
            bus, s.message("om_after", "back again", sender=alice, chat=CHATS[1], at=s.BASE_SEC + 99)
        )
        await updates.until(lambda: any(u.chat_id == CHATS[1] for u in updates.items[seen:]))
        (after,) = [u for u in updates.items[seen:] if u.chat_id == CHATS[1]]
        assert after.base_seq == max(u.seq for u in updates.items[:seen] if u.chat_id == CHATS[1])
        assert [seg.xml for seg in (await snapshot(bus, CHATS[1])).segments] == updates.xml(CHATS[1])
        assert updates.xml(CHATS[1])[-1].endswith("back again</message>")

        # A cursor move of a sleeping chat rebuilds it from the new cursor.
        sleeping = next(iter(chats.asleep))
        cursor = max(u.seq for u in updates.items if u.chat_id == sleeping[1]) // 1024 - 10
        moved = await bus.request(
            SUBJECT_PIPELINE_CURSOR,
            CursorMove(platform=Platform.FEISHU, chat_id=sleeping[1], cursor=cursor, reason="compaction"),
            ContextSnapshot,
            timeout_s=TIMEOUT,
        )
        assert moved.cursor == cursor
        assert len(moved.segments) == 10
        assert chats.held_bytes <= chats.budget_bytes
        assert _sample("larkbot_pipeline_chat_reload_seconds_count") >= reloads_before + 2

    # A cold start within the same budget builds the newest chats first and leaves the rest asleep.
    async with pipeline(bus, nats_url, cfg) as (app, _):
        assert set(app.chats.chats) | set(app.chats.asleep) == {("feishu", chat) for chat in CHATS}
        assert ("feishu", CHATS[1]) in app.chats.chats  # its message was the last one
        assert app.chats.asleep
        for chat in CHATS:
            rebuilt = await snapshot(bus, chat)
            assert [seg.xml for seg in rebuilt.segments] == updates.xml(chat)
