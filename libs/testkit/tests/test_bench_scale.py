"""The scale-out bench part on a small size: one and then two pipeline processes, then one and then two
driver processes, on PostgreSQL — every event handled and every turn answered, the partitions split
between the two replicas and the work with them. Slow (seven process starts): `make test-all`."""

from __future__ import annotations

import pytest

from larkbot.testkit.bench import scale


@pytest.mark.slow
async def test_one_and_two_replicas_of_the_pipeline_and_the_driver_handle_everything_and_split_the_partitions(
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

    lone, pair = report["driver"]
    assert lone["partitions_owned"] == [16]
    assert lone["chats_driven"] == [lone["chats"]]
    assert lone["unanswered"] == 0
    assert lone["turns"] == lone["chats"] * 3
    assert lone["turns_sent"] == [lone["turns"]]
    assert sorted(pair["partitions_owned"]) == [8, 8]
    assert sum(pair["chats_driven"]) == pair["chats"]
    # Every chat's turns were taken by the replica holding its partition, so each replica sent some.
    assert pair["unanswered"] == 0
    assert sum(pair["turns_sent"]) == pair["turns"]
    assert min(pair["turns_sent"]) > 0
    assert lone["turn_ms"]["p50"] <= lone["turn_ms"]["p99"]
    assert report["driver_two_to_one"] > 0
