"""Turn and probe responses round-trip through SQLite and PostgreSQL after the migration."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from larkbot.canonical.llm import (
    AssistantMessage,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    Usage,
)
from larkbot.driver.compaction.core.compaction import Summary
from larkbot.driver.wake.core.records import ChainUsage, ProbeRecord, TurnRecord, open_chain
from larkbot.driver.wake.repository import ChatMarks, DriverRepository, StepConflict
from larkbot.runtime.db import create_engine, current_revision, migrate

MIGRATIONS = Path(__file__).parents[1] / "src" / "larkbot" / "driver" / "migrations"


def _turn(chain: str, step: int, follow: bool, at: int) -> TurnRecord:
    return TurnRecord(
        platform="feishu",
        chat_id="oc_1",
        chain_id=chain,
        step=step,
        wake_id="w1",
        requested_at_ms=at,
        entries=(
            AssistantMessage(
                parts=(
                    ReasoningPart(
                        text="hm", signature="sig", format="anthropic-messages", model_identity="m"
                    ),
                    ToolCallPart(id="t1", name="send_message", arguments_json='{"text":"héllo"}'),
                ),
                model_identity="m",
            ),
            ToolResultMessage(tool_call_id="t1", parts=(TextPart(text="sent"),), requires_follow_up=follow),
        ),
        usage=Usage(input_tokens=100, output_tokens=5, cache_read_tokens=60, cache_write_tokens=20),
        model_identity="m",
        requires_follow_up=follow,
        shell_tools_exposed=False,
        mode="normal",
        work_calls=1,
        participation_attempts=1,
        sent=True,
        reacted=False,
    )


async def test_turns_probes_and_marks_round_trip(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        await migrate(engine, MIGRATIONS)
        assert await current_revision(engine) == "0010"
        repo = DriverRepository(engine)
        first, second = _turn("c1", 0, True, 10), _turn("c1", 1, True, 20)
        await repo.add_turn(first)
        await repo.add_turn(second)
        loaded = await repo.turns("feishu", "oc_1")
        assert loaded == (first, second)
        assert await repo.turns("feishu", "oc_1", since_ms=15) == (second,)
        assert await repo.turns("feishu", "other") == ()
        assert open_chain(loaded) == (first, second)
        assert ChainUsage.of(open_chain(loaded)) == ChainUsage(2, 2, 2)
        closed = _turn("c2", 0, False, 30)
        await repo.add_turn(closed)
        assert open_chain(await repo.turns("feishu", "oc_1")) == ()
        assert await repo.chain("feishu", "oc_1", "c1") == (first, second)

        probe = ProbeRecord(
            platform="feishu",
            chat_id="oc_1",
            wake_id="w1",
            requested_at_ms=5,
            decision="no_action",
            reason="not addressed",
            activated=False,
            failed_closed=False,
            model_identity="m",
            usage=Usage(input_tokens=50, output_tokens=3),
            window_start="om_1",
            omitted=0,
        )
        await repo.add_probe(probe)
        assert await repo.probes("feishu", "oc_1") == (probe,)

        assert await repo.marks("feishu", "oc_1") is None
        await repo.save_marks("feishu", "oc_1", ChatMarks(100, 50))
        await repo.save_marks("feishu", "oc_1", ChatMarks(200, 150))
        assert await repo.marks("feishu", "oc_1") == ChatMarks(200, 150)
        await migrate(engine, MIGRATIONS)  # idempotent
    finally:
        await engine.dispose()


async def test_a_complete_step_replaces_its_pending_version_in_place(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        await migrate(engine, MIGRATIONS)
        repo = DriverRepository(engine)
        complete = _turn("c1", 0, False, 10)
        ahead = replace(complete, entries=complete.entries[:1], pending=True, sent=False, work_calls=0)
        later = _turn("c2", 0, False, 20)
        await repo.add_turn(ahead)
        assert await repo.turns("feishu", "oc_1") == (ahead,)
        await repo.add_turn(later)
        await repo.add_turn(complete)
        assert await repo.turns("feishu", "oc_1") == (complete, later)  # storage order kept
        # A second writer of a stored step (complete or pending) is refused; nothing is overwritten.
        with pytest.raises(StepConflict):
            await repo.add_turn(replace(complete, sent=False))
        with pytest.raises(StepConflict):
            await repo.add_turn(ahead)
        assert await repo.turns("feishu", "oc_1") == (complete, later)
    finally:
        await engine.dispose()


async def test_replicas_starting_together_migrate_one_after_the_other(database_url: str) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("concurrent start-up against one database is a PostgreSQL deployment")
    engines = [create_engine(database_url) for _ in range(3)]
    try:
        await asyncio.gather(*(migrate(engine, MIGRATIONS) for engine in engines))
        assert {await current_revision(engine) for engine in engines} == {"0010"}
    finally:
        for engine in engines:
            await engine.dispose()


async def test_summaries_are_appended_and_turns_have_no_count_limit(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        await migrate(engine, MIGRATIONS)
        repo = DriverRepository(engine)
        # Regression: the read stopped at the newest 1,000 turn responses, and older ones vanished from
        # the context. The summary's turn boundary bounds the read now, not a count.
        for i in range(1200):
            await repo.add_turn(_turn(f"c{i}", 0, False, 100 + i))
        assert len(await repo.turns("feishu", "oc_1")) == 1200
        assert len(await repo.turns("feishu", "oc_1", since_ms=1100)) == 200
        latest = await repo.latest_turn("feishu", "oc_1")
        assert latest is not None
        assert latest.chain_id == "c1199"

        assert await repo.latest_summary("feishu", "oc_1") is None
        first = Summary(
            platform="feishu",
            chat_id="oc_1",
            cursor=40,
            turns_from_ms=500,
            text="Alice 和 Bob planned the launch",
            created_at_ms=1_000,
            model_identity="m",
            usage=Usage(input_tokens=900, output_tokens=40, cache_read_tokens=100),
            segments=40,
            turns=3,
            tokens_before=1600,
            tokens_after=700,
        )
        second = replace(first, cursor=90, turns_from_ms=900, text="later", created_at_ms=2_000)
        await repo.add_summary(first)
        await repo.add_summary(second)
        await repo.add_summary(replace(first, chat_id="oc_2"))
        assert await repo.summaries("feishu", "oc_1") == (first, second)
        assert await repo.latest_summary("feishu", "oc_1") == second
    finally:
        await engine.dispose()
