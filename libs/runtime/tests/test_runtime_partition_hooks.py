"""The owner's hooks under PartitionLeases, driven round by round over a real ``leases``-like bucket: a failed
take-over is given back and tried again after its backoff; the hooks of one partition never overlap; renewal
never waits for a release."""

from __future__ import annotations

import asyncio
import logging
import secrets

import nats
import pytest
from nats.js.kv import KeyValue
from prometheus_client import REGISTRY

from larkbot.runtime.backoff import Backoff
from larkbot.runtime.bus import Bus
from larkbot.runtime.partitions import PartitionLeases

WAIT = 60.0
#: A lease outlives every test: only the tests take leases away.
TTL_S = 120.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Hooks:
    """The owner's side: records every hook call's start and end, and can hold or fail a partition's."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        #: partition → failures its next acquires raise, in order
        self.failures: dict[int, list[Exception]] = {}
        #: partition → gate its next hook call waits for (one each for acquire and release)
        self.gates: dict[tuple[str, int], asyncio.Event] = {}
        self.entered: dict[tuple[str, int], asyncio.Event] = {}
        self.tasks: dict[tuple[str, int], asyncio.Task[object]] = {}

    def hold(self, hook: str, partition: int) -> asyncio.Event:
        self.entered[(hook, partition)] = asyncio.Event()
        gate = self.gates[(hook, partition)] = asyncio.Event()
        return gate

    async def _call(self, hook: str, partition: int) -> None:
        self.calls.append((f"{hook} starts", partition))
        key = (hook, partition)
        task = asyncio.current_task()
        assert task is not None
        self.tasks[key] = task
        if key in self.gates:
            self.entered[key].set()
            await self.gates.pop(key).wait()
        if hook == "acquire" and self.failures.get(partition):
            self.calls.append(("acquire fails", partition))
            raise self.failures[partition].pop(0)
        self.calls.append((f"{hook} ends", partition))

    async def acquire(self, partition: int) -> None:
        await self._call("acquire", partition)

    async def release(self, partition: int) -> None:
        await self._call("release", partition)


async def _bucket(bus: Bus) -> tuple[KeyValue, str]:
    tag = f"g{secrets.token_hex(3)}"
    return await bus.js.create_key_value(bucket=f"H{tag}", ttl=TTL_S), tag


def _leases(kv: KeyValue, tag: str, hooks: Hooks, partitions: int, **kwargs: object) -> PartitionLeases:
    return PartitionLeases(
        kv,
        tag,
        "a",
        partitions,
        on_acquire=hooks.acquire,
        on_release=hooks.release,
        heartbeat_s=0.2,
        **kwargs,  # type: ignore[arg-type]
    )


def _failures(group: str) -> float:
    return REGISTRY.get_sample_value("larkbot_partition_takeover_failures_total", {"group": group}) or 0.0


async def _lease_holder(kv: KeyValue, tag: str, partition: int) -> str | None:
    try:
        entry = await kv.get(f"{tag}.p{partition:03d}")
    except (nats.js.errors.KeyNotFoundError, nats.js.errors.KeyDeletedError):
        return None
    return entry.value.decode() if entry.value else None


async def _until(entered: asyncio.Event) -> None:
    await asyncio.wait_for(entered.wait(), WAIT)


def _index(calls: list[tuple[str, int]], event: str, partition: int) -> int:
    """Where a hook call's event for ``partition`` happened (the last one when there are several)."""
    return max(i for i, call in enumerate(calls) if call == (event, partition))


async def test_a_failed_take_over_gives_the_lease_back_and_is_tried_again_after_its_backoff(
    bus: Bus, caplog: pytest.LogCaptureFixture
) -> None:
    kv, tag = await _bucket(bus)
    hooks, clock = Hooks(), Clock()
    # jitter 0.5 is no spread: the waits are 1 s, then 2 s.
    leases = _leases(kv, tag, hooks, 2, backoff=Backoff(1.0, 8.0), clock=clock, jitter=lambda: 0.5)
    hooks.failures[1] = [TimeoutError("the bus did not answer"), ValueError("a defect")]

    with caplog.at_level(logging.INFO, logger="larkbot.runtime.partitions"):
        await leases.tick()
        assert set(leases.owned) == {0}
        assert await _lease_holder(kv, tag, 1) is None  # given back: another replica may take it
        assert leases.failing == {1: "TimeoutError"}
        assert leases.failing_detail() == "take-over failing: 1 (TimeoutError)"
        assert not leases.settled.is_set()
        assert _failures(tag) == 1

        clock.now += 0.9
        await leases.tick()  # before its backoff: not tried
        assert hooks.calls.count(("acquire starts", 1)) == 1
        assert not leases.settled.is_set()

        clock.now += 0.1
        await leases.tick()  # tried again, fails again: the next wait doubles
        assert hooks.calls.count(("acquire starts", 1)) == 2
        assert leases.failing == {1: "ValueError"}
        assert _failures(tag) == 2

        clock.now += 1.9
        await leases.tick()
        assert hooks.calls.count(("acquire starts", 1)) == 2
        clock.now += 0.1
        await leases.tick()
        assert hooks.calls.count(("acquire starts", 1)) == 3
    assert set(leases.owned) == {0, 1}
    assert await _lease_holder(kv, tag, 1) == "a"
    assert leases.failing == {}
    assert leases.settled.is_set()
    assert _failures(tag) == 2

    lines = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert (
        logging.WARNING,
        "taking partition 1 over failed (TimeoutError: the bus did not answer); lease given back, "
        "attempt 1, next in 1.0 s",
    ) in lines
    defect = [r for r in caplog.records if "ValueError" in r.getMessage()]
    assert [r.levelno for r in defect] == [logging.ERROR]
    assert defect[0].exc_info is not None  # a defect carries its traceback
    assert (logging.INFO, "acquired partition 1 after 2 failed take-overs") in lines

    await leases.release_all()
    # A failed acquire is never released: only the take-overs that succeeded are.
    assert [c for c in hooks.calls if c[0].startswith("release starts")] == [
        ("release starts", 0),
        ("release starts", 1),
    ]


async def test_a_partition_is_not_acquired_again_while_the_release_of_its_lost_lease_runs(bus: Bus) -> None:
    kv, tag = await _bucket(bus)
    hooks = Hooks()
    leases = _leases(kv, tag, hooks, 2)
    await leases.tick()
    assert set(leases.owned) == {0, 1}

    # The lease of 0 is lost without anybody holding it (it expired while the replica was paused, say),
    # so this replica's next round can create it again at once.
    gate = hooks.hold("release", 0)
    await kv.delete(f"{tag}.p000")
    renewal = asyncio.create_task(leases.renew())
    await _until(hooks.entered[("release", 0)])  # the release waits for the partition's in-flight work
    assert 0 not in leases.owned
    assert not leases.settled.is_set()

    await leases.rebalance()
    assert hooks.calls.count(("acquire starts", 0)) == 1  # not taken over again under the release
    assert await _lease_holder(kv, tag, 0) is None
    assert not leases.settled.is_set()

    gate.set()
    await asyncio.wait_for(hooks.tasks[("release", 0)], WAIT)
    await asyncio.wait_for(renewal, WAIT)
    await leases.rebalance()
    assert _index(hooks.calls, "release ends", 0) < _index(hooks.calls, "acquire starts", 0)
    assert set(leases.owned) == {0, 1}
    assert leases.settled.is_set()
    await leases.release_all()


async def test_renewal_goes_on_while_a_lost_lease_is_released(bus: Bus) -> None:
    kv, tag = await _bucket(bus)
    hooks = Hooks()
    leases = _leases(kv, tag, hooks, 2)
    await leases.tick()
    gate = hooks.hold("release", 0)
    await kv.delete(f"{tag}.p000")

    # Renewal returns with the release still waiting, and renews the other lease and the membership on.
    await asyncio.wait_for(leases.renew(), WAIT)
    await _until(hooks.entered[("release", 0)])
    before = leases.owned[1]
    member = (await kv.get(f"{tag}.members.a")).revision
    await asyncio.wait_for(leases.renew(), WAIT)
    assert leases.owned[1] > before
    assert (await kv.get(f"{tag}.members.a")).revision > member
    assert ("release ends", 0) not in hooks.calls

    gate.set()
    # A clean stop waits for the release still running.
    await asyncio.wait_for(leases.release_all(), WAIT)
    assert hooks.tasks[("release", 0)].done()
    assert hooks.calls.count(("release ends", 0)) == 1  # released once, though lost and then stopped


async def test_a_lease_lost_during_its_take_over_is_released_after_the_take_over_returns(bus: Bus) -> None:
    kv, tag = await _bucket(bus)
    hooks = Hooks()
    leases = _leases(kv, tag, hooks, 1)
    gate = hooks.hold("acquire", 0)
    rebalance = asyncio.create_task(leases.rebalance())
    await _until(hooks.entered[("acquire", 0)])

    await kv.delete(f"{tag}.p000")
    await asyncio.wait_for(leases.renew(), WAIT)  # finds the lease lost
    assert 0 not in leases.owned
    gate.set()
    await asyncio.wait_for(rebalance, WAIT)
    await asyncio.wait_for(leases.release_all(), WAIT)

    assert hooks.calls == [
        ("acquire starts", 0),
        ("acquire ends", 0),
        ("release starts", 0),
        ("release ends", 0),
    ]
