"""The cacheable-prefix benchmark's measure, and the ratio it reports for a 500-message chat."""

from __future__ import annotations

from larkbot.driver.bench import cacheable_prefix_ratio, common_prefix, measure


def test_common_prefix_and_measure() -> None:
    assert common_prefix(b"abcdef", b"abcxyz") == 3
    assert common_prefix(b"", b"abc") == 0
    assert common_prefix(b"abc", b"abc") == 3
    report = measure([(b"SYS|m1|LB1", b"SYS|m1|"), (b"SYS|m1|m2|LB2", b"SYS|m1|m2|"), (b"XSYS", b"X")])
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
