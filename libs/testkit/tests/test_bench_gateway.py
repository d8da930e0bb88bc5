"""The gateway overhead benchmark of ``larkbot bench`` in a small size: the figures it promises."""

from __future__ import annotations

from larkbot.testkit.bench import gateway as bench


async def test_benchmark_reports_overhead_quantiles(nats_url: str) -> None:
    result = await bench.measure(10, nats_url, warmup=2)
    assert result["n"] == 10
    assert 0 < result["overhead_p50_ms"] <= result["overhead_p99_ms"]
    assert result["roundtrip_p50_ms"] >= result["overhead_p50_ms"]
    assert set(result["targets"]) == {"overhead_p50_ms", "overhead_p99_ms"}
