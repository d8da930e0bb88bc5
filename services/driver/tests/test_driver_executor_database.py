"""A tool whose store the database cannot serve now (its pool's one connection taken, a short wait for
it): a work tool answers the model and the turn goes on; a tool whose step was written ahead lets the
error through, so the wake-up is deferred and its retry redoes the step (``wake.runner``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from larkbot.canonical.llm import TextPart
from larkbot.driver.app import MIGRATIONS
from larkbot.driver.memory.core.memory import Visibility
from larkbot.driver.memory.memories import MemoryStore
from larkbot.driver.memory.memory_tools import MemoryAccess
from larkbot.driver.reminders.reminders import ReminderAccess
from larkbot.driver.reminders.store import ReminderStore
from larkbot.driver.tools.core import tools
from larkbot.driver.wake.clients import BusClients
from larkbot.driver.wake.clock import ManualClock
from larkbot.driver.wake.core.turn import ToolRun
from larkbot.driver.wake.executor import ToolExecutor
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import ChatRemindersSettings
from larkbot.runtime.db import DatabaseUnavailable, PoolLimits, create_engine, migrate
from larkbot.testkit.driver.synthetic import segment

T0 = 1_700_000_000_000


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"
    setup = create_engine(url)
    try:
        await migrate(setup, MIGRATIONS)
    finally:
        await setup.dispose()
    found = create_engine(url, pool=PoolLimits(size=1, overflow=0, timeout_s=0.1))
    yield found
    await found.dispose()


def executor(engine: AsyncEngine) -> ToolExecutor:
    clock = ManualClock(T0)
    visibility = Visibility(platform="feishu", chat_id="oc_chat", direct_with=None, global_allowed=False)
    return ToolExecutor(
        BusClients(cast(Bus, None)),
        clock,
        "feishu",
        "oc_chat",
        (segment(1),),
        max_segment_tokens=4000,
        memory=MemoryAccess(MemoryStore(engine), visibility, search_max_results=8, search_max_chars=2000),
        reminders=ReminderAccess(ReminderStore(engine), ChatRemindersSettings(enabled=True), clock, 480),
    )


def call(name: str, **args: Any) -> ToolRun:
    return ToolRun(1, 0, name, args, "key-0", T0 + 10_000)


async def test_a_busy_store_is_an_answer_for_a_work_tool_and_a_deferral_for_a_written_ahead_one(
    engine: AsyncEngine,
) -> None:
    assert tools.MEMORY_SEARCH not in tools.WRITE_AHEAD_TOOLS
    assert tools.SET_REMINDER in tools.WRITE_AHEAD_TOOLS
    ex = executor(engine)
    async with engine.connect():  # the pool's one connection, taken past the transactions' turns
        done = await ex.run(call(tools.MEMORY_SEARCH, query="tea"))
        assert not done.ok
        assert not done.final
        assert done.parts == (TextPart(text="error: the service is unavailable, try later"),)
        with pytest.raises(DatabaseUnavailable, match="QueuePool limit of size 1 overflow 0 reached"):
            await ex.run(call(tools.SET_REMINDER, when="in 2 hours", text="water the plants"))
    # The database serves again: the same tools work.
    done = await ex.run(call(tools.MEMORY_SEARCH, query="tea"))
    assert done.ok
