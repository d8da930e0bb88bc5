"""The ``limits`` part of ``larkbot bench`` in a small size: every limit it promises, and no stream left."""

from __future__ import annotations

from larkbot.runtime.bus import Bus
from larkbot.testkit.bench import limits as bench


async def test_every_limit_is_measured_and_the_stream_is_removed(bus: Bus, nats_url: str) -> None:
    result = (await bench.measure(nats_url, True, sizes=bench.Sizes(latencies=20, bulk=1200, events=2000)))[
        "limits"
    ]
    for key in (
        "nats_round_trip_ms",
        "jetstream_publish_ms",
        "jetstream_delivery_ms",
        "sqlite_commit_ms",
        "sqlite_read_ms",
    ):
        assert result[key]["n"] == 20
        assert 0 < result[key]["p50"] <= result[key]["p99"]
    for key in (
        "jetstream_publish_per_s",
        "jetstream_consume_per_s",
        "sqlite_insert_rows_per_s",
        "reduce_render_events_per_s",
    ):
        assert result[key] > 0
    assert result["reduce_render_events"] == 2000
    streams = {info.config.name for info in await bus.js.streams_info()}
    assert not any(name and name.startswith("BENCH_LIMITS_") for name in streams)
