"""The scale-out bench part on a small size: one and then two pipeline processes on PostgreSQL, every
event handled, the partitions split between the two replicas. Slow (four process starts): `make test-all`."""

from __future__ import annotations

import pytest

from larkbot.testkit.bench import scale


@pytest.mark.slow
async def test_one_and_two_pipeline_replicas_handle_everything_and_split_the_partitions(
    nats_url: str,
) -> None:
    if scale.database_url() is None:
        pytest.skip("the scale bench runs on PostgreSQL: TEST_DATABASE_URL is not set")
    # ``bus``: the streams start empty, so the replicas see only the bench's events.
    report = (await scale.measure(nats_url, quick=True))["scale"]
    one, two = report["pipeline"]
    assert one["replicas"] == 1
    assert one["partitions_owned"] == [16]
    assert two["replicas"] == 2
    assert sum(two["partitions_owned"]) == 16
    assert min(two["partitions_owned"]) >= 4
    assert one["events_per_s"] > 0
    assert two["events_per_s"] > 0
    assert report["two_to_one"] > 0
