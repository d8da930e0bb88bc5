"""The audit trail (one record per wake-up) and dry runs (nothing reaches the platform), on the real bus
with a scripted model, a fake platform and a manual clock."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from sqlalchemy import func, select

from larkbot.canonical.llm import Usage
from larkbot.driver.audit.audit import DAY_MS, AuditStore
from larkbot.driver.audit.core.audit import ContextRange, WakeAudit
from larkbot.driver.tables import probe_responses, turn_responses
from larkbot.driver.tools.core import tools
from larkbot.runtime.bus import Bus
from larkbot.testkit.driver.harness import CHAT_ID, decide, world
from larkbot.testkit.driver.synthetic import response, tool_call


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"


def _store(w: object) -> AuditStore:
    audit = w.driver.audit
    assert isinstance(audit, AuditStore)
    return audit


async def test_a_normal_chat_records_each_wake_up(bus: Bus, nats_url: str, database_url: str) -> None:
    # Also runs on PostgreSQL when TEST_DATABASE_URL is set.
    async with world(bus, nats_url, database_url) as w:
        usage = Usage(input_tokens=1000, output_tokens=20, cache_read_tokens=600, cache_write_tokens=100)
        await w.quiet_then_asked(answer=response(tool_call(tools.SEND, "c0", text="hi!"), usage=usage))
        records = await _store(w).of_chat("feishu", CHAT_ID)
        assert len(w.platform.delivered) == 1

    quiet, spoke = records
    assert (quiet.path, quiet.probe_decision, quiet.probe_reason, quiet.outcome) == (
        "suppressed",
        "no_action",
        "small talk",
        "silent",
    )
    assert (quiet.steps, quiet.tokens.input, quiet.dry_run) == (0, 0, False)
    assert quiet.context.count == 1
    assert quiet.context.first_seq == quiet.context.last_seq
    assert (spoke.path, spoke.probe_decision, spoke.probe_reason) == (
        "probe",
        "send_message",
        "asked the bot",
    )
    assert (spoke.steps, spoke.sends, spoke.reactions, spoke.outcome) == (1, 1, 0, "sent")
    assert spoke.tool_calls == ((tools.SEND, 1),)
    assert (spoke.tokens.input, spoke.tokens.cache_read, spoke.tokens.cache_write, spoke.tokens.output) == (
        1000,
        600,
        100,
        20,
    )
    assert spoke.probe_tokens.input > 0
    assert spoke.probe_model is not None
    assert spoke.probe_latency_ms is not None
    assert spoke.primary_latency_ms is not None
    assert spoke.context.count == 2
    assert spoke.context.sha256 != quiet.context.sha256
    assert spoke.primary_models
    assert spoke.model_called
    assert spoke.withheld == ()
    assert spoke.wake_id != quiet.wake_id


async def test_a_dry_run_chat_records_its_wake_ups_and_never_calls_the_platform(
    bus: Bus, nats_url: str, db: str
) -> None:
    async with world(bus, nats_url, db, dry_run=True, ban_spammer_enabled=True) as w:
        w.probe_answers.append(decide("send_message", "asked the bot"))
        w.primary_answers.append(
            response(
                tool_call(tools.SEND, "c0", text="hi!"),
                tool_call(tools.REACT, "c1", message_id="m1", emoji="👍"),
            )
        )
        await w.say(1, 0, text="@Lark hi", mentions_me=True)
        await w.tick(1000)
        records = await _store(w).of_chat("feishu", CHAT_ID)
        latest = await w.driver.repo.latest_turn("feishu", CHAT_ID)
        assert w.platform.requests == []
    (record,) = records
    assert record.dry_run
    assert record.model_called
    assert record.withheld == ("typing", tools.SEND, tools.REACT)
    assert (record.sends, record.reactions, record.outcome, record.steps) == (1, 1, "sent", 1)
    # The model is told what happened: a made-up id, and that nothing was posted.
    assert latest is not None
    results = str(latest.entries)
    assert "dry-run-0-0" in results
    assert "dry run: nothing was posted" in results


async def test_a_dry_run_without_the_model_ends_silent(bus: Bus, nats_url: str, db: str) -> None:
    async with world(bus, nats_url, db, dry_run=True, dry_run_call_model=False) as w:
        w.probe_answers.append(decide("send_message", "asked the bot"))
        await w.say(1, 0, text="@Lark hi", mentions_me=True)
        await w.tick(1000)
        records = await _store(w).of_chat("feishu", CHAT_ID)
        assert w.llm.by_purpose("primary") == []
        assert w.platform.requests == []
    (record,) = records
    assert (record.dry_run, record.model_called, record.outcome, record.steps) == (True, False, "silent", 1)
    assert record.primary_models == ("dry-run",)
    assert record.tokens.input == 0


async def test_the_deployments_dry_run_covers_every_chat(bus: Bus, nats_url: str, db: str) -> None:
    async with world(bus, nats_url, db, deployment_dry_run=True) as w:
        w.probe_answers.append(decide("send_message", "asked"))
        w.primary_answers.append(response(tool_call(tools.SEND, "c0", text="hi!")))
        await w.say(1, 0, text="@Lark hi", mentions_me=True)
        await w.tick(1000)
        (record,) = await _store(w).of_chat("feishu", CHAT_ID)
        assert w.platform.requests == []
    assert record.dry_run
    assert tools.SEND in record.withheld


async def test_without_store_content_the_probe_reason_is_a_hash(bus: Bus, nats_url: str, db: str) -> None:
    async with world(bus, nats_url, db, audit={"store_content": False}) as w:
        w.probe_answers.append(decide("no_action", "Alice's secret plan"))
        await w.say(1, 0, text="psst")
        await w.tick(1000)
        (record,) = await _store(w).of_chat("feishu", CHAT_ID)
    assert record.content_hashed
    assert record.probe_reason == "sha256:" + hashlib.sha256(b"Alice's secret plan").hexdigest()


async def test_a_disabled_audit_writes_nothing(bus: Bus, nats_url: str, db: str) -> None:
    async with world(bus, nats_url, db, audit={"enabled": False}) as w:
        await w.say(1, 0, text="psst")
        await w.tick(1000)
        assert len(w.llm.by_purpose("probe")) == 1
        assert await _store(w).of_chat("feishu", CHAT_ID) == ()


def _record(chat_id: str, started_at_ms: int) -> WakeAudit:
    from larkbot.driver.audit.core.audit import AuditDraft

    draft = AuditDraft("feishu", chat_id, f"w{started_at_ms}", "debounced", started_at_ms, dry_run=False)
    draft.saw((), None)
    return draft.record("silent", started_at_ms + 5, store_content=True)


async def test_retention_removes_old_audit_records_only(bus: Bus, nats_url: str, database_url: str) -> None:
    async with world(bus, nats_url, database_url) as w:
        w.probe_answers.append(decide("send_message", "asked"))
        await w.say(1, 0, text="@Lark hi", mentions_me=True)
        await w.tick(1000)
        store = _store(w)
        now = w.clock.now_ms()
        await store.add(_record(CHAT_ID, now - 31 * DAY_MS))
        await store.add(_record(CHAT_ID, now - 29 * DAY_MS))
        async with store.engine.connect() as conn:
            turns_before = (await conn.execute(select(func.count()).select_from(turn_responses))).scalar()
        assert await store.sweep(now, 30) == 1
        kept = await store.of_chat("feishu", CHAT_ID)
        async with store.engine.connect() as conn:
            turns_after = (await conn.execute(select(func.count()).select_from(turn_responses))).scalar()
            probes = (await conn.execute(select(func.count()).select_from(probe_responses))).scalar()
    assert [r.started_at_ms for r in kept] == [now - 29 * DAY_MS, kept[1].started_at_ms]
    assert turns_before == turns_after == 1
    assert probes == 1


def test_the_context_range_hashes_the_segments_in_order() -> None:
    empty = ContextRange.of(())
    assert (empty.first_seq, empty.last_seq, empty.count) == (None, None, 0)
    assert empty.sha256 == hashlib.sha256(b"").hexdigest()


async def test_the_inspectors_reads_by_chat_and_by_wake_up(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    # Also runs on PostgreSQL when TEST_DATABASE_URL is set.
    async with world(bus, nats_url, database_url) as w:
        await w.quiet_then_asked()
        store = _store(w)
        everything = await store.of_chat("feishu", CHAT_ID)
        newest = await store.latest("feishu", CHAT_ID, limit=1)
        both = await store.latest("feishu", CHAT_ID, limit=5)
        chats = await store.chats()
        one = await store.one(everything[1].wake_id)
        missing = await store.one("no-such-wake")
        repo = w.driver.repo
        steps = await repo.turns_of_wake(everything[1].wake_id)
        probes = await repo.probes_of_wake(everything[1].wake_id)
        quiet_steps = await repo.turns_of_wake(everything[0].wake_id)

    assert newest == everything[1:]
    assert both == everything
    assert [(c.platform, c.chat_id, c.wakeups, c.sends, c.dry_runs) for c in chats] == [
        ("feishu", CHAT_ID, 2, 1, 0)
    ]
    assert chats[0].first_ms == everything[0].started_at_ms
    assert chats[0].last_ms == everything[1].started_at_ms
    assert one == everything[1]
    assert missing is None
    assert [(s.sent, s.wake_id) for s in steps] == [(True, everything[1].wake_id)]
    assert [p.reason for p in probes] == ["asked the bot"]
    assert quiet_steps == ()
