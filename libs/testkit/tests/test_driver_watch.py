"""What a chat's loop reports to its replica's observer, and the conditions the harness builds on it."""

from __future__ import annotations

import asyncio
from typing import cast

from larkbot.driver.wake.chatstate import ChatState, Persona
from larkbot.driver.wake.clock import ManualClock
from larkbot.driver.wake.core.scheduler import Wake
from larkbot.driver.wake.repository import DriverRepository
from larkbot.runtime.config import ChatSettings
from larkbot.runtime.retry import Backoff
from larkbot.testkit.driver.watch import DriverWatch

# The loop reads the repository only when a wake-up fails; these do not.
NO_REPOSITORY = cast(DriverRepository, None)


def _chat(clock: ManualClock, watch: DriverWatch) -> ChatState:
    return ChatState(
        "feishu", "oc_watch", ChatSettings(), Persona("Lark", ()), clock, watch, database_retry=Backoff()
    )


async def test_a_chat_settles_after_its_loop_has_looked_at_the_current_time() -> None:
    clock, watch = ManualClock(1_000_000), DriverWatch()
    chat = _chat(clock, watch)
    woken: list[str] = []

    async def run_wake(_chat: ChatState, wake: Wake, _wake_id: str, _until: int) -> None:
        woken.append(wake.kind)

    chat.load(None, chain_open=True)  # an open chain: the loop resumes it at once
    assert not watch.idle(chat)  # the loop has reported nothing yet
    loop = asyncio.create_task(chat.loop(run_wake, NO_REPOSITORY))
    try:
        await watch.settled(chat)
        assert woken == ["resume"]  # idle only after the wake-up it had to run
        clock.advance(1_000)
        assert not watch.idle(chat)  # the loop has not looked at the new time yet
        await watch.settled(chat)
        chat.typing(clock.now_ms())
        assert not watch.idle(chat)  # a change it has not taken in
        await watch.settled(chat)

        again = _chat(clock, watch)  # the same chat taken over anew: a state nothing reported on
        assert watch.idle(chat)
        assert not watch.idle(again)
    finally:
        chat.stop()
        await asyncio.wait_for(loop, 30)


async def test_a_stopping_chat_is_reported() -> None:
    clock, watch = ManualClock(1_000_000), DriverWatch()
    chat = _chat(clock, watch)
    waiter = asyncio.create_task(watch.until(lambda: chat.stopping))
    await asyncio.sleep(0)
    chat.stop()
    await asyncio.wait_for(waiter, 30)


def test_holds_counts_the_partitions_reported_and_waits_for_their_take_over() -> None:
    watch = DriverWatch()
    assert not watch.holds(0)  # nothing reported yet
    watch.partitions_changed((0, 2), False)
    assert not watch.holds(2)  # acquired, chats not taken over
    watch.partitions_changed((0, 2), True)
    assert watch.holds(2)
    assert not watch.holds(1)
    watch.partitions_changed((), True)
    assert watch.holds(0)
