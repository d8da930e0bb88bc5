"""A step left pending by a replica that died during its tool calls is redone by the next holder of the
chat under the same idempotency keys: a send the platform never received is delivered once, one it did
receive is not repeated (SPEC §4.3, sends never duplicated)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import delete

from larkbot.canonical.actions import SendMessageAction
from larkbot.canonical.llm import AssistantMessage, LLMRequest, ToolCallPart, ToolResultMessage
from larkbot.driver.tables import turn_responses
from larkbot.driver.tools.core import tools
from larkbot.driver.wake.repository import ChatMarks, DriverRepository
from larkbot.runtime.bus import Bus
from larkbot.runtime.db import create_engine
from larkbot.testkit.driver.harness import CHAT_ID, World, decide, world
from larkbot.testkit.driver.synthetic import response, segment, tool_call


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"


async def _die_during_the_send(w: World, db: str) -> None:
    """Run a send on replica ``a``, then leave the database as if ``a`` had been killed after writing the
    step ahead and before storing its outcome, and stop ``a``."""
    w.probe_answers.append(decide("send_message", "asked"))
    w.primary_answers.append(response(tool_call(tools.SEND, "s", text="exactly once")))
    await w.say(1, 0, mentions_me=True)
    await w.tick(1000)
    await w.stop_replica("a")
    engine = create_engine(db)
    try:
        repo = DriverRepository(engine)
        done = (await repo.turns("feishu", CHAT_ID))[-1]
        assert done.sent
        assert not done.pending
        ahead = replace(done, entries=done.entries[:1], pending=True, sent=False, participation_attempts=0)
        async with engine.begin() as conn:
            await conn.execute(delete(turn_responses))
        await repo.add_turn(ahead)
        await repo.save_marks("feishu", CHAT_ID, ChatMarks(0, 0))
    finally:
        await engine.dispose()


async def _sends(w: World) -> list[SendMessageAction]:
    return [r for r in w.platform.requests if isinstance(r, SendMessageAction)]


async def test_a_send_that_never_left_is_delivered_by_the_next_holder(
    bus: Bus, nats_url: str, db: str
) -> None:
    async with world(bus, nats_url, db) as w:
        await _die_during_the_send(w, db)
        # The platform never saw it.
        w.platform.delivered.clear()
        w.platform.executed.clear()
        await w.start_replica("b")
        await w.balanced()
        await w.tick(2000)
        assert [d.text for d in w.platform.delivered] == ["exactly once"]
        sends = await _sends(w)
        assert len(sends) == 2
        assert sends[0].idempotency_key == sends[1].idempotency_key
        assert len(w.llm.by_purpose("probe")) == 1  # redone, not decided again
        assert len(w.llm.by_purpose("primary")) == 1
        turns = await w.driver.repo.turns("feishu", CHAT_ID)  # type: ignore[union-attr]
        assert len(turns) == 1
        assert turns[0].sent
        assert not turns[0].pending
        await w.synced()
        await w.tick(60_000)
        assert len(w.llm.requests) == 2  # nothing left to do: input and the redone step are processed


async def test_a_send_the_platform_executed_is_not_repeated(bus: Bus, nats_url: str, db: str) -> None:
    async with world(bus, nats_url, db) as w:
        await _die_during_the_send(w, db)
        await w.start_replica("b")
        await w.balanced()
        await w.tick(2000)
        assert [d.text for d in w.platform.delivered] == ["exactly once"]
        sends = await _sends(w)
        assert len(sends) == 2
        assert sends[0].idempotency_key == sends[1].idempotency_key
        turns = await w.driver.repo.turns("feishu", CHAT_ID)  # type: ignore[union-attr]
        assert [(t.sent, t.pending) for t in turns] == [(True, False)]


async def test_input_after_the_pending_step_still_wakes_the_bot(bus: Bus, nats_url: str, db: str) -> None:
    async with world(bus, nats_url, db) as w:
        await _die_during_the_send(w, db)
        await w.pipeline.append(segment(2, at_ms=w.t0 + 1500, text="and another thing"))
        await w.start_replica("b")
        await w.balanced()
        w.probe_answers.append(decide("no_action", "already answered"))
        await w.tick(3000)
        assert [d.text for d in w.platform.delivered] == ["exactly once"]
        probes = w.llm.by_purpose("probe")
        assert len(probes) == 2  # the newer message is judged on its own


def _dangling_calls(request: LLMRequest) -> list[str]:
    """Tool calls without a result in the request (providers refuse such a conversation)."""
    called = [
        p.id
        for m in request.messages
        if isinstance(m, AssistantMessage)
        for p in m.parts
        if isinstance(p, ToolCallPart)
    ]
    answered = {m.tool_call_id for m in request.messages if isinstance(m, ToolResultMessage)}
    return [c for c in called if c not in answered]


async def test_after_the_redo_a_new_turn_sees_the_redone_step_complete(
    bus: Bus, nats_url: str, db: str
) -> None:
    async with world(bus, nats_url, db) as w:
        await _die_during_the_send(w, db)
        await w.pipeline.append(segment(2, at_ms=w.t0 + 1500, text="and one more question", mentions_me=True))
        w.probe_answers.append(decide("send_message", "a new question"))
        w.primary_answers.append(response(tool_call(tools.SEND, "s2", text="second answer")))
        await w.start_replica("b")
        await w.balanced()
        await w.tick(3000)
        assert [d.text for d in w.platform.delivered] == ["exactly once", "second answer"]
        primary = w.llm.by_purpose("primary")
        assert len(primary) == 2
        assert _dangling_calls(primary[1]) == []


async def test_a_redone_step_that_keeps_working_continues_its_chain(bus: Bus, nats_url: str, db: str) -> None:
    async with world(bus, nats_url, db) as w:
        w.probe_answers.append(decide("send_message", "asked"))
        w.primary_answers.append(
            response(tool_call(tools.SEND, "s", text="looking it up", still_working=True))
        )
        w.primary_answers.append(response(tool_call(tools.END, "e")))
        await w.say(1, 0, mentions_me=True)
        await w.tick(1000)
        await w.stop_replica("a")
        engine = create_engine(db)
        try:
            repo = DriverRepository(engine)
            steps = await repo.turns("feishu", CHAT_ID)
            first = steps[0]
            assert first.requires_follow_up
            async with engine.begin() as conn:
                await conn.execute(delete(turn_responses))
            await repo.add_turn(
                replace(first, entries=first.entries[:1], pending=True, sent=False, requires_follow_up=False)
            )
            await repo.save_marks("feishu", CHAT_ID, ChatMarks(0, 0))
        finally:
            await engine.dispose()
        w.platform.delivered.clear()
        w.platform.executed.clear()
        w.primary_answers.append(response(tool_call(tools.SEND, "s2", text="found it")))
        await w.start_replica("b")
        await w.balanced()
        await w.tick(2000)
        assert [d.text for d in w.platform.delivered] == ["looking it up", "found it"]
        primary = w.llm.by_purpose("primary")
        assert len(primary) == 3  # a, a, then b's continuation (no probe)
        assert len(w.llm.by_purpose("probe")) == 1
        assert _dangling_calls(primary[2]) == []


async def test_a_send_nobody_answered_stays_pending_and_is_redone_when_the_ingress_is_back(
    bus: Bus, nats_url: str, db: str
) -> None:
    # Regression (chaos seed 829669): the ingress was restarting for longer than the three attempts of a
    # send; the step was closed "delivery unknown" and the member's question never got its answer.
    async with world(bus, nats_url, db) as w:
        await w.platform.endpoint.stop()  # no ingress on actions.feishu
        w.probe_answers.append(decide("send_message", "asked"))
        w.primary_answers.append(response(tool_call(tools.SEND, "s", text="worth the wait")))
        await w.say(1, 0, mentions_me=True)
        await w.tick(1000)
        turns = await w.driver.repo.turns("feishu", CHAT_ID)  # type: ignore[union-attr]
        assert [(t.pending, t.sent) for t in turns] == [(True, False)]
        assert w.chat.schedule.retry is not None  # a transient failure, retried
        assert w.platform.delivered == []

        await w.platform.endpoint.start()
        await w.tick(1000 + 5000)
        assert [d.text for d in w.platform.delivered] == ["worth the wait"]
        turns = await w.driver.repo.turns("feishu", CHAT_ID)  # type: ignore[union-attr]
        assert [(t.pending, t.sent) for t in turns] == [(False, True)]
        assert len(w.llm.by_purpose("primary")) == 1  # redone from the stored step, not asked again
        await w.synced()
        await w.tick(60_000)
        assert [d.text for d in w.platform.delivered] == ["worth the wait"]
