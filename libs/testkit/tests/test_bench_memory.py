"""The memory-search benchmark of ``larkbot bench`` in its quick size: it loads, searches and reports the
same keys as the full run."""

from __future__ import annotations

import asyncio
from pathlib import Path

from larkbot.testkit.bench.memory import PEOPLE, dataset, measure


def test_the_dataset_is_seeded_and_mixes_people_scopes_and_languages() -> None:
    data = dataset(3_000)
    assert data == dataset(3_000)
    assert len(data) == 3_000
    assert len({m.person_id for m in data}) == PEOPLE
    assert {m.scope for m in data} == {"group", "private", "global"}
    assert {m.importance for m in data} == {"high", "normal"}
    assert any("は" in m.content for m in data)
    assert any("喜欢" in m.content for m in data)
    assert any(" likes " in m.content for m in data)


async def test_the_quick_run_reports_search_latency(tmp_path: Path) -> None:
    report = await measure(True, directory=tmp_path)
    assert set(report["memory_search_ms"]) == {"p50", "p99"}
    assert 0 < report["memory_search_ms"]["p50"] <= report["memory_search_ms"]["p99"]
    details = report["memory_search"]
    assert (details["memories"], details["people"], details["queries"]) == (5_000, PEOPLE, 200)
    assert details["mean_results"] > 1
    assert await asyncio.to_thread(lambda: list(tmp_path.iterdir())) == []  # its database is gone
