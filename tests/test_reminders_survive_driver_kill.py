"""A reminder outlives a SIGKILLed driver and reaches the chat exactly once (issue 28, item 6).

The services run as processes (llm-gateway, pipeline, driver, ingress-feishu). A member asks; the model
sets a reminder a few seconds ahead with ``set_reminder``. The driver holding the chat is SIGKILLed as
soon as the turn that set the reminder is stored, so it falls due while that driver is gone:

- SQLite, one driver: the reminder is overdue when the driver restarts, and is delivered then;
- PostgreSQL, two driver replicas: the killed one is restarted at once under a new replica id while its
  leases are still held by the dead one, so the chat's partition changes hands around the reminder's
  time; whichever replica holds it then delivers it.

Either way the pipeline's events hold one ``reminder:<id>`` runtime event, the bus stored it once, a
probe saw it once, the bot phrased it in one message, and the row is ``delivered``.

Killed inside that turn instead (right after ``set_reminder`` ran), the driver leaves the chain open, and
the next holder continues it without the probe (``World.turn_stored``): a reminder delivered before that
continuation starts (a take-over snapshot asked again, say) is taken by it, and no probe sees it
(reproduced by holding the take-over's snapshot back 8 s).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from nats.js.errors import NotFoundError
from sqlalchemy import text
from tests.harness.world import World, world

from larkbot.canonical.llm import AssistantMessage, ToolCallPart
from larkbot.canonical.names import STREAM_EVENTS, Platform
from larkbot.llm_gateway.fake import Action, FakeCall, Reply
from larkbot.runtime.bus import Bus, connect
from larkbot.runtime.config import NatsSettings
from larkbot.runtime.db import create_engine
from larkbot.testkit.payloads import feishu_text, feishu_user
from larkbot.testkit.stack import until

CHAT = "oc_reminder_survives"
MEMBER = feishu_user(1)
SERVICES = ("llm-gateway", "pipeline", "driver", "ingress-feishu")
#: Far enough ahead that the kill, after the rest of the turn, lands first; near enough to keep the run
#: short.
AHEAD_S = 8
REMINDED = "Stand-up time, everyone!"


def _text(call: FakeCall) -> str:
    return call.raw.decode("utf-8", "replace")


def _called(call: FakeCall, name: str) -> bool:
    return any(
        isinstance(m, AssistantMessage)
        and any(isinstance(p, ToolCallPart) and p.name == name for p in m.parts)
        for m in call.request.messages
    )


@dataclass
class ReminderScript:
    """``#remind`` from a member: the probe activates, the primary sets one reminder, then ends its turn.
    The reminder's runtime event: the probe activates, the primary says it in one message."""

    probes: list[FakeCall] = field(default_factory=list)
    primaries: list[FakeCall] = field(default_factory=list)

    def __call__(self, call: FakeCall) -> Action:
        names = {tool.name for tool in call.request.tools}
        body = _text(call)
        if "decide" in names:
            self.probes.append(call)
            woken = "runtime-event" in body or "#remind" in body
            decision = "send_message" if woken else "no_action"
            return Reply.tool_call("decide", {"should_act": decision, "reason": "scripted"}, call_id="d")
        self.primaries.append(call)
        if "runtime-event" in body:
            if _called(call, "send_message"):
                return Reply.tool_call("end_turn", {}, call_id="e")
            return Reply.tool_call("send_message", {"text": REMINDED}, call_id="m")
        if _called(call, "set_reminder") or "set_reminder" not in names:
            return Reply.tool_call("end_turn", {}, call_id="e")
        args = {"when": f"in {AHEAD_S} seconds", "text": "stand-up", "person": MEMBER}
        return Reply(parts=(ToolCallPart(id="r", name="set_reminder", arguments_json=json.dumps(args)),))


async def reminder_rows(w: World) -> list[Any]:
    engine = create_engine(w.database_urls["driver"])
    try:
        async with engine.connect() as conn:
            query = "SELECT reminder_id, status, due_at_ms, person FROM driver_reminders"
            return list((await conn.execute(text(query))).all())
    finally:
        await engine.dispose()


async def stored_reminder_events(bus: Bus, reminder_id: str) -> int:
    """Messages of the EVENTS stream carrying the reminder's dedup key (its subjects are partitioned)."""
    info = await bus.js.stream_info(STREAM_EVENTS)
    found = 0
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        try:
            msg = await bus.js.get_msg(STREAM_EVENTS, seq)
        except NotFoundError:
            continue
        if f'"reminder:{reminder_id}"' in (msg.data or b"").decode():
            found += 1
    return found


async def holder(w: World, replicas: tuple[str, ...]) -> str:
    """The driver replica that holds the chat (the only configured one)."""
    found: list[str] = []

    async def one_holds() -> bool:
        found.clear()
        for name in replicas:
            if await w.metric(name, "larkbot_driver_chats") == 1:
                found.append(name)
        return len(found) == 1

    await until(one_holds, "one driver replica holding the chat")
    return found[0]


@pytest.fixture
async def reminder_bus(nats_url: str) -> AsyncIterator[Bus]:
    bus = await connect(NatsSettings(), "reminder-tests", url=nats_url, give_up_after_s=30)
    try:
        yield bus
    finally:
        await bus.close(drain_timeout_s=5)


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
async def test_a_reminder_fires_once_after_the_driver_is_killed(
    database: str, tmp_path: Path, reminder_bus: Bus, nats_url: str
) -> None:
    postgres = os.environ.get("TEST_DATABASE_URL")
    if database == "postgres" and not postgres:
        pytest.skip("PostgreSQL runs need TEST_DATABASE_URL")
    two = database == "postgres"  # more than one driver replica needs a shared server database
    replicas = ("driver", "driver-r2") if two else ("driver",)
    script = ReminderScript()
    async with world(
        tmp_path / "stack",
        reminder_bus,
        nats_url,
        script,
        {f"feishu:{CHAT}": {"reminders": {"enabled": True}}},
        database=database,
        postgres_url=postgres,
        services=SERVICES,
        config={"reminders": {"poll_interval_s": 0.2}},
        replicas={"driver": 2} if two else None,
    ) as w:
        owner = await holder(w, replicas)
        envelope = feishu_text(
            CHAT, 1, "#remind us of the stand-up", sender=MEMBER, create_time_ms=time.time_ns() // 10**6
        )
        assert await w.feishu.long_connection.push(envelope) == 200

        async def stored() -> bool:
            return len(await reminder_rows(w)) == 1

        await until(stored, "the reminder stored")

        async def set_by_owner() -> bool:
            return await w.metric(owner, "larkbot_driver_reminders_total", event="set") == 1

        # The replica killed is the one that set it: it held the chat.
        await until(set_by_owner, "the holder counting the reminder", timeout_s=5)
        await until(lambda: w.turn_stored("feishu", CHAT), "the turn that set it stored")
        await w.stack.kill(owner)
        (row,) = await reminder_rows(w)
        assert row.status == "pending"
        assert row.person == MEMBER
        reminder_id = row.reminder_id
        if two:
            # Back at once under a new replica id, while the dead one's leases still run out.
            await w.stack.start(owner)
        else:
            await until(lambda: time.time() * 1000 > row.due_at_ms, "the reminder falling due")
            await w.stack.start(owner)
        await w.stack.wait_ready(*replicas)

        async def delivered() -> bool:
            return [r.status for r in await reminder_rows(w)] == ["delivered"]

        await until(delivered, "the reminder delivered")

        async def phrased() -> bool:
            sends = [r for r in w.tap.of_kind("send_message", CHAT) if getattr(r, "text", None) == REMINDED]
            return len(sends) >= 1

        await until(phrased, "the bot reminding the chat")

        keys = [r.dedup_key for r in await w.event_rows("feishu", CHAT) if r.kind == "runtime"]
        assert keys == [f"reminder:{reminder_id}"]
        assert await stored_reminder_events(reminder_bus, reminder_id) == 1
        seen = [c for c in script.probes if f'reminder_id=\\"{reminder_id}\\"' in _text(c)]
        assert len(seen) == 1
        assert '<runtime-event type=\\"reminder\\"' in _text(seen[0])
        sends = [r for r in w.tap.of_kind("send_message", CHAT) if getattr(r, "text", None) == REMINDED]
        assert len({r.idempotency_key for r in sends}) == 1
        delivered_total = 0.0
        for name in replicas:
            delivered_total += await w.metric(name, "larkbot_driver_reminders_total", event="delivered")
        assert delivered_total == 1
        snapshot = await w.snapshot(Platform.FEISHU, CHAT)
        runtime = [s for s in snapshot.segments if s.node_type == "runtime"]
        assert len(runtime) == 1
        assert f'reminder_id="{reminder_id}"' in runtime[0].xml
        assert runtime[0].xml.endswith(">stand-up</runtime-event>")
