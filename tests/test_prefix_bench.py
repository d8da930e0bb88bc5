"""``cacheable_prefix_ratio`` of ``larkbot bench``: a chat replayed through the real pipeline and the
driver on the bus (``larkbot.testkit.bench.replay``), the bot's sends coming back through the pipeline as
self-sent messages."""

from __future__ import annotations

from larkbot.runtime.bus import Bus
from larkbot.testkit.bench.replay import measure


async def test_the_bench_replays_a_chat_through_the_pipeline_and_the_driver(bus: Bus, nats_url: str) -> None:
    figures = await measure(nats_url, quick=True)
    details = figures["driver"]
    assert details["messages"] == 120
    assert details["requests"] > 20
    assert details["breaks"] == 0
    assert details["request_bytes"] > details["shared_bytes"] > 0
    assert isinstance(figures["cacheable_prefix_ratio"], float)
    assert figures["cacheable_prefix_ratio"] == round(details["shared_bytes"] / details["request_bytes"], 4)
    assert figures["cacheable_prefix_ratio"] >= 0.9
