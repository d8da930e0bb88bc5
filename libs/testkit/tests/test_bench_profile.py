"""The profile summary: folded stacks (py-spy's raw format) read into the functions with most samples."""

from __future__ import annotations

from pathlib import Path

from larkbot.testkit.bench.profile import summarise, top

FOLDED = [
    "run (/x/.venv/lib/python3.11/site-packages/nats/aio/client.py:10);"
    "_flush (/x/.venv/lib/python3.11/site-packages/nats/aio/client.py:99) 6",
    "run (/x/.venv/lib/python3.11/site-packages/nats/aio/client.py:12);"
    "commit (/w/services/pipeline/src/larkbot/pipeline/adapters/writes.py:40);"
    "execute (/x/.venv/lib/python3.11/site-packages/sqlalchemy/engine/base.py:5) 3",
    "commit (/w/services/pipeline/src/larkbot/pipeline/adapters/writes.py:41) 1",
    "not a sample line",
]


def test_self_and_total_shares_are_of_all_samples_and_lines_of_one_function_merge() -> None:
    samples, entries = top(FOLDED, limit=3)
    assert samples == 10
    assert [(e.function, e.self_share, e.total_share) for e in entries] == [
        ("_flush (nats/aio/client.py)", 0.6, 0.6),
        ("execute (sqlalchemy/engine/base.py)", 0.3, 0.3),
        # Lines 40 and 41 are one function; it is under 4 of the samples, 1 of them its own.
        ("commit (larkbot/pipeline/adapters/writes.py)", 0.1, 0.4),
    ]
    assert top([], limit=3) == (0, [])


def test_a_directory_of_profiles_is_summarised_per_process(tmp_path: Path) -> None:
    (tmp_path / "driver.txt").write_text("\n".join(FOLDED), encoding="utf-8")
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    report = summarise(tmp_path, limit=1)
    assert report["driver"]["samples"] == 10
    assert report["driver"]["top"] == [{"function": "_flush (nats/aio/client.py)", "self": 0.6, "total": 0.6}]
    assert report["empty"] == {"samples": 0, "top": []}
