"""Singleton work through the lease: one leader at a time; a leader that dies loses the lease after the
TTL and another takes over; a clean stop ends the work and hands the lease over at once."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Callable

import nats
import pytest
from nats.js.kv import KeyValue

from larkbot.runtime.bus import Bus
from larkbot.runtime.leadership import SingletonLease

WAIT = 30.0
TTL = 2.0


@pytest.fixture
async def bucket(bus: Bus) -> AsyncIterator[str]:
    name = f"leases-{secrets.token_hex(3)}"
    await bus.js.create_key_value(bucket=name, ttl=TTL)
    yield name
    await bus.js.delete_key_value(name)


async def _eventually(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


class Worker:
    """Singleton work that records whether it is running."""

    def __init__(self) -> None:
        self.running = False
        self.started = 0

    async def __call__(self) -> None:
        self.started += 1
        self.running = True
        try:
            await asyncio.Event().wait()
        finally:
            self.running = False


def _lease(kv: KeyValue, replica: str) -> SingletonLease:
    return SingletonLease(kv, "svc", "maintenance", replica, ttl_s=TTL, heartbeat_s=0.2)


async def test_one_leader_and_a_clean_stop_hands_over_at_once(bus: Bus, bucket: str) -> None:
    kv = await bus.js.key_value(bucket)
    a, b = _lease(kv, "a"), _lease(kv, "b")
    work_a, work_b = Worker(), Worker()
    stop_a, stop_b = asyncio.Event(), asyncio.Event()
    task_a = asyncio.create_task(a.run(stop_a, work_a))
    await _eventually(lambda: work_a.running)
    task_b = asyncio.create_task(b.run(stop_b, work_b))
    await asyncio.sleep(3 * 0.2)
    assert a.held
    assert not b.held
    assert not work_b.running
    started = time.monotonic()
    stop_a.set()
    await asyncio.wait_for(task_a, WAIT)
    assert not work_a.running  # the work ended before the lease was released
    await _eventually(lambda: work_b.running)
    assert time.monotonic() - started < TTL  # released, not expired
    stop_b.set()
    await asyncio.wait_for(task_b, WAIT)


async def test_a_leader_that_dies_loses_the_lease_after_the_ttl_and_another_takes_over(
    bus: Bus, bucket: str, nats_url: str
) -> None:
    doomed = await nats.connect(nats_url)
    a = _lease(await doomed.jetstream().key_value(bucket), "a")
    b = _lease(await bus.js.key_value(bucket), "b")
    work_a, work_b = Worker(), Worker()
    stop_a, stop_b = asyncio.Event(), asyncio.Event()
    task_a = asyncio.create_task(a.run(stop_a, work_a))
    await _eventually(lambda: work_a.running)
    task_b = asyncio.create_task(b.run(stop_b, work_b))
    died = time.monotonic()
    await doomed.close()  # the process is gone: no renewal, no release
    await _eventually(lambda: not work_a.running)  # it stops working before its lease can expire
    await _eventually(lambda: work_b.running)
    assert time.monotonic() - died >= TTL - 0.5  # taken over only once the lease expired
    assert not a.held
    stop_a.set()
    stop_b.set()
    await asyncio.wait_for(asyncio.gather(task_a, task_b), WAIT)


async def test_held_answers_for_work_that_only_checks(bus: Bus, bucket: str) -> None:
    kv = await bus.js.key_value(bucket)
    a, b = _lease(kv, "a"), _lease(kv, "b")
    assert await a.tick()
    assert not await b.tick()
    assert a.held
    await a.release()
    assert not a.held
    assert await b.tick()
