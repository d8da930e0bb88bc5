"""Reminders: the rules (limits, the late-binding lines, the delivery event), the tools on a real database
(set → persisted and listed, cancelled, a redone step setting nothing twice, refusals), delivery exactly
once (two replicas racing, a replica dying between claim and publish or between publish and mark, on
the real bus), and a reminder set by the model coming back to the chat as a runtime event."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import delete

from larkbot.canonical.events import RuntimeEvent
from larkbot.canonical.llm import LLMRequest, TextPart, ToolResultMessage, UserMessage
from larkbot.canonical.names import STREAM_EVENTS
from larkbot.driver.app import MIGRATIONS, _publish_event
from larkbot.driver.reminders.core import reminders as core
from larkbot.driver.reminders.core.reminders import Reminder
from larkbot.driver.reminders.reminders import ReminderAccess, ReminderDelivery
from larkbot.driver.reminders.store import ReminderStore
from larkbot.driver.tables import turn_responses
from larkbot.driver.tools.core import tools
from larkbot.driver.wake.clock import ManualClock
from larkbot.driver.wake.core.protocol import ToolRun
from larkbot.driver.wake.repository import ChatMarks, DriverRepository
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import ChatRemindersSettings, RemindersSettings
from larkbot.runtime.db import create_engine, migrate
from larkbot.testkit.driver.harness import decide, end_turn, world
from larkbot.testkit.driver.synthetic import response, tool_call

T0 = 1_800_000_000_000  # 2027-01-15 08:00 UTC, 16:00 at +08:00
OFFSET = 480
CHAT = ("feishu", "oc_rem")
HOUR = 3_600_000


def counted(event: str) -> float:
    value = REGISTRY.get_sample_value("larkbot_driver_reminders_total", {"event": event})
    return value or 0.0


def reminder(n: int, *, person: str | None = None, due: int = T0 + HOUR) -> Reminder:
    return Reminder(
        reminder_id=f"rem_{n:010x}",
        platform=CHAT[0],
        chat_id=CHAT[1],
        call_key=f"key-{n}",
        person=person,
        text=f"reminder {n}",
        due_at_ms=due,
        status="pending",
        created_at_ms=T0,
    )


# -- the rules ----------------------------------------------------------------------------------------
def test_the_chats_and_each_persons_limits() -> None:
    limits = ChatRemindersSettings(max_pending=3, max_pending_per_person=2)
    two_of_alice = [reminder(1, person="ou_alice"), reminder(2, person="ou_alice")]
    assert core.over_limit(two_of_alice, "ou_bob", limits) is None
    assert core.over_limit(two_of_alice, None, limits) is None
    refused = core.over_limit(two_of_alice, "ou_alice", limits)
    assert refused is not None
    assert "ou_alice has 2 pending reminders" in refused
    full = [*two_of_alice, reminder(3)]
    refused = core.over_limit(full, None, limits)
    assert refused is not None
    assert "this chat has 3 pending reminders" in refused
    assert "cancel" in refused


def test_the_late_binding_lines_and_the_delivery_event() -> None:
    pending = [reminder(1, person="ou_alice"), reminder(2, due=T0 + 2 * HOUR + 30_000)]
    assert core.late_binding_lines([], OFFSET) == ()
    assert core.late_binding_lines(pending, OFFSET) == (
        "Pending reminders in this chat (each arrives as a runtime event when due):",
        "- rem_0000000001 at 2027-01-15 17:00 (Friday) for ou_alice: reminder 1",
        "- rem_0000000002 at 2027-01-15 18:00:30 (Friday): reminder 2",
    )
    fired = Reminder(**{**_fields(pending[0]), "status": "fired", "ended_at_ms": T0 + HOUR + 700})
    event = core.delivery_event(fired, utc_offset_min=OFFSET)
    assert event.dedup_key == "reminder:rem_0000000001"
    assert event.type == "reminder"
    assert event.attributes == (
        ("reminder_id", "rem_0000000001"),
        ("due", "2027-01-15 17:00 (Friday)"),
        ("for", "ou_alice"),
        ("set", "2027-01-15 16:00 (Friday)"),
    )
    assert (event.text, event.received_at_ms, event.utc_offset_min) == ("reminder 1", T0 + HOUR + 700, 480)
    # Everything comes from the row: the same claim publishes the same event.
    assert core.delivery_event(fired, utc_offset_min=OFFSET) == event


def _fields(r: Reminder) -> dict[str, Any]:
    return {name: getattr(r, name) for name in Reminder.__dataclass_fields__}


# -- the tools on a real database ---------------------------------------------------------------------
@pytest.fixture
async def store(database_url: str) -> AsyncIterator[ReminderStore]:
    engine = create_engine(database_url)
    await migrate(engine, MIGRATIONS)
    try:
        yield ReminderStore(engine)
    finally:
        await engine.dispose()


def access(store: ReminderStore, clock: ManualClock, **limits: Any) -> ReminderAccess:
    return ReminderAccess(store, ChatRemindersSettings(enabled=True, **limits), clock, OFFSET)


def run(n: int, name: str, **args: Any) -> ToolRun:
    return ToolRun(1, n, name, args, f"chain:1:{n}", T0 + 15_000)


async def test_a_reminder_is_persisted_listed_and_cancelled(store: ReminderStore) -> None:
    clock = ManualClock(T0)
    tool = access(store, clock)
    set_before = counted("set")
    ok, text = await tool.set(
        *CHAT,
        run(1, "set_reminder"),
        {"when": "tomorrow 9:00", "text": " stand-up ", "person": "ou_alice"},
    )
    assert ok, text
    rid = re.search(r"rem_[0-9a-f]{10}", text)
    assert rid is not None
    assert text == (
        f"reminder {rid[0]} set for 2027-01-16 09:00 (Saturday) for ou_alice; it arrives then as a "
        "runtime event, and cancel_reminder removes it"
    )
    stored = await store.get(rid[0])
    assert stored is not None
    assert (stored.text, stored.person, stored.status, stored.chat_id) == (
        "stand-up",
        "ou_alice",
        "pending",
        CHAT[1],
    )
    assert stored.due_at_ms == T0 + 17 * HOUR  # 16:00 → 09:00 the next day, at +08:00
    ok, text = await tool.set(*CHAT, run(2, "set_reminder"), {"when": "in 30 minutes", "text": "tea"})
    assert ok
    assert counted("set") == set_before + 2

    ok, listed = await tool.show(*CHAT)
    assert ok
    lines = listed.splitlines()
    assert lines[0] == "pending reminders, soonest first:"
    assert lines[1].endswith("at 2027-01-15 16:30 (Friday): tea")
    assert lines[2] == f"- {rid[0]} at 2027-01-16 09:00 (Saturday) for ou_alice: stand-up"
    assert (await tool.show("feishu", "oc_other"))[1] == "no pending reminders in this chat"

    cancelled_before = counted("cancelled")
    assert await tool.cancel(*CHAT, rid[0]) == (
        True,
        f"reminder {rid[0]} (due 2027-01-16 09:00 (Saturday)) cancelled",
    )
    assert await tool.cancel(*CHAT, rid[0]) == (
        True,
        f"nothing to cancel: reminder {rid[0]} was cancelled already",
    )
    assert counted("cancelled") == cancelled_before + 1
    assert await tool.cancel("feishu", "oc_other", lines[1][2:16]) == (
        False,
        f"error: no reminder {lines[1][2:16]!r} in this chat",
    )
    assert (await tool.cancel(*CHAT, "nonsense"))[0] is False
    stored = await store.get(rid[0])
    assert stored is not None
    assert stored.status == "cancelled"
    assert stored.ended_at_ms == T0
    assert [r.text for r in await store.pending(*CHAT)] == ["tea"]


async def test_a_redone_step_sets_no_second_reminder(store: ReminderStore) -> None:
    tool = access(store, ManualClock(T0))
    args = {"when": "in 2 hours", "text": "call the plumber"}
    first = await tool.set(*CHAT, run(1, "set_reminder"), args)
    again = await tool.set(*CHAT, run(1, "set_reminder"), args)
    assert first == again
    assert len(await store.pending(*CHAT)) == 1


async def test_refusals_say_why_and_are_counted(store: ReminderStore) -> None:
    tool = access(store, ManualClock(T0), max_pending=3, max_pending_per_person=2, max_text_chars=20)
    refused_before = counted("refused")
    for n in (1, 2):
        assert (
            await tool.set(
                *CHAT, run(n, "set_reminder"), {"when": "in 1 hour", "text": "x", "person": "ou_a"}
            )
        )[0]
    assert await tool.set(
        *CHAT, run(3, "set_reminder"), {"when": "in 1 hour", "text": "x", "person": "ou_a"}
    ) == (
        False,
        "refused: ou_a has 2 pending reminders, the most one person may have; cancel one of theirs with "
        "cancel_reminder first",
    )
    assert (await tool.set(*CHAT, run(4, "set_reminder"), {"when": "in 1 hour", "text": "y"}))[0]
    full = await tool.set(*CHAT, run(5, "set_reminder"), {"when": "in 1 hour", "text": "z"})
    assert full[0] is False
    assert "this chat has 3 pending reminders" in full[1]
    assert await tool.set(*CHAT, run(6, "set_reminder"), {"when": "at 9", "text": "z"}) == (
        False,
        "refused: say am or pm, or write the time as HH:MM (09:00 or 21:00)",
    )
    long_text = await tool.set(*CHAT, run(7, "set_reminder"), {"when": "in 1 hour", "text": "z" * 21})
    assert long_text == (False, "refused: the text is over 20 characters")
    blank = await tool.set(*CHAT, run(8, "set_reminder"), {"when": "in 1 hour", "text": "  "})
    assert blank == (False, "refused: the text is empty")
    assert counted("refused") == refused_before + 5


# -- delivery exactly once ----------------------------------------------------------------------------
class Replica:
    """One replica's delivery, holding the chat, publishing to the real bus."""

    def __init__(self, store: ReminderStore, clock: ManualClock, bus: Bus) -> None:
        self.bus = bus
        self.published: list[RuntimeEvent] = []
        self.fail_after_publish = False
        self.delivery = ReminderDelivery(
            store,
            RemindersSettings(),
            clock,
            held=lambda: {f"{CHAT[0]}:{CHAT[1]}"},
            publish=self._publish,
            utc_offset_min=lambda _platform, _chat: OFFSET,
        )

    async def _publish(self, event: RuntimeEvent) -> None:
        await _publish_event(self.bus, event)
        self.published.append(event)
        if self.fail_after_publish:
            raise ConnectionError("died before marking it delivered")


async def events_stored(bus: Bus) -> int:
    info = await bus.js.stream_info(STREAM_EVENTS)
    return int(info.state.messages)


async def test_two_replicas_racing_deliver_each_reminder_once(store: ReminderStore, bus: Bus) -> None:
    clock = ManualClock(T0)
    for n in range(1, 6):
        await store.add(reminder(n, due=T0 + n * 1000))
    await store.add(reminder(9, due=T0 + HOUR))  # not due yet
    a, b = Replica(store, clock, bus), Replica(store, clock, bus)
    assert await a.delivery.deliver_once() == 0  # nothing due yet
    clock.advance(10_000)
    delivered_before = counted("delivered")
    results = await asyncio.gather(a.delivery.deliver_once(), b.delivery.deliver_once())
    assert sum(results) == 5
    # One claim each; a row the other replica claimed and has not marked yet may be published by both
    # (that is how a claim outlives its replica) — the bus stores it once.
    keys = {e.dedup_key for e in a.published + b.published}
    assert keys == {f"reminder:rem_{n:010x}" for n in range(1, 6)}
    assert await events_stored(bus) == 5
    assert counted("delivered") == delivered_before + 5
    assert [r.status for r in await store.undelivered(clock.now_ms())] == []
    assert [r.reminder_id for r in await store.pending(*CHAT)] == ["rem_0000000009"]
    # A later round of either finds nothing.
    assert await a.delivery.deliver_once() + await b.delivery.deliver_once() == 0


async def test_a_replica_dying_between_claim_and_publish_leaves_it_to_the_next_owner(
    store: ReminderStore, bus: Bus
) -> None:
    clock = ManualClock(T0 + HOUR)
    await store.add(reminder(1))
    # The first owner claimed it and died before publishing anything.
    assert await store.claim("rem_0000000001", T0 + HOUR)
    assert not await store.claim("rem_0000000001", T0 + HOUR)  # nobody claims it twice
    assert not await store.cancel("rem_0000000001", T0 + HOUR)  # nor cancels it once claimed
    successor = Replica(store, clock, bus)
    assert await successor.delivery.deliver_once() == 1
    assert [e.dedup_key for e in successor.published] == ["reminder:rem_0000000001"]
    assert await events_stored(bus) == 1


async def test_a_replica_dying_between_publish_and_mark_publishes_a_duplicate_only(
    store: ReminderStore, bus: Bus
) -> None:
    clock = ManualClock(T0 + HOUR)
    await store.add(reminder(1))
    first = Replica(store, clock, bus)
    first.fail_after_publish = True
    with pytest.raises(ConnectionError):
        await first.delivery.deliver_once()
    stored = await store.get("rem_0000000001")
    assert stored is not None
    assert stored.status == "fired"
    clock.advance(5_000)  # the next owner's round comes later; the event is the row's, not the round's
    successor = Replica(store, clock, bus)
    assert await successor.delivery.deliver_once() == 1
    assert successor.published == first.published
    # Published twice, stored once: the same Nats-Msg-Id (and the pipeline's unique key behind it).
    assert await events_stored(bus) == 1
    stored = await store.get("rem_0000000001")
    assert stored is not None
    assert stored.status == "delivered"


async def test_a_replica_delivers_only_the_chats_it_holds(store: ReminderStore, bus: Bus) -> None:
    clock = ManualClock(T0 + HOUR)
    await store.add(reminder(1))
    other = Replica(store, clock, bus)
    other.delivery.held = lambda: {"feishu:oc_elsewhere"}
    assert await other.delivery.deliver_once() == 0
    stored = await store.get("rem_0000000001")
    assert stored is not None
    assert stored.status == "pending"


async def test_ended_reminders_are_removed_after_retention(store: ReminderStore, bus: Bus) -> None:
    clock = ManualClock(T0 + HOUR)
    await store.add(reminder(1))
    await store.add(reminder(2, due=T0 + 2 * HOUR))
    await store.add(reminder(3, due=T0 + 90 * 86_400_000))
    await store.cancel("rem_0000000002", T0 + HOUR)
    replica = Replica(store, clock, bus)
    await replica.delivery.round()
    assert await replica.delivery.sweep_once() == 0
    clock.advance(31 * 86_400_000)
    assert await replica.delivery.sweep_once() == 2
    assert [r.reminder_id for r in await store.pending(*CHAT)] == ["rem_0000000003"]


# -- through the wake-up, on the real bus ---------------------------------------------------------------
def _texts(request: LLMRequest) -> str:
    return "\n".join(
        p.text
        for m in request.messages
        if isinstance(m, UserMessage | ToolResultMessage)
        for p in m.parts
        if isinstance(p, TextPart)
    )


def _late(request: LLMRequest) -> str:
    late = request.messages[-1]
    assert isinstance(late, UserMessage)
    assert isinstance(late.parts[0], TextPart)
    return late.parts[0].text


def _results(request: LLMRequest) -> list[str]:
    return [
        p.text
        for m in request.messages
        if isinstance(m, ToolResultMessage)
        for p in m.parts
        if isinstance(p, TextPart)
    ]


async def test_a_reminder_set_by_the_model_comes_back_to_the_chat(
    bus: Bus, nats_url: str, tmp_path: Any
) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"
    async with world(
        bus, nats_url, db, reminder_delivery={"poll_interval_s": 0.05}, reminders={"enabled": True}
    ) as w:
        w.probe_answers.append(decide("send_message", "asked for reminders"))
        w.primary_answers.extend(
            [
                response(
                    tool_call(
                        tools.SET_REMINDER, "s1", when="in 2 hours", text="stand-up", person="ou_alice"
                    ),
                    tool_call(tools.SET_REMINDER, "s2", when="tomorrow 9:00", text="dentist"),
                ),
                end_turn(),
            ]
        )
        await w.say(1, 0, mentions_me=True, text="@Lark remind us")
        await w.tick(1000)
        first = w.requests("primary")
        assert tools.SET_REMINDER in {t.name for t in first[0].tools}
        assert "Pending reminders" not in _late(first[0])
        results = _results(first[1])
        ids = [m[0] for r in results if (m := re.search(r"rem_[0-9a-f]{10}", r))]
        assert len(ids) == 2, results
        standup, dentist = ids

        # The next wake-up's late-binding message lists both; the model cancels one and lists the rest.
        w.probe_answers.append(decide("send_message", "asked to drop the dentist"))
        w.primary_answers.extend(
            [
                response(
                    tool_call(tools.CANCEL_REMINDER, "c1", id=dentist),
                    tool_call(tools.LIST_REMINDERS, "l1"),
                ),
                end_turn(),
            ]
        )
        await w.say(2, 2000, mentions_me=True, text="@Lark forget the dentist")
        await w.tick(3000)
        second = w.requests("primary")[2:]
        late = _late(second[0])
        assert f"- {standup} at 2027-01-15 18:00:01 (Friday) for ou_alice: stand-up" in late
        assert f"- {dentist} at 2027-01-16 09:00 (Saturday): dentist" in late
        assert late.index("Pending reminders") > late.index("Current time")
        assert "Pending reminders" not in second[0].system
        cancelled, listed = _results(second[1])[-2:]
        assert cancelled.endswith("cancelled")
        assert listed.splitlines() == [
            "pending reminders, soonest first:",
            f"- {standup} at 2027-01-15 18:00:01 (Friday) for ou_alice: stand-up",
        ]

        # Two hours on: the reminder comes back as a runtime event and wakes the chat, once.
        w.probe_answers.append(decide("send_message", "a reminder is due"))
        w.primary_answers.append(response(tool_call(tools.SEND, "m", text="Stand-up time, @Alice!")))
        await w.tick(2 * 3_600_000 + 1000)
        event = await w.pipeline.runtime_event(f"reminder:{standup}")
        assert dict(event.attributes)["for"] == "ou_alice"
        await w.synced()
        await w.tick(2 * 3_600_000 + 5000)
        woken = [p for p in w.requests("probe") if f'reminder_id="{standup}"' in _texts(p)]
        assert len(woken) == 1
        assert '<runtime-event type="reminder"' in _texts(woken[0])
        reminding = w.requests("primary")[-1]
        assert f'reminder_id="{standup}"' in _texts(reminding)
        assert "Pending reminders" not in _late(reminding)  # delivered: no longer pending
        assert [e.dedup_key for e in w.pipeline.runtime_published] == [f"reminder:{standup}"]


async def test_a_driver_dying_before_the_step_is_stored_sets_the_reminder_once(
    bus: Bus, nats_url: str, tmp_path: Any
) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"
    async with world(bus, nats_url, db, reminders={"enabled": True}) as w:
        w.probe_answers.append(decide("send_message", "asked for a reminder"))
        w.primary_answers.extend(
            [response(tool_call(tools.SET_REMINDER, "s", when="in 2 hours", text="stand-up")), end_turn()]
        )
        await w.say(1, 0, mentions_me=True, text="@Lark remind me")
        await w.tick(1000)
        await w.stop_replica("a")
        # What a driver killed between the reminder's insert and the step's complete record leaves: the
        # reminder, and the step written ahead (its answer, no results).
        engine = create_engine(db)
        try:
            repo = DriverRepository(engine)
            first = (await repo.turns("feishu", w.chat_id))[0]
            async with engine.begin() as conn:
                await conn.execute(delete(turn_responses))
            await repo.add_turn(
                replace(first, entries=first.entries[:1], pending=True, requires_follow_up=False)
            )
            await repo.save_marks("feishu", w.chat_id, ChatMarks(0, 0))
        finally:
            await engine.dispose()
        set_before = counted("set")
        await w.start_replica("b")
        await w.balanced()
        await w.tick(2000)
        store = w.driver.runner.reminders
        (kept,) = await store.pending("feishu", w.chat_id)
        assert kept.text == "stand-up"
        assert counted("set") == set_before
        redone = (await w.driver.repo.turns("feishu", w.chat_id))[0]
        assert not redone.pending
        results = [m for m in redone.entries if isinstance(m, ToolResultMessage)]
        assert len(results) == 1
        assert isinstance(results[0].parts[0], TextPart)
        assert results[0].parts[0].text.startswith(f"reminder {kept.reminder_id} set for")
        # Redone from the stored step (its call, its key), not asked of the model again.
        assert redone.entries[0] == first.entries[0]
