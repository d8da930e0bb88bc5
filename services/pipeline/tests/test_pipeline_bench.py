"""The benchmark entry point runs end to end on a small size and reports every measurement."""

from __future__ import annotations

import asyncio

from larkbot.pipeline import bench


async def test_bench_reports_core_service_and_cold_replay() -> None:
    # run() owns its event loop (it is called from the CLI), so give it a thread of its own.
    report = await asyncio.to_thread(bench.run, 600, service_events=300)
    assert report["component"] == "pipeline"
    assert report["core"]["events"] == 600
    assert report["service"]["events"] == 300
    assert report["cold_replay"]["events"] > 500  # redeliveries in the traffic are deduplicated
    for part in ("core", "service", "cold_replay"):
        assert report[part]["events_per_s"] > 0
