"""The request log's store on SQLite and PostgreSQL: requests round-trip with their blocks, texts are
kept once per hash (or not at all without ``store_content``), re-adding is harmless, sent message ids
lead back to their wake-up, and retention removes what is old and no request still holds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from larkbot.canonical.llm import LLMRequest, TextPart, ToolSpec, UserMessage
from larkbot.driver.audit.audit import DAY_MS
from larkbot.driver.audit.core.requestlog import (
    LoggedRequest,
    SentMessage,
    WakeRequests,
    blocks_of,
    shared_prefix,
)
from larkbot.driver.audit.requestlog import REFRESH_MS, RequestStore, Swept
from larkbot.driver.tables import request_blocks
from larkbot.runtime.db import create_engine, migrate

MIGRATIONS = Path(__file__).parents[1] / "src" / "larkbot" / "driver" / "migrations"
T0 = 1_800_000_000_000
HISTORY = tuple(f'<message id="m{i}">line {i}</message>' for i in range(20))


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[RequestStore]:
    engine = create_engine(database_url)
    try:
        await migrate(engine, MIGRATIONS)
        yield RequestStore(engine)
    finally:
        await engine.dispose()


def _request(request_id: str, purpose: str, *texts: str) -> LLMRequest:
    return LLMRequest(
        request_id=request_id,
        purpose=purpose,  # type: ignore[arg-type]
        endpoint=purpose,
        system=f"{purpose} rules",
        messages=(UserMessage(parts=tuple(TextPart(text=t) for t in texts)),),
        tools=(ToolSpec.of("end_turn", "End.", {"type": "object"}),),
        deadline_ms=T0 + 60_000,
    )


def _wake(wake_id: str, at_ms: int, *, sent: tuple[str, ...] = (), late: str = "now") -> WakeRequests:
    probe = _request(f"{wake_id}-probe", "probe", *HISTORY[:5], late)
    first = _request(f"{wake_id}-0", "primary", *HISTORY, f"<late-binding>{late} 1</late-binding>")
    second = _request(f"{wake_id}-1", "primary", *HISTORY, f"<late-binding>{late} 2</late-binding>")
    return WakeRequests(
        "feishu",
        "oc_1",
        wake_id,
        (
            LoggedRequest(probe, None, at_ms, 100, True, None),
            LoggedRequest(first, 0, at_ms + 10, 900, True, None),
            LoggedRequest(second, 1, at_ms + 20, 950, False, None),
        ),
        tuple(SentMessage(m, at_ms + 15) for m in sent),
    )


async def _stored_blocks(store: RequestStore) -> list[tuple[str, str | None, int]]:
    async with store.engine.connect() as conn:
        t = request_blocks.c
        rows = await conn.execute(select(t.sha256, t.text, t.last_seen_ms).order_by(t.sha256))
        return [(sha, text, int(seen)) for sha, text, seen in rows.all()]


async def test_a_wake_ups_requests_round_trip_with_their_texts(store: RequestStore) -> None:
    log = _wake("w1", T0, sent=("om_1", "om_2"))
    await store.add(log, store_content=True)
    probe, first, second = await store.of_wake("w1")
    assert [(r.purpose, r.step, r.at_ms, r.called) for r in (probe, first, second)] == [
        ("probe", None, T0, True),
        ("primary", 0, T0 + 10, True),
        ("primary", 1, T0 + 20, False),
    ]
    assert (first.request_id, first.endpoint, first.estimated_tokens) == ("w1-0", "primary", 900)
    assert (first.platform, first.chat_id, first.wake_id) == ("feishu", "oc_1", "w1")
    assert first.blocks == blocks_of(log.requests[1].request)
    assert probe.id < first.id < second.id
    # Stored once: the two primary requests differ in their last block only.
    distinct = {b.sha256 for r in (probe, first, second) for b in r.blocks}
    assert len(await _stored_blocks(store)) == len(distinct)

    prefix = shared_prefix(first.blocks, second.blocks)
    assert prefix.blocks == len(first.blocks) - 1
    assert prefix.chars == first.chars - len("1</late-binding>")  # "<late-binding>now " in common
    assert await store.previous("feishu", "oc_1", "primary", second.id) == first
    assert await store.previous("feishu", "oc_1", "primary", first.id) is None
    assert await store.previous("feishu", "oc_1", "probe", second.id) == probe
    # What the provider saw last: the unsent second request is skipped.
    assert await store.previous("feishu", "oc_1", "primary", second.id + 1) == second
    assert await store.previous("feishu", "oc_1", "primary", second.id + 1, sent_only=True) == first

    assert await store.wake_of_sent("feishu", "oc_1", "om_2") == "w1"
    assert await store.wake_of_sent("feishu", "oc_1", "om_9") is None
    assert await store.wake_of_sent("feishu", "oc_2", "om_1") is None

    summaries = await store.requests_of_chat("feishu", "oc_1", since_ms=T0 + 5)
    assert [r.request_id for r in summaries] == ["w1-0", "w1-1"]
    assert all(b.text is None for r in summaries for b in r.blocks)
    assert [b.sha256 for b in summaries[0].blocks] == [b.sha256 for b in first.blocks]


async def test_without_store_content_only_hashes_are_kept(store: RequestStore) -> None:
    await store.add(_wake("w1", T0, sent=("om_1",)), store_content=False)
    probe, first, second = await store.of_wake("w1")
    assert all(b.text is None for r in (probe, first, second) for b in r.blocks)
    assert all(text is None for _sha, text, _seen in await _stored_blocks(store))
    # Whole blocks still compare; the characters inside the differing block are unknown.
    prefix = shared_prefix(first.blocks, second.blocks)
    assert prefix.blocks == len(first.blocks) - 1
    assert prefix.chars == sum(b.chars for b in first.blocks[:-1])
    assert await store.wake_of_sent("feishu", "oc_1", "om_1") == "w1"


async def test_adding_again_changes_nothing(store: RequestStore) -> None:
    log = _wake("w1", T0, sent=("om_1",))
    await store.add(log, store_content=True)
    before = (await store.of_wake("w1"), await _stored_blocks(store))
    await store.add(log, store_content=True)
    await RequestStore(store.engine).add(log, store_content=True)  # another replica: nothing remembered
    assert (await store.of_wake("w1"), await _stored_blocks(store)) == before


async def test_unchanged_blocks_are_refreshed_at_most_hourly(store: RequestStore) -> None:
    await store.add(_wake("w1", T0), store_content=True)
    shared = blocks_of(_wake("w1", T0).requests[1].request)[2].sha256
    await store.add(_wake("w2", T0 + 60_000, late="later"), store_content=True)
    seen = {sha: at for sha, _text, at in await _stored_blocks(store)}
    assert seen[shared] == T0 + 20  # w1's newest request holding it; not rewritten a minute later
    await store.add(_wake("w3", T0 + REFRESH_MS + 60_000, late="much later"), store_content=True)
    seen = {sha: at for sha, _text, at in await _stored_blocks(store)}
    assert seen[shared] == T0 + REFRESH_MS + 60_000 + 20


async def test_a_hash_only_block_gains_its_text_once_content_may_be_stored(store: RequestStore) -> None:
    await store.add(_wake("w1", T0), store_content=False)
    await RequestStore(store.engine).add(_wake("w2", T0 + 5), store_content=True)
    (_probe, first, _second) = await store.of_wake("w1")
    assert all(b.text is not None for b in first.blocks[:-1])


async def test_retention_removes_old_requests_sent_ids_and_unheld_blocks(store: RequestStore) -> None:
    now = T0 + 40 * DAY_MS
    await store.add(_wake("old", now - 31 * DAY_MS, sent=("om_old",), late="old"), store_content=True)
    await store.add(_wake("new", now - 29 * DAY_MS, sent=("om_new",), late="new"), store_content=True)
    blocks_before = await _stored_blocks(store)
    swept = await store.sweep(now, 30)
    # Only the old wake-up's own late-binding blocks go; the history it shared lives on in "new".
    assert swept == Swept(requests=3, blocks=3, sent=1)
    assert await store.of_wake("old") == ()
    assert await store.wake_of_sent("feishu", "oc_1", "om_old") is None
    assert await store.wake_of_sent("feishu", "oc_1", "om_new") == "new"
    kept = await store.of_wake("new")
    assert len(kept) == 3
    assert all(b.text is not None for r in kept for b in r.blocks)
    assert len(await _stored_blocks(store)) == len(blocks_before) - 3
    assert await store.sweep(now, 30) == Swept(0, 0, 0)


async def test_a_block_last_seen_just_before_the_cutoff_outlives_it_by_the_refresh_lag(
    store: RequestStore,
) -> None:
    # The store does not refresh a block it wrote within the hour, so a request can hold a block whose
    # last_seen_ms is up to an hour older than the request: the sweep must not take it.
    now = T0 + 40 * DAY_MS
    await store.add(_wake("w1", now - 30 * DAY_MS - 1_000), store_content=True)
    await store.add(_wake("w2", now - 30 * DAY_MS + 1_000, late="again"), store_content=True)
    await store.sweep(now, 30)
    (kept,) = {r.wake_id for r in await store.requests_of_chat("feishu", "oc_1")}
    assert kept == "w2"
    assert all(b.text is not None for r in await store.of_wake("w2") for b in r.blocks)
    async with store.engine.connect() as conn:
        assert (await conn.execute(select(func.count()).select_from(request_blocks))).scalar() > 0
