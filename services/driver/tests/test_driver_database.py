"""The driver while its database is unavailable for a while (docs/performance.md "Sustained load"): a
locked SQLite (a second connection holding the write lock, the driver's busy timeout shortened through the
URL) or a pool with no connection left.

- A wake-up that meets it is retried after a backoff, the mention answered exactly once: the probe's
  activation is reused, and a step written ahead before its send stays the resume point.
- The failure path's own write (the chat's marks after a latching failure) meeting it neither ends the
  chat's loop nor stops the service; the marks are saved once the database takes them.
- Wake-ups beyond what the pool holds wait for their turn instead of failing.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from larkbot.canonical.actions import SendMessageAction
from larkbot.canonical.llm import LLMError
from larkbot.driver.tools.core import tools
from larkbot.runtime.bus import Bus
from larkbot.runtime.db import PoolLimits, transaction
from larkbot.testkit.driver.harness import CHAT_ID, World, decide, world
from larkbot.testkit.driver.synthetic import response, tool_call
from larkbot.testkit.stack import until

#: The driver's SQLite busy timeout in these tests: how long a write waits for the lock before it fails.
BUSY_S = 0.2
WAIT_S = 30.0


class WriteLock:
    """A second connection to the driver's SQLite file that takes its write lock, as a long writer of
    another process would; readers go on (WAL), writers wait their busy timeout and fail."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, timeout=WAIT_S)
        self.held = False

    def take(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.held = True

    def release(self) -> None:
        if self.held:
            self.conn.execute("ROLLBACK")
            self.held = False

    def close(self) -> None:
        self.release()
        self.conn.close()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "driver.db"


@pytest.fixture
def db(db_path: Path) -> str:
    return f"sqlite+aiosqlite:///{db_path}?timeout={BUSY_S}"


@pytest.fixture
def lock(db_path: Path) -> Iterator[WriteLock]:
    found = WriteLock(db_path)
    yield found
    found.close()


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def crashes() -> float:
    return sum(
        s.value
        for metric in REGISTRY.collect()
        if metric.name == "larkbot_driver_wake_crashes"
        for s in metric.samples
        if s.name == "larkbot_driver_wake_crashes_total"
    )


def deferred() -> float:
    return sample("larkbot_driver_wake_failures_total", outcome="database_retried")


def sends(w: World, chat_id: str = CHAT_ID) -> list[SendMessageAction]:
    return [r for r in w.platform.requests if isinstance(r, SendMessageAction) and r.chat_id == chat_id]


async def test_a_wake_up_meeting_a_locked_database_is_retried_and_answers_once(
    bus: Bus, nats_url: str, db: str, lock: WriteLock
) -> None:
    async with world(bus, nats_url, db) as w:
        deferred_before, crashes_before = deferred(), crashes()
        latched_before = sample("larkbot_driver_wake_failures_total", outcome="permanent")
        w.probe_answers.append(decide("send_message", "asked"))
        # The model is asked again by the retry (the first step never got stored).
        w.primary_answers.extend([response(tool_call(tools.SEND, "s", text="answered once"))] * 2)
        lock.take()
        await w.say(1, 0, mentions_me=True)
        await w.tick(1000)
        # The step written ahead met the lock: nothing was sent, and the wake-up waits for its retry.
        assert w.platform.delivered == []
        retry = w.chat.schedule.retry
        assert retry is not None
        assert retry.deferrals == 1
        assert retry.activation is not None
        assert retry.activation.decision == "send_message"
        assert deferred() == deferred_before + 1
        assert w.chat.marks.processed_until_ms == 0  # not latched: the input is still to answer

        lock.release()
        await w.tick(2000)
        assert [d.text for d in w.platform.delivered] == ["answered once"]
        assert len(w.llm.by_purpose("probe")) == 1  # the activation was reused
        assert len(w.llm.by_purpose("primary")) == 2
        turns = await w.driver.repo.turns("feishu", CHAT_ID)
        assert [(t.sent, t.pending) for t in turns] == [(True, False)]
        marks = await w.driver.repo.marks("feishu", CHAT_ID)
        assert marks is not None
        assert marks.processed_until_ms == w.t0
        assert crashes() == crashes_before
        assert sample("larkbot_driver_wake_failures_total", outcome="permanent") == latched_before

        await w.synced()
        await w.tick(60_000)
        assert [d.text for d in w.platform.delivered] == ["answered once"]
        assert len(w.llm.requests) == 3


async def test_a_sent_step_whose_record_meets_a_locked_database_is_redone_not_repeated(
    bus: Bus, nats_url: str, db: str, lock: WriteLock
) -> None:
    # Without the probe, no write of the driver's (the probe's record) can be in flight as the lock is
    # taken from the loop's thread.
    async with world(bus, nats_url, db, probe_enabled=False) as w:
        deferred_before, crashes_before = deferred(), crashes()
        w.primary_answers.append(response(tool_call(tools.SEND, "s", text="exactly once")))
        # The lock is taken as the platform executes the send: the step's complete record cannot be
        # stored, its pending version (written before the send) stays.
        w.platform.on_sent = lambda _action: lock.take()
        await w.say(1, 0, mentions_me=True)
        await w.tick(1000)
        assert [d.text for d in w.platform.delivered] == ["exactly once"]
        assert deferred() == deferred_before + 1

        w.platform.on_sent = None
        lock.release()
        turns = await w.driver.repo.turns("feishu", CHAT_ID)
        assert [(t.sent, t.pending) for t in turns] == [(False, True)]
        await w.tick(2000)
        # Redone under the same idempotency key: the platform answered "duplicate", nothing new was sent.
        assert [d.text for d in w.platform.delivered] == ["exactly once"]
        attempts = sends(w)
        assert len(attempts) == 2
        assert attempts[0].idempotency_key == attempts[1].idempotency_key
        assert len(w.llm.by_purpose("primary")) == 1  # the stored step was redone, not asked again
        turns = await w.driver.repo.turns("feishu", CHAT_ID)
        assert [(t.sent, t.pending) for t in turns] == [(True, False)]
        assert crashes() == crashes_before

        await w.synced()
        await w.tick(60_000)
        assert [d.text for d in w.platform.delivered] == ["exactly once"]


async def test_marks_the_database_refuses_are_saved_later_and_the_service_keeps_running(
    bus: Bus, nats_url: str, db: str, lock: WriteLock
) -> None:
    async with world(bus, nats_url, db) as w:
        marks_before = sample("larkbot_driver_marks_deferred_total")
        w.probe_answers.append(decide("send_message", "asked"))
        # A refusal latches the chat; recording the latch (its marks) meets the lock.
        w.primary_answers.append(LLMError(request_id="r", category="permanent", message="refused"))
        lock.take()
        await w.say(1, 0, mentions_me=True)
        await w.tick(1000)
        chat = w.chat
        assert sample("larkbot_driver_marks_deferred_total") == marks_before + 1
        assert chat.unsaved is not None
        assert chat.marks.processed_until_ms == w.t0  # latched in memory: the refused input is not rerun
        assert not w.contexts["a"].stopping.is_set()  # the chat's loop did not die, nor the service

        lock.release()
        await w.tick(2000)  # the backoff (retry.background: 0.5 s ± 25 %) has passed
        assert chat.unsaved is None
        saved = await w.driver.repo.marks("feishu", CHAT_ID)
        assert saved is not None
        assert saved.processed_until_ms == w.t0
        assert w.platform.delivered == []

        # The same loop answers the next mention.
        w.probe_answers.append(decide("send_message", "asked again"))
        w.primary_answers.append(response(tool_call(tools.SEND, "s", text="here now")))
        await w.say(2, 3000, mentions_me=True)
        await w.tick(4000)
        assert [d.text for d in w.platform.delivered] == ["here now"]
        assert w.chat is chat
        assert not w.contexts["a"].stopping.is_set()


CHATS = ("oc_load_1", "oc_load_2", "oc_load_3", "oc_load_4")


async def test_wake_ups_beyond_the_pool_wait_for_their_turn_instead_of_failing(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    # One connection, none beyond it, and a short wait for it: a wake-up that waited for the pool's
    # connection would fail within half a second.
    pool = PoolLimits(size=1, overflow=0, timeout_s=0.5)
    async with world(bus, nats_url, database_url, chats=CHATS, database_pool=pool) as w:
        deferred_before, crashes_before = deferred(), crashes()
        for chat_id in CHATS:
            w.queue("probe", chat_id).append(decide("send_message", "asked"))
            w.queue("primary", chat_id).append(response(tool_call(tools.SEND, "s", text=f"hi {chat_id}")))
        engine = w.driver.repo.engine
        async with transaction(engine):  # the pool's one connection, in its turn like any other
            for chat_id in CHATS:
                await w.say(1, 0, chat_id=chat_id, mentions_me=True)
            ticking = asyncio.create_task(w.tick(1000))

            def queued() -> bool:
                # Every chat woke (asked its probe) and wake-ups queue for the database behind this one.
                assert not ticking.done(), "the wake-ups finished while the database was held"
                return len(w.llm.by_purpose("probe")) == len(CHATS) and sample(
                    "larkbot_database_transactions_waiting"
                ) >= len(CHATS)

            await until(queued, "the wake-ups to queue for the database")
        await asyncio.wait_for(ticking, WAIT_S)
        assert sorted(d.text for d in w.platform.delivered) == [f"hi {c}" for c in CHATS]
        assert deferred() == deferred_before
        assert crashes() == crashes_before
        assert sample("larkbot_database_transactions_waiting") == 0
