"""Conditions: a waiter looks at its predicate now and after every report, and nowhere else."""

from __future__ import annotations

import asyncio

import pytest

from larkbot.testkit.conditions import Conditions
from larkbot.testkit.pipeline.watch import PipelineWatch


async def test_a_predicate_that_holds_returns_at_once() -> None:
    await Conditions().until(lambda: True, timeout_s=0.5)


async def test_a_waiter_returns_only_after_a_report_once_its_predicate_holds() -> None:
    conditions = Conditions()
    state = {"n": 0}
    waiter = asyncio.create_task(conditions.until(lambda: state["n"] >= 2, timeout_s=30))
    await asyncio.sleep(0)  # the waiter looked once and waits for a report
    state["n"] = 1
    conditions.changed()
    await asyncio.sleep(0)
    assert not waiter.done()  # woken, looked again, still false: waiting again
    state["n"] = 2
    assert not waiter.done()  # a change nobody reported is not seen
    conditions.changed()
    await asyncio.wait_for(waiter, 30)


async def test_every_waiter_is_woken_by_one_report() -> None:
    conditions = Conditions()
    ready = {"a": False}
    waiters = [asyncio.create_task(conditions.until(lambda: ready["a"], timeout_s=30)) for _ in range(5)]
    await asyncio.sleep(0)
    ready["a"] = True
    conditions.changed()
    await asyncio.wait_for(asyncio.gather(*waiters), 30)


async def test_a_condition_never_reached_times_out() -> None:
    conditions = Conditions()
    with pytest.raises(TimeoutError):
        await conditions.until(lambda: False, timeout_s=0.05)
    conditions.changed()  # no waiter left behind to wake


async def test_the_pipeline_watch_keeps_the_newest_total() -> None:
    watch = PipelineWatch()
    waiter = asyncio.create_task(watch.until(lambda: watch.handled >= 10, timeout_s=30))
    watch.events_handled(4)
    await asyncio.sleep(0)
    assert not waiter.done()
    watch.events_handled(10)
    await asyncio.wait_for(waiter, 30)
    assert watch.handled == 10
