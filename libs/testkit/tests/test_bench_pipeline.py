"""The benchmark entry point runs end to end on a small size and reports every figure it promises."""

from __future__ import annotations

from larkbot.canonical.names import STREAM_EVENTS
from larkbot.runtime.bus import Bus
from larkbot.testkit.bench import pipeline as bench


async def test_bench_reports_service_rate_cold_replay_and_memory(bus: Bus, nats_url: str) -> None:
    report = await bench.measure(nats_url, True, sizes=(600, 2000))
    assert report["pipeline_events_per_s"] > 0
    assert report["cold_replay_1m_events_s"] is None  # not measured at that size, and it says so
    assert "2,000 events replayed, not 1,000,000" in report["null_because"]["cold_replay_1m_events_s"]
    assert report["cold_replay_events_per_s"] > 0
    assert report["resident_bytes_per_chat"] > 0
    reload = report["chat_reload_ms"]
    assert reload["n"] == 20
    assert 0 < reload["p50"] <= reload["p99"]
    detail = report["pipeline"]
    assert 500 < detail["service"]["events"] <= 600  # redeliveries within the duplicate window are dropped
    assert detail["cold_replay"]["events"] == detail["cold_replay"]["stored"] == 2000
    # Started as a deployment starts (the default resident budget), the same store is ready too.
    started = detail["cold_replay"]["default_budget"]
    assert started["resident_chats"] == started["chats"] == 2
    assert started["events"] == 2000
    assert started["seconds"] > 0
    # The benchmark cleans up after itself: its events no longer occupy the stream.
    assert (await bus.js.stream_info(STREAM_EVENTS)).state.messages == 0
