"""The cacheable-prefix benchmark: its measure, the pure 500-message replay, and the bus replay that
``larkbot bench`` reports."""

from __future__ import annotations

from larkbot.driver.bench import cacheable_prefix_ratio, common_prefix, measure, prefix_report
from larkbot.runtime.bus import Bus


def test_common_prefix_and_measure() -> None:
    assert common_prefix(b"abcdef", b"abcxyz") == 3
    assert common_prefix(b"", b"abc") == 0
    assert common_prefix(b"abc", b"abc") == 3
    report = prefix_report([(b"SYS|m1|LB1", b"SYS|m1|"), (b"SYS|m1|m2|LB2", b"SYS|m1|m2|"), (b"XSYS", b"X")])
    assert report.requests == 3
    assert report.request_bytes == len(b"SYS|m1|m2|LB2") + len(b"XSYS")
    assert report.shared_bytes == len(b"SYS|m1|") + 0
    assert report.breaks == 1


def test_a_long_chat_keeps_at_least_95_percent_of_request_bytes_cacheable() -> None:
    report = cacheable_prefix_ratio(500)
    assert report.messages == 500
    assert report.requests > 100
    assert report.breaks == 0
    assert report.ratio >= 0.95


async def test_the_bench_replays_a_chat_through_the_driver_on_the_bus(bus: Bus, nats_url: str) -> None:
    figures = await measure(nats_url, quick=True)
    details = figures["driver"]
    assert details["messages"] == 120
    assert details["requests"] > 20
    assert details["breaks"] == 0
    assert details["request_bytes"] > details["shared_bytes"] > 0
    assert isinstance(figures["cacheable_prefix_ratio"], float)
    assert figures["cacheable_prefix_ratio"] == round(details["shared_bytes"] / details["request_bytes"], 4)
    assert figures["cacheable_prefix_ratio"] >= 0.9
