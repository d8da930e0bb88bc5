"""A worker's default parallelism follows the cores it may use, not the node's (containers)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from larkbot.media.app import usable_cpus

AFFINITY = len(os.sched_getaffinity(0))


@pytest.mark.parametrize(
    ("cpu_max", "expected"),
    [
        ("max 100000\n", AFFINITY),  # no limit
        ("50000 100000\n", 1),  # half a core rounds up to one
        ("150000 100000\n", min(AFFINITY, 2)),
        ("100000000 100000\n", AFFINITY),  # a limit above the cores available
        ("garbage\n", AFFINITY),
    ],
)
def test_a_cgroup_cpu_limit_caps_the_cores(tmp_path: Path, cpu_max: str, expected: int) -> None:
    path = tmp_path / "cpu.max"
    path.write_text(cpu_max, encoding="ascii")
    assert usable_cpus(path) == expected


def test_without_a_cgroup_file_the_affinity_counts(tmp_path: Path) -> None:
    assert usable_cpus(tmp_path / "missing") == AFFINITY
