"""The lease watch of the chaos profiles judges what it sees (fed entries directly: no bus)."""

from __future__ import annotations

from tests.harness.leases import LeaseWatch, replica_pid

from larkbot.runtime.watch import KvUpdate

A, B = "vm-101-aaaaaa", "vm-202-bbbbbb"


def entry(revision: int, holder: str | None, key: str = "pipeline.p001") -> KvUpdate:
    return KvUpdate("leases", key, None if holder is None else holder.encode(), revision)


async def feed(watch: LeaseWatch, *entries: KvUpdate) -> None:
    for e in entries:
        await watch._on_entry(e)


def test_the_process_id_is_read_from_a_replica_id() -> None:
    assert replica_pid("my_host-4242-0a1b2c") == 4242
    assert replica_pid("not-a-replica") is None


async def test_a_lease_taken_from_a_live_holder_within_the_ttl_is_an_overlap() -> None:
    watch = LeaseWatch(ttl_s=15.0, alive=lambda pid: pid == 101)
    await feed(watch, entry(1, A), entry(2, A), entry(3, B))
    assert watch.handovers == 1
    assert len(watch.overlaps) == 1
    assert watch.overlaps[0].startswith("pipeline.p001: vm-202-bbbbbb took it")


async def test_a_released_lease_or_a_dead_holder_moves_without_an_overlap() -> None:
    released = LeaseWatch(ttl_s=15.0, alive=lambda _pid: True)
    await feed(released, entry(1, A), entry(2, None), entry(3, B))
    dead = LeaseWatch(ttl_s=15.0, alive=lambda _pid: False)
    await feed(dead, entry(1, A), entry(2, B))
    members = LeaseWatch(ttl_s=15.0, alive=lambda _pid: True)
    await feed(members, entry(1, A, "pipeline.members.x"), entry(2, B, "pipeline.members.x"))
    assert (released.handovers, dead.handovers, members.writes) == (1, 1, 0)
    assert released.overlaps == dead.overlaps == members.overlaps == []


async def test_a_hand_over_across_skipped_revisions_is_unobserved_not_judged() -> None:
    watch = LeaseWatch(ttl_s=15.0, alive=lambda _pid: True)
    await feed(watch, entry(1, A), entry(5, B))
    assert (watch.handovers, watch.unobserved, watch.overlaps) == (1, 1, [])
