"""The per-person memory store on SQLite and PostgreSQL: events and patches, visibility, search, the
operator's forget, consolidation's queries and maintenance state."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Literal

import pytest
from sqlalchemy import func, inspect, select, text

from larkbot.driver.memory.core.memory import Importance, Memory, NewMemory, PatchChange, Scope, Visibility
from larkbot.driver.memory.memories import MemoryNotFound, MemoryStats, MemoryStore
from larkbot.driver.tables import memory_forgets, memory_index
from larkbot.runtime.db import create_engine, current_revision, migrate

MIGRATIONS = Path(__file__).parents[1] / "src" / "larkbot" / "driver" / "migrations"

IN_OC1 = Visibility("feishu", "oc_1", None, global_allowed=False)
IN_OC2 = Visibility("feishu", "oc_2", None, global_allowed=False)
IN_OC2_GLOBAL = Visibility("feishu", "oc_2", None, global_allowed=True)
DM_ALICE = Visibility("feishu", "oc_dm_alice", "ou_alice", global_allowed=False)
DM_BOB = Visibility("feishu", "oc_dm_bob", "ou_bob", global_allowed=False)


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[MemoryStore]:
    engine = create_engine(database_url)
    try:
        await migrate(engine, MIGRATIONS)
        yield MemoryStore(engine)
    finally:
        await engine.dispose()


def new(
    content: str,
    *,
    person: str = "ou_alice",
    chat: str = "oc_1",
    scope: Scope = "group",
    importance: Importance = "normal",
    platform: str = "feishu",
    origin: Literal["tool", "consolidation"] = "tool",
    supersedes: tuple[int, ...] = (),
    related_to: tuple[int, ...] = (),
) -> NewMemory:
    return NewMemory(
        platform=platform,
        person_id=person,
        content=content,
        evidence=("om_1", "om_2"),
        chat_id=chat,
        scope=scope,
        importance=importance,
        origin=origin,
        supersedes=supersedes,
        related_to=related_to,
    )


def contents(found: list[Memory]) -> list[str]:
    return [m.content for m in found]


async def test_the_migration_creates_the_memory_tables_on_an_empty_database(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        await migrate(engine, MIGRATIONS)
        assert await current_revision(engine) == "0010"
        await migrate(engine, MIGRATIONS, "0003")  # already past it: nothing to do
        async with engine.connect() as conn:
            names = set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
        assert {
            "driver_memories",
            "driver_memory_patches",
            "driver_memory_index",
            "driver_memory_forgets",
            "driver_memory_maintenance",
        } <= names
        assert ("driver_memory_fts" in names) == (engine.dialect.name == "sqlite")
    finally:
        await engine.dispose()


async def test_save_get_and_fold(store: MemoryStore) -> None:
    first = await store.save(new("Alice drinks oat milk lattes"), now_ms=1_000)
    assert (first.enabled, first.origin) == (True, "tool")
    assert (first.created_at_ms, first.updated_at_ms) == (1_000, 1_000)
    assert first.evidence == ("om_1", "om_2")
    second = await store.save(
        new("Alice switched to black coffee", origin="consolidation", supersedes=(first.id,)), now_ms=2_000
    )
    assert second.id > first.id
    assert await store.get([second.id, first.id, 9_999]) == {first.id: first, second.id: second}
    assert await store.get([]) == {}

    disabled = await store.patch(
        first.id, PatchChange(enabled=False), reason="superseded", actor="tool", chat_id="oc_1", now_ms=3_000
    )
    assert (disabled.enabled, disabled.updated_at_ms) == (False, 3_000)
    moved = await store.patch(
        first.id,
        PatchChange(scope="global", importance="high", related_to=(second.id,)),
        reason="applies everywhere",
        actor="operator",
        chat_id=None,
        now_ms=4_000,
    )
    assert moved == dataclasses.replace(
        first, enabled=False, scope="global", importance="high", related_to=(second.id,), updated_at_ms=4_000
    )
    assert (await store.get([first.id]))[first.id] == moved
    assert await store.for_person("feishu", "ou_alice") == [moved, second]
    assert await store.patches_for_person("feishu", "ou_alice") == [
        {
            "id": 1,
            "memory_id": first.id,
            "change": {"enabled": False},
            "reason": "superseded",
            "actor": "tool",
            "chat_id": "oc_1",
            "created_at_ms": 3_000,
        },
        {
            "id": 2,
            "memory_id": first.id,
            "change": {"importance": "high", "scope": "global", "related_to": [second.id]},
            "reason": "applies everywhere",
            "actor": "operator",
            "chat_id": None,
            "created_at_ms": 4_000,
        },
    ]


async def test_patches_never_change_content_or_evidence(store: MemoryStore) -> None:
    assert {f.name for f in dataclasses.fields(PatchChange)} == {
        "enabled",
        "importance",
        "scope",
        "supersedes",
        "related_to",
    }
    with pytest.raises(TypeError):
        PatchChange(content="rewritten")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="changes nothing"):
        PatchChange()
    m = await store.save(new("likes tea"), now_ms=1)
    other = await store.save(new("likes cake"), now_ms=1)
    for n, change in enumerate(
        (
            PatchChange(enabled=False),
            PatchChange(enabled=True),
            PatchChange(importance="high"),
            PatchChange(scope="private"),
            PatchChange(supersedes=(other.id,)),
            PatchChange(related_to=(other.id,)),
            PatchChange(supersedes=()),
        )
    ):
        patched = await store.patch(m.id, change, reason="r", actor="tool", chat_id="oc_1", now_ms=10 + n)
        assert (patched.content, patched.evidence, patched.chat_id) == (m.content, m.evidence, m.chat_id)
    final = (await store.get([m.id]))[m.id]
    assert (final.enabled, final.importance, final.scope) == (True, "high", "private")
    assert (final.supersedes, final.related_to, final.updated_at_ms) == ((), (other.id,), 16)


async def test_unknown_memories_and_foreign_references_are_refused(store: MemoryStore) -> None:
    alice = await store.save(new("likes tea"), now_ms=1)
    bob = await store.save(new("likes cake", person="ou_bob"), now_ms=1)
    with pytest.raises(MemoryNotFound) as missing:
        await store.patch(999, PatchChange(enabled=False), reason="r", actor="tool", chat_id=None, now_ms=2)
    assert missing.value.ids == (999,)
    with pytest.raises(MemoryNotFound):
        await store.patch(
            alice.id, PatchChange(supersedes=(bob.id,)), reason="r", actor="tool", chat_id=None, now_ms=2
        )
    with pytest.raises(MemoryNotFound):
        await store.save(new("likes pie", related_to=(bob.id,)), now_ms=2)
    with pytest.raises(MemoryNotFound):
        await store.save(new("likes pie", supersedes=(12345,)), now_ms=2)
    with pytest.raises(ValueError, match="itself"):
        await store.patch(
            alice.id, PatchChange(supersedes=(alice.id,)), reason="r", actor="tool", chat_id=None, now_ms=2
        )
    with pytest.raises(ValueError, match="actor"):
        await store.patch(
            alice.id, PatchChange(enabled=False), reason="r", actor="bot", chat_id=None, now_ms=2
        )
    # Nothing of the refused writes was stored.
    assert await store.for_person("feishu", "ou_alice") == [alice]
    assert await store.patches_for_person("feishu", "ou_alice") == []


async def test_visibility_by_scope_chat_and_platform(store: MemoryStore) -> None:
    group = await store.save(new("group fact tea", importance="high"), now_ms=1)
    private = await store.save(
        new("private fact tea", chat="oc_dm_alice", scope="private", importance="high"), now_ms=2
    )
    glob = await store.save(new("global fact tea", scope="global", importance="high"), now_ms=3)
    tg = await store.save(new("telegram fact tea", platform="telegram", importance="high"), now_ms=4)

    async def seen(v: Visibility) -> tuple[list[str], list[str]]:
        searched = contents(await store.search("tea", v, limit=10))
        high = contents(await store.high_importance(["ou_alice"], v, limit=10))
        return sorted(searched), sorted(high)

    assert await seen(IN_OC1) == (["group fact tea"], ["group fact tea"])
    assert await seen(IN_OC2) == ([], [])
    assert await seen(IN_OC2_GLOBAL) == (["global fact tea"], ["global fact tea"])
    assert await seen(DM_ALICE) == (["private fact tea"], ["private fact tea"])
    assert await seen(DM_BOB) == ([], [])
    telegram = Visibility("telegram", "oc_1", None, global_allowed=True)
    assert await seen(telegram) == (["telegram fact tea"], ["telegram fact tea"])
    everything = (await store.get([group.id, private.id, glob.id, tg.id])).values()
    for v in (IN_OC1, IN_OC2, IN_OC2_GLOBAL, DM_ALICE, DM_BOB, telegram):
        assert sorted(m.content for m in everything if v.admits(m)) == (await seen(v))[0]

    # Disabled memories are never admitted; a patch of the scope moves the memory at once.
    await store.patch(
        group.id, PatchChange(enabled=False), reason="r", actor="tool", chat_id="oc_1", now_ms=5
    )
    assert await seen(IN_OC1) == ([], [])
    await store.patch(group.id, PatchChange(enabled=True), reason="r", actor="tool", chat_id="oc_1", now_ms=6)
    assert await seen(IN_OC1) == (["group fact tea"], ["group fact tea"])
    await store.patch(
        group.id, PatchChange(scope="private"), reason="r", actor="tool", chat_id="oc_1", now_ms=7
    )
    assert await seen(IN_OC1) == ([], [])
    assert await seen(DM_ALICE) == (
        ["group fact tea", "private fact tea"],
        ["group fact tea", "private fact tea"],
    )
    await store.patch(glob.id, PatchChange(scope="group"), reason="r", actor="tool", chat_id=None, now_ms=8)
    assert await seen(IN_OC2_GLOBAL) == ([], [])
    assert await seen(IN_OC1) == (["global fact tea"], ["global fact tea"])


async def test_the_index_is_the_fold_of_events_and_patches(store: MemoryStore) -> None:
    """Concurrent patches of one memory are applied one after the other: the projection queries filter
    on always equals the fold of every stored patch."""
    m = await store.save(new("likes tea"), now_ms=1)
    changes = [
        PatchChange(
            enabled=n % 2 == 0, importance=("high", "normal")[n % 2], scope=("group", "global")[n % 3 == 0]
        )
        for n in range(12)
    ]
    await asyncio.gather(
        *(
            store.patch(m.id, c, reason=str(n), actor="tool", chat_id="oc_1", now_ms=10 + n)
            for n, c in enumerate(changes)
        )
    )
    folded = (await store.get([m.id]))[m.id]
    async with store.engine.connect() as conn:
        row = (
            (await conn.execute(select(memory_index).where(memory_index.c.memory_id == m.id)))
            .mappings()
            .one()
        )
    assert (row["scope"], row["importance"], bool(row["enabled"]), row["updated_at_ms"]) == (
        folded.scope,
        folded.importance,
        folded.enabled,
        folded.updated_at_ms,
    )
    assert len(await store.patches_for_person("feishu", "ou_alice")) == 12
    visible_in_oc1 = await store.search("tea", IN_OC1, limit=5)
    assert visible_in_oc1 == ([folded] if IN_OC1.admits(folded) else [])


async def test_search_finds_chinese_japanese_and_latin_words(store: MemoryStore) -> None:
    await store.save(new("我喜欢喝咖啡"), now_ms=1)
    await store.save(new("寿司が好き"), now_ms=2)
    await store.save(new("Loves COFFEE with oat milk"), now_ms=3)
    await store.save(new("明 is her nickname"), now_ms=4)
    await store.save(new("Straße café opening"), now_ms=5)

    async def find(query: str) -> list[str]:
        return contents(await store.search(query, IN_OC1, limit=10))

    assert await find("咖啡") == ["我喜欢喝咖啡"]
    assert await find("寿司") == ["寿司が好き"]
    assert await find("coffee") == ["Loves COFFEE with oat milk"]
    assert await find("Coffee") == ["Loves COFFEE with oat milk"]
    assert await find("ｃｏｆｆｅｅ") == ["Loves COFFEE with oat milk"]  # NFKC
    assert await find("明") == ["明 is her nickname"]
    assert await find("喝") == ["我喜欢喝咖啡"]  # one character inside a longer run
    assert await find("strasse") == ["Straße café opening"]
    assert await find("CAFÉ") == ["Straße café opening"]
    assert await find("她爱吃寿司吗") == ["寿司が好き"]  # partial: shares the bigram 寿司
    assert await find("tea") == []


async def test_search_ranks_better_matches_first_and_can_name_the_person(store: MemoryStore) -> None:
    one = await store.save(new("likes hiking"), now_ms=1)
    both = await store.save(new("likes hiking and coffee on weekends", person="ou_bob"), now_ms=2)
    await store.save(new("nothing relevant here"), now_ms=3)
    found = await store.search("does anyone like hiking or coffee", IN_OC1, limit=10)
    assert [m.id for m in found] == [both.id, one.id]
    assert [m.id for m in await store.search("hiking coffee", IN_OC1, limit=1)] == [both.id]
    assert [m.id for m in await store.search("hiking", IN_OC1, person_id="ou_alice", limit=10)] == [one.id]
    assert await store.search("hiking", IN_OC1, person_id="ou_carol", limit=10) == []
    # Equal matches: newer first.
    twin = await store.save(new("likes hiking"), now_ms=4)
    assert [m.id for m in await store.search("hiking", IN_OC1, person_id="ou_alice", limit=10)] == [
        twin.id,
        one.id,
    ]


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '"unterminated',
        "coffee*",
        "*",
        "NEAR(coffee tea, 2)",
        "coffee OR",
        "OR AND NOT",
        "(coffee",
        "coffee)",
        "terms: coffee",
        "keys : coffee",
        "{terms keys}: coffee",
        "^coffee",
        "coffee + tea",
        "'; DROP TABLE driver_memories; --",
        "coffee & !tea | (x) <-> y:*",
        "\\",
        "\x00coffee",
    ],
)
async def test_query_syntax_in_user_text_is_harmless(store: MemoryStore, query: str) -> None:
    await store.save(new("coffee and tea"), now_ms=1)
    await store.save(new("near the station"), now_ms=2)
    found = contents(await store.search(query, IN_OC1, limit=10))
    assert set(found) <= {"coffee and tea", "near the station"}
    assert await store.stats() == MemoryStats(2, 2, 1, {"group": 2}, {"normal": 2}, 0, 0)


async def test_queries_without_searchable_terms_find_nothing(store: MemoryStore) -> None:
    await store.save(new("coffee"), now_ms=1)
    for query in ("", "   ", "!!! ... ???", "\u0301", "—"):
        assert await store.search(query, IN_OC1, limit=10) == []
    assert await store.search("coffee", IN_OC1, limit=0) == []


async def test_high_importance_order_is_stable(store: MemoryStore) -> None:
    a_late = await store.save(new("a late", importance="high"), now_ms=20)
    b_first = await store.save(new("b first", person="ou_bob", importance="high"), now_ms=5)
    a_early = await store.save(new("a early", importance="high"), now_ms=10)
    a_tie = await store.save(new("a tie", importance="high"), now_ms=10)
    await store.save(new("a normal"), now_ms=1)
    await store.save(new("c other chat", person="ou_carol", chat="oc_2", importance="high"), now_ms=1)

    async def ids(persons: list[str], limit: int = 10) -> list[int]:
        return [m.id for m in await store.high_importance(persons, IN_OC1, limit=limit)]

    assert await ids(["ou_alice", "ou_bob", "ou_carol"]) == [a_early.id, a_tie.id, a_late.id, b_first.id]
    assert await ids(["ou_bob", "ou_alice", "ou_bob"]) == [b_first.id, a_early.id, a_tie.id, a_late.id]
    assert await ids(["ou_bob", "ou_alice"], limit=2) == [b_first.id, a_early.id]
    assert await ids([]) == []
    await store.patch(
        a_tie.id, PatchChange(importance="normal"), reason="r", actor="tool", chat_id=None, now_ms=30
    )
    assert await ids(["ou_alice"]) == [a_early.id, a_late.id]


async def test_forget_deletes_everything_of_the_person_and_logs_it(store: MemoryStore) -> None:
    secret = "Alice's secret: allergic to peanuts"
    kept = await store.save(new("Bob likes peanuts", person="ou_bob"), now_ms=1)
    first = await store.save(new(secret, importance="high"), now_ms=2)
    await store.save(new("Alice likes peanut-free cake", supersedes=(first.id,)), now_ms=3)
    await store.save(new("telegram alice peanuts", platform="telegram"), now_ms=3)
    await store.patch(first.id, PatchChange(enabled=False), reason="r", actor="tool", chat_id=None, now_ms=4)
    key = ("feishu", "ou_alice", "group", "oc_1")
    await store.record_maintenance(key, ok=False, now_ms=5, next_attempt_ms=6, error="model failed")

    assert await store.forget("feishu", "ou_alice", actor="operator", now_ms=100) == 2
    assert await store.for_person("feishu", "ou_alice") == []
    assert await store.patches_for_person("feishu", "ou_alice") == []
    assert await store.get([first.id]) == {}
    assert await store.maintenance_state(key) is None
    assert contents(await store.search("peanuts", IN_OC1, limit=10)) == ["Bob likes peanuts"]
    assert await store.for_person("feishu", "ou_bob") == [kept]
    assert len(await store.for_person("telegram", "ou_alice")) == 1
    assert await store.forget("feishu", "ou_alice", actor="operator", now_ms=200) == 0

    stats = await store.stats()
    assert (stats.total, stats.persons, stats.patches, stats.forgets) == (2, 2, 0, 2)
    async with store.engine.connect() as conn:
        log = (await conn.execute(select(memory_forgets).order_by(memory_forgets.c.id))).mappings().all()
        assert [dict(r) for r in log] == [
            {
                "id": 1,
                "platform": "feishu",
                "person_id": "ou_alice",
                "count": 2,
                "actor": "operator",
                "created_at_ms": 100,
            },
            {
                "id": 2,
                "platform": "feishu",
                "person_id": "ou_alice",
                "count": 0,
                "actor": "operator",
                "created_at_ms": 200,
            },
        ]
        if store.engine.dialect.name == "sqlite":
            fts = (await conn.execute(text("SELECT count(*) FROM driver_memory_fts"))).scalar_one()
            assert fts == (await conn.execute(select(func.count()).select_from(memory_index))).scalar_one()
    with pytest.raises(ValueError, match="actor"):
        await store.forget("feishu", "ou_bob", actor="someone", now_ms=300)


async def test_consolidation_groups_and_their_memories(store: MemoryStore) -> None:
    a = [await store.save(new(f"alice fact {n}"), now_ms=n) for n in range(4)]
    await store.save(new("alice high", importance="high"), now_ms=10)
    await store.save(new("alice elsewhere", chat="oc_2"), now_ms=11)
    await store.save(new("alice global 1", scope="global"), now_ms=12)
    await store.save(new("alice global 2", scope="global"), now_ms=13)
    b = [await store.save(new(f"bob fact {n}", person="ou_bob"), now_ms=20 + n) for n in range(3)]
    await store.patch(b[0].id, PatchChange(enabled=False), reason="r", actor="tool", chat_id=None, now_ms=30)

    assert await store.consolidation_groups(min_count=2) == [
        ("feishu", "ou_alice", "global", "oc_1", 2),
        ("feishu", "ou_alice", "group", "oc_1", 4),
        ("feishu", "ou_bob", "group", "oc_1", 2),
    ]
    assert await store.consolidation_groups(min_count=4) == [("feishu", "ou_alice", "group", "oc_1", 4)]
    assert await store.normal_in_group("feishu", "ou_alice", "group", "oc_1", limit=3) == a[:3]
    assert await store.normal_in_group("feishu", "ou_bob", "group", "oc_1", limit=10) == b[1:]
    assert await store.normal_in_group("feishu", "ou_bob", "private", "oc_1", limit=10) == []


async def test_maintenance_state_counts_failures_until_a_success(store: MemoryStore) -> None:
    key = ("feishu", "ou_alice", "group", "oc_1")
    other = ("feishu", "ou_alice", "group", "oc_2")
    assert await store.maintenance_state(key) is None
    await store.record_maintenance(key, ok=False, now_ms=1, next_attempt_ms=100, error="timeout")
    await store.record_maintenance(key, ok=False, now_ms=100, next_attempt_ms=300, error="timeout")
    assert await store.maintenance_state(key) == (2, 300)
    assert await store.maintenance_state(other) is None
    await store.record_maintenance(key, ok=True, now_ms=300, next_attempt_ms=86_400_300, error=None)
    assert await store.maintenance_state(key) == (0, 86_400_300)
    await store.record_maintenance(other, ok=True, now_ms=5, next_attempt_ms=6, error=None)
    assert await store.maintenance_state(other) == (0, 6)


async def test_stats(store: MemoryStore) -> None:
    assert await store.stats() == MemoryStats(0, 0, 0, {}, {}, 0, 0)
    m = await store.save(new("one", importance="high"), now_ms=1)
    await store.save(new("two", scope="global"), now_ms=1)
    await store.save(new("three", person="ou_bob", platform="telegram"), now_ms=1)
    await store.patch(m.id, PatchChange(enabled=False), reason="r", actor="tool", chat_id=None, now_ms=2)
    assert await store.stats() == MemoryStats(
        total=3,
        enabled=2,
        persons=2,
        by_scope={"global": 1, "group": 2},
        by_importance={"high": 1, "normal": 2},
        patches=1,
        forgets=0,
    )


async def test_a_save_or_patch_redone_under_its_key_is_stored_once(store: MemoryStore) -> None:
    first = await store.save(dataclasses.replace(new("likes tea"), key="lbkey1"), now_ms=1)
    again = await store.save(dataclasses.replace(new("likes tea"), key="lbkey1"), now_ms=2)
    assert again == first
    other = await store.save(dataclasses.replace(new("likes tea"), key="lbkey2"), now_ms=3)
    assert other.id != first.id
    change = PatchChange(importance="normal")
    patched = await store.patch(first.id, change, reason="", actor="tool", chat_id="oc_1", now_ms=4, key="p1")
    redone = await store.patch(first.id, change, reason="", actor="tool", chat_id="oc_1", now_ms=5, key="p1")
    assert redone == patched
    assert len(await store.patches_for_person("feishu", "ou_alice")) == 1
