"""``OncePerKey``: one execution per idempotency key at a time; a completed key answers ``duplicate``."""

from __future__ import annotations

import asyncio

from larkbot.canonical.actions import ActionResult
from larkbot.runtime.ingress import OncePerKey, failed


async def test_concurrent_repeats_share_one_execution_and_later_ones_are_duplicates() -> None:
    once = OncePerKey()
    started = asyncio.Event()
    release = asyncio.Event()
    runs = 0

    async def work() -> ActionResult:
        nonlocal runs
        runs += 1
        started.set()
        await release.wait()
        return ActionResult(idempotency_key="k", ok=True, outcome="done", message_ids=("1",))

    first = asyncio.create_task(once.run("k", work))
    await started.wait()
    second = asyncio.create_task(once.run("k", work))
    # One turn of the loop (tasks run in creation order): the second caller now waits on the first run.
    await asyncio.sleep(0)
    release.set()
    a, b = await asyncio.gather(first, second)
    later = await once.run("k", work)
    assert runs == 1
    assert (a.outcome, b.outcome, later.outcome) == ("done", "duplicate", "duplicate")
    assert a.message_ids == b.message_ids == later.message_ids == ("1",)


async def test_a_failed_key_runs_again_and_a_caller_giving_up_does_not_stop_the_work() -> None:
    once = OncePerKey(keep=1)
    outcomes = iter([failed("k", "unavailable", "down", retryable=True), None])
    started = asyncio.Event()
    release = asyncio.Event()

    async def work() -> ActionResult:
        answer = next(outcomes)
        if answer is not None:
            return answer
        started.set()
        await release.wait()
        return ActionResult(idempotency_key="k", ok=True, outcome="done")

    assert (await once.run("k", work)).outcome == "failed"
    impatient = asyncio.create_task(once.run("k", work))
    await started.wait()
    impatient.cancel()
    release.set()
    assert (await once.run("k", work)).outcome == "duplicate"
