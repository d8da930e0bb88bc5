"""The request log of real wake-ups (on the real bus with a scripted model, a fake platform and a manual
clock): every request a wake-up builds is recorded as the model received it, consecutive steps share
their prefix, and a sent message leads back to its wake-up; dry runs record their requests, never ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from larkbot.driver.audit.audit import AuditStore
from larkbot.driver.audit.core.requestlog import blocks_of, shared_prefix
from larkbot.driver.audit.requestlog import RequestStore
from larkbot.driver.tools.core import tools
from larkbot.runtime.bus import Bus
from larkbot.testkit.driver.harness import CHAT_ID, World, decide, end_turn, world
from larkbot.testkit.driver.synthetic import response, tool_call


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"


def _stores(w: World) -> tuple[AuditStore, RequestStore]:
    audit, requests = w.driver.audit, w.driver.requests
    assert audit is not None
    assert requests is not None
    return audit, requests


async def _two_steps(w: World) -> None:
    """A mention the probe lets through; the primary sends (staying open), then ends its turn."""
    await w.say(1, 0, text="hello all")
    w.probe_answers.append(decide("send_message", "asked the bot"))
    w.primary_answers.append(response(tool_call(tools.SEND, "c0", text="on it", still_working=True)))
    w.primary_answers.append(end_turn())
    await w.say(2, 1000, text="@Lark are you there?", mentions_me=True)
    await w.tick(2000)


async def test_a_wake_up_records_every_request_as_the_model_received_it(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    # Also runs on PostgreSQL when TEST_DATABASE_URL is set.
    async with world(bus, nats_url, database_url) as w:
        await _two_steps(w)
        audit, store = _stores(w)
        (record,) = [r for r in await audit.of_chat("feishu", CHAT_ID) if r.steps]
        recorded = await store.of_wake(record.wake_id)
        (sent,) = [i for result in w.platform.executed.values() for i in result.message_ids]
        wake_of_sent = await store.wake_of_sent("feishu", CHAT_ID, sent)
        previous = await store.previous("feishu", CHAT_ID, "primary", recorded[2].id)
        received = [*w.requests("probe")[-1:], *w.requests("primary")]
    assert len(w.platform.delivered) == 1
    assert [(r.purpose, r.step, r.called) for r in recorded] == [
        ("probe", None, True),
        ("primary", 0, True),
        ("primary", 1, True),
    ]
    # Exactly what the model was sent, block by block, texts included.
    assert [r.request_id for r in recorded] == [r.request_id for r in received]
    assert [r.blocks for r in recorded] == [blocks_of(r) for r in received]
    assert all(r.wake_id == record.wake_id for r in recorded)
    assert recorded[0].at_ms <= recorded[1].at_ms <= recorded[2].at_ms
    assert all(r.estimated_tokens > 0 for r in recorded)

    _probe, first, second = recorded
    prefix = shared_prefix(first.blocks, second.blocks)
    # Everything up to the late-binding message: tools, system, the history.
    late = next(i for i, b in enumerate(first.blocks) if (b.text or "").startswith("<late-binding>"))
    assert prefix.blocks == late >= 4
    assert prefix.chars > first.chars // 2
    assert previous == first
    assert [b.label for b in second.blocks[late:]][:2] == [
        "assistant #2 tool_call send_message",
        "tool_result #3 part 1 (send_message)",
    ]
    assert wake_of_sent == record.wake_id


async def test_a_dry_run_records_its_requests_and_no_sent_ids(bus: Bus, nats_url: str, db: str) -> None:
    async with world(bus, nats_url, db, dry_run=True) as w:
        await _two_steps(w)
        audit, store = _stores(w)
        (record,) = [r for r in await audit.of_chat("feishu", CHAT_ID) if r.steps]
        recorded = await store.of_wake(record.wake_id)
        summaries = await store.requests_of_chat("feishu", CHAT_ID)
        assert await store.wake_of_sent("feishu", CHAT_ID, "dry-run-0-0") is None
        assert w.platform.requests == []
    assert record.withheld[:2] == ("typing", tools.SEND)
    assert [(r.purpose, r.step, r.called) for r in recorded] == [
        ("probe", None, True),
        ("primary", 0, True),
        ("primary", 1, True),
    ]
    # The made-up id the model was shown is in the request; nothing links it to the wake-up.
    assert "dry-run-0-0" in (recorded[2].blocks[-2].text or "")
    assert [r.request_id for r in summaries][-3:] == [r.request_id for r in recorded]


async def test_a_dry_run_without_the_model_records_the_request_it_assembled(
    bus: Bus, nats_url: str, db: str
) -> None:
    async with world(bus, nats_url, db, dry_run=True, dry_run_call_model=False) as w:
        w.probe_answers.append(decide("send_message", "asked the bot"))
        await w.say(1, 0, text="@Lark hi", mentions_me=True)
        await w.tick(1000)
        audit, store = _stores(w)
        (record,) = await audit.of_chat("feishu", CHAT_ID)
        recorded = await store.of_wake(record.wake_id)
        assert w.requests("primary") == []
    assert [(r.purpose, r.called) for r in recorded] == [("probe", True), ("primary", False)]
    assert any("@Lark hi" in (b.text or "") for b in recorded[1].blocks)


async def test_without_store_content_requests_keep_hashes_only(bus: Bus, nats_url: str, db: str) -> None:
    async with world(bus, nats_url, db, audit={"store_content": False}) as w:
        await _two_steps(w)
        audit, store = _stores(w)
        (record,) = [r for r in await audit.of_chat("feishu", CHAT_ID) if r.steps]
        recorded = await store.of_wake(record.wake_id)
        received = w.requests("primary")
    assert all(b.text is None for r in recorded for b in r.blocks)
    assert [b.sha256 for b in recorded[1].blocks] == [b.sha256 for b in blocks_of(received[0])]
    assert shared_prefix(recorded[1].blocks, recorded[2].blocks).blocks >= 4


async def test_a_disabled_audit_records_no_requests(bus: Bus, nats_url: str, db: str) -> None:
    async with world(bus, nats_url, db, audit={"enabled": False}) as w:
        await _two_steps(w)
        _audit, store = _stores(w)
        assert len(w.requests("primary")) == 2
        assert await store.requests_of_chat("feishu", CHAT_ID) == ()
