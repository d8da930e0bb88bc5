"""The late binding's memories are read while the probe is away (``memory.ahead``): the read starts
before the probe is answered, the primary takes it instead of reading again, and a probe that
suppresses the wake-up leaves nothing behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from larkbot.canonical.llm import LLMReply, LLMRequest, TextPart, UserMessage
from larkbot.driver.memory.core.memory import Memory, NewMemory
from larkbot.driver.tools.core import tools
from larkbot.runtime.bus import Bus
from larkbot.testkit.driver.harness import CHAT_ID, World, decide, world
from larkbot.testkit.driver.synthetic import response, tool_call

FACT = '<fact id="1" uid="ou_alice">is allergic to peanuts</fact>'


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"


def _late_binding(request: LLMRequest) -> str:
    last = request.messages[-1]
    assert isinstance(last, UserMessage)
    part = last.parts[0]
    assert isinstance(part, TextPart)
    return part.text


async def _remembered(w: World) -> list[int]:
    """Saves Alice's high-importance memory; returns the list each read of such memories appends to."""
    store = w.driver.memories
    assert store is not None
    new = NewMemory(
        platform="feishu",
        person_id="ou_alice",
        content="is allergic to peanuts",
        evidence=("om_0",),
        chat_id=CHAT_ID,
        scope="group",
        importance="high",
    )
    await store.save(new, now_ms=w.t0)
    reads: list[int] = []
    original = store.high_importance

    async def counted(persons: Any, visibility: Any, *, limit: int) -> list[Memory]:
        reads.append(limit)
        return await original(persons, visibility, limit=limit)

    store.high_importance = counted  # type: ignore[method-assign]
    return reads


async def test_the_memories_are_read_during_the_probe_and_taken_by_the_primary(
    bus: Bus, nats_url: str, db: str
) -> None:
    async with world(bus, nats_url, db) as w:
        reads = await _remembered(w)
        seen_by_probe: list[int] = []

        async def probe(_request: LLMRequest) -> LLMReply:
            seen_by_probe.append(len(reads))
            return decide("send_message", "asked")

        w.probe_answers.append(probe)
        w.primary_answers.append(response(tool_call(tools.SEND, "s", text="no satay for you")))
        await w.say(1, 0, text="what should I avoid at dinner?", mentions_me=True)
        await w.tick(1000)
        assert [d.text for d in w.platform.delivered] == ["no satay for you"]
        assert seen_by_probe == [1]  # started before the probe's answer
        assert len(reads) == 1  # and taken by the primary: not read again
        assert FACT in _late_binding(w.requests("primary")[0])


async def test_a_suppressed_wake_up_drops_the_read_and_the_next_one_reads_afresh(
    bus: Bus, nats_url: str, db: str
) -> None:
    async with world(bus, nats_url, db) as w:
        reads = await _remembered(w)
        w.probe_answers.append(decide("no_action", "small talk"))
        await w.say(1, 0, text="nice weather")
        await w.tick(1000)
        assert len(reads) == 1
        assert w.requests("primary") == []
        w.probe_answers.append(decide("send_message", "asked"))
        w.primary_answers.append(response(tool_call(tools.SEND, "s", text="indeed")))
        await w.say(2, 2000, text="isn't it?", mentions_me=True)
        await w.tick(3000)
        assert [d.text for d in w.platform.delivered] == ["indeed"]
        assert len(reads) == 2
        assert FACT in _late_binding(w.requests("primary")[0])
