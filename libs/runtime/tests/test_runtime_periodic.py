"""Periodic work ends with the service: promptly on stop, whatever its interval; transient failures wait
for the next run, any other ends the loop loudly."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from larkbot.runtime.periodic import every

WAIT = 30.0


async def test_runs_at_once_then_every_interval_until_stopped() -> None:
    stopping = asyncio.Event()
    runs: list[float] = []
    enough = asyncio.Event()

    async def work() -> None:
        runs.append(time.monotonic())
        if len(runs) == 3:
            enough.set()

    task = asyncio.create_task(every(0.05, work, stopping, name="tick"))
    await asyncio.wait_for(enough.wait(), WAIT)
    stopping.set()
    await asyncio.wait_for(task, WAIT)
    assert len(runs) >= 3
    assert all(b - a >= 0.04 for a, b in itertools.pairwise(runs))


async def test_a_stop_ends_the_wait_at_once_not_after_the_interval() -> None:
    stopping = asyncio.Event()
    ran = asyncio.Event()

    async def work() -> None:
        ran.set()

    task = asyncio.create_task(every(3600.0, work, stopping, name="hourly"))
    await asyncio.wait_for(ran.wait(), WAIT)
    started = time.monotonic()
    stopping.set()
    await asyncio.wait_for(task, WAIT)
    assert time.monotonic() - started < 5.0  # an hour's interval: only a prompt stop passes


async def test_a_run_in_progress_is_finished_before_the_loop_ends() -> None:
    stopping = asyncio.Event()
    inside = asyncio.Event()
    release = asyncio.Event()
    finished: list[bool] = []

    async def work() -> None:
        inside.set()
        await release.wait()
        finished.append(True)

    task = asyncio.create_task(every(3600.0, work, stopping, name="sweep"))
    await asyncio.wait_for(inside.wait(), WAIT)
    stopping.set()
    release.set()
    await asyncio.wait_for(task, WAIT)
    assert finished == [True]


async def test_a_tolerated_failure_waits_for_the_next_run_and_another_ends_the_loop() -> None:
    stopping = asyncio.Event()
    calls = 0

    async def work() -> None:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise TimeoutError("slow server")
        raise RuntimeError("a bug")

    task = asyncio.create_task(every(0.01, work, stopping, name="flaky", tolerate=(TimeoutError,)))
    with pytest.raises(RuntimeError, match="a bug"):
        await asyncio.wait_for(task, WAIT)
    assert calls == 3


async def test_the_first_run_can_wait_one_interval() -> None:
    stopping = asyncio.Event()
    runs = 0

    async def work() -> None:
        nonlocal runs
        runs += 1

    task = asyncio.create_task(every(3600.0, work, stopping, name="later", immediately=False))
    await asyncio.sleep(0)
    stopping.set()
    await asyncio.wait_for(task, WAIT)
    assert runs == 0
