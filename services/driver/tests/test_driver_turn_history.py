"""The turn responses a replica keeps for the chats it holds (``wake.history``): what a wake-up loads is
what the database holds, byte for byte, without reading it back after the replica's own writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from larkbot.canonical.llm import AssistantMessage, TextPart, Usage
from larkbot.driver.tools.core import tools
from larkbot.driver.wake.core.records import TurnRecord
from larkbot.driver.wake.history import TurnHistory
from larkbot.driver.wake.repository import DriverRepository
from larkbot.runtime.bus import Bus
from larkbot.testkit.driver.harness import CHAT_ID, decide, world
from larkbot.testkit.driver.synthetic import response, tool_call


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"


def _record(chain: str, step: int, at_ms: int, *, pending: bool = False) -> TurnRecord:
    return TurnRecord(
        platform="feishu",
        chat_id=CHAT_ID,
        chain_id=chain,
        step=step,
        wake_id="w",
        requested_at_ms=at_ms,
        entries=(AssistantMessage(parts=(TextPart(text=f"{chain}/{step}"),)),),
        usage=Usage(input_tokens=1, output_tokens=1),
        model_identity="m",
        requires_follow_up=False,
        shell_tools_exposed=False,
        mode="normal",
        work_calls=0,
        participation_attempts=0,
        sent=False,
        reacted=False,
        pending=pending,
    )


def _count_reads(repo: DriverRepository) -> list[str]:
    """The chats whose turn history ``repo`` reads from now on, one entry a read."""
    reads: list[str] = []
    original = repo.turns

    async def counted(platform: str, chat_id: str, **kw: Any) -> tuple[TurnRecord, ...]:
        reads.append(chat_id)
        return await original(platform, chat_id, **kw)

    repo.turns = counted  # type: ignore[method-assign]
    return reads


def test_an_unknown_history_is_read_and_a_known_one_follows_the_writes() -> None:
    history = TurnHistory()
    assert history.since(0) is None
    history.stored(_record("c", 0, 10))  # not known: nothing to follow
    assert history.since(0) is None
    history.none_stored()
    assert history.since(0) == ()
    history.stored(_record("c", 0, 10, pending=True))
    history.stored(_record("d", 0, 20))
    complete = _record("c", 0, 10)
    history.stored(complete)  # replaces its pending version where it stood
    assert history.since(0) == (complete, _record("d", 0, 20))
    # The summary's boundary moves on; an earlier one was never kept.
    assert history.since(15) == (_record("d", 0, 20),)
    assert history.since(0) is None
    history.forget()
    assert history.since(15) is None
    history.loaded(5, (complete,))
    assert history.since(5) == (complete,)
    assert history.since(4) is None


async def test_what_a_wake_up_loads_is_what_the_database_holds_and_is_read_once(
    bus: Bus, nats_url: str, db: str
) -> None:
    async with world(bus, nats_url, db) as w:
        repo = w.driver.repo
        original = repo.turns
        reads = _count_reads(repo)
        # Three wake-ups: a send, a send that keeps working (two steps), one left alone.
        w.probe_answers.append(decide("send_message", "asked"))
        w.primary_answers.append(response(tool_call(tools.SEND, "s1", text="one")))
        await w.say(1, 0, mentions_me=True)
        await w.tick(1000)
        w.probe_answers.append(decide("send_message", "asked again"))
        w.primary_answers.append(response(tool_call(tools.SEND, "s2", text="two", still_working=True)))
        w.primary_answers.append(response(tool_call(tools.END, "e2")))
        await w.say(2, 2000, mentions_me=True)
        await w.tick(3000)
        w.probe_answers.append(decide("no_action", "small talk"))
        await w.say(3, 4000)
        await w.tick(5000)
        assert [d.text for d in w.platform.delivered] == ["one", "two"]
        # The take-over found no turn response: not one read on the wake-ups' path.
        assert reads == []
        kept = w.chat.history.since(0)
        stored = await original("feishu", CHAT_ID)
        assert len(stored) == 3
        assert kept == stored
        assert not any(t.pending for t in stored)


async def test_a_replica_taking_a_chat_over_reads_its_history_once(bus: Bus, nats_url: str, db: str) -> None:
    async with world(bus, nats_url, db) as w:
        w.probe_answers.append(decide("send_message", "asked"))
        w.primary_answers.append(response(tool_call(tools.SEND, "s1", text="one")))
        await w.say(1, 0, mentions_me=True)
        await w.tick(1000)
        await w.stop_replica("a")
        await w.start_replica("b")
        await w.balanced()
        repo = w.driver.repo
        original = repo.turns
        reads = _count_reads(repo)
        for n in (2, 3):
            w.probe_answers.append(decide("send_message", "asked"))
            w.primary_answers.append(response(tool_call(tools.SEND, f"s{n}", text=f"answer {n}")))
            await w.say(n, n * 2000, mentions_me=True)
            await w.tick(n * 2000 + 1000)
        assert [d.text for d in w.platform.delivered] == ["one", "answer 2", "answer 3"]
        assert reads == [CHAT_ID]
        kept = w.chat.history.since(0)
        assert kept == await original("feishu", CHAT_ID)
        assert kept is not None
        assert [t.sent for t in kept] == [True, True, True]
