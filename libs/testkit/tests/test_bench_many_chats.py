"""The many-chats bench part runs end to end on a small size: a budget smaller than the configured chats
leaves most of them asleep, and every active chat is rebuilt when woken."""

from __future__ import annotations

from larkbot.testkit.bench.many_chats import measure


async def test_many_configured_chats_stay_within_the_budget_and_wake_from_the_database() -> None:
    report = await measure(400, 4, budget_mb=1)
    assert report["configured"] == 400
    assert report["resident_chats"] + report["asleep_chats"] == 400
    assert report["asleep_chats"] > 300
    assert 0 < report["held_mib"] <= 1
    assert report["rss_mib"] > 0
    reload = report["chat_reload_ms"]
    assert reload is not None
    assert reload["n"] >= 3
    assert 0 < reload["p50"] <= reload["p99"]
