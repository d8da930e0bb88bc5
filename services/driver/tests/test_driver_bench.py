"""The cacheable-prefix benchmark: its measure, the pure 500-message replay, and the conversation of the
bus replay that ``larkbot bench`` reports (the replay itself runs the real pipeline too:
``tests/test_prefix_bench.py``)."""

from __future__ import annotations

from larkbot.testkit.bench.prefix import cacheable_prefix_ratio, common_prefix, conversation, prefix_report


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


def test_the_bus_replay_talks_in_bursts_and_activates_the_bot() -> None:
    bursts = list(conversation(120))
    lines = [line for burst in bursts for line in burst.lines]
    assert [line.n for line in lines] == list(range(1, 121))
    assert {len(burst.lines) for burst in bursts} == {1, 2, 3}
    assert len({line.sender for line in lines}) == 4
    assert all(b.wake_at_ms == b.lines[-1].at_ms + 1_000 for b in bursts)
    activated = [b for b in bursts if b.activation]
    assert [b.activation for b in activated] == list(range(1, len(activated) + 1))
    assert all(b.activation for b in bursts if any(line.mention for line in b.lines))
    assert [b.activation for b in activated if b.read_old is not None] == [
        b.activation for b in activated if b.activation % 3 == 0
    ]
    assert len(activated) > 20
