"""The pure side of memories: validation, folding patches, visibility, and the search terms."""

from __future__ import annotations

import dataclasses

import pytest

from larkbot.driver.memory.core.memory import (
    MAX_CONTENT_CHARS,
    Memory,
    MemoryPatch,
    NewMemory,
    PatchChange,
    Visibility,
    fold,
    saved,
)
from larkbot.driver.memory.core.memorytext import (
    MAX_QUERY_TERMS,
    MAX_TERM_CHARS,
    document_terms,
    fts5_query,
    memory_keys,
    query_terms,
    tsquery,
    visibility_keys,
)

BASE = NewMemory("feishu", "ou_a", "likes tea", ("om_1",), "oc_1", "group", "normal")


def memory(**changes: object) -> Memory:
    return dataclasses.replace(saved(1, BASE, 100), **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"platform": ""}, "platform"),
        ({"person_id": ""}, "person_id"),
        ({"chat_id": ""}, "chat_id"),
        ({"content": "  \n"}, "content is empty"),
        ({"content": "x" * (MAX_CONTENT_CHARS + 1)}, "content is over"),
        ({"evidence": ()}, "evidence"),
        ({"evidence": ("om_1", "")}, "evidence"),
        ({"scope": "team"}, "scope"),
        ({"importance": "urgent"}, "importance"),
        ({"origin": "human"}, "origin"),
        ({"supersedes": (0,)}, "supersedes"),
        ({"supersedes": (True,)}, "supersedes"),
        ({"related_to": (3, 3)}, "repeats"),
    ],
)
def test_a_new_memory_validates_itself(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(BASE, **changes)  # type: ignore[arg-type]


def test_a_patch_change_sets_something_and_round_trips() -> None:
    with pytest.raises(ValueError, match="changes nothing"):
        PatchChange()
    with pytest.raises(ValueError, match="scope"):
        PatchChange(scope="team")  # type: ignore[arg-type]
    change = PatchChange(enabled=False, supersedes=(2, 3), related_to=())
    assert change.as_dict() == {"enabled": False, "supersedes": [2, 3], "related_to": []}
    assert PatchChange.from_dict(change.as_dict()) == change
    assert change.referenced() == (2, 3)
    with pytest.raises(ValueError, match="unknown patch fields"):
        PatchChange.from_dict({"content": "rewritten"})
    with pytest.raises(ValueError, match="enabled"):
        PatchChange.from_dict({"enabled": "yes"})


def _patch(patch_id: int, at: int, **change: object) -> MemoryPatch:
    return MemoryPatch(patch_id, 1, PatchChange(**change), "r", "tool", None, at)  # type: ignore[arg-type]


def test_fold_applies_patches_in_patch_order() -> None:
    patches = [
        _patch(3, 300, enabled=True, scope="global"),
        _patch(1, 100, enabled=False, importance="high"),
        _patch(2, 200, supersedes=(7,), related_to=(8,)),
    ]
    assert fold(memory(), patches) == memory(
        enabled=True, importance="high", scope="global", supersedes=(7,), related_to=(8,), updated_at_ms=300
    )
    assert fold(memory(), []) == memory()
    with pytest.raises(ValueError, match="belongs to memory 2"):
        fold(memory(), [dataclasses.replace(_patch(1, 1, enabled=False), memory_id=2)])


@pytest.mark.parametrize(
    ("m", "visibility", "admitted"),
    [
        (memory(), Visibility("feishu", "oc_1", None, False), True),
        (memory(), Visibility("feishu", "oc_2", None, True), False),
        (memory(), Visibility("telegram", "oc_1", None, True), False),
        (memory(enabled=False), Visibility("feishu", "oc_1", None, True), False),
        (memory(scope="private"), Visibility("feishu", "oc_1", None, True), False),
        (memory(scope="private"), Visibility("feishu", "dm", "ou_a", False), True),
        (memory(scope="private"), Visibility("feishu", "dm", "ou_b", True), False),
        (memory(scope="private"), Visibility("telegram", "dm", "ou_a", True), False),
        (memory(scope="global"), Visibility("feishu", "oc_9", None, True), True),
        (memory(scope="global"), Visibility("feishu", "oc_9", None, False), False),
        (memory(scope="global"), Visibility("feishu", "dm", "ou_a", True), True),
        (memory(scope="global", enabled=False), Visibility("feishu", "oc_9", None, True), False),
    ],
)
def test_visibility_admits(m: Memory, visibility: Visibility, admitted: bool) -> None:
    assert visibility.admits(m) is admitted


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("I like Coffee!", ["i", "like", "coffee"]),
        ("ＣＯＦＦＥＥ ｃａｆé", ["coffee", "café"]),
        ("Straße", ["strasse"]),
        ("don't stop-me_now 3.14", ["don", "t", "stop", "me", "now", "3", "14"]),
        ("咖啡", ["咖啡", "咖", "啡"]),
        ("猫", ["猫"]),
        ("我喜欢喝咖啡", ["我喜", "喜欢", "欢喝", "喝咖", "咖啡", "我", "喜", "欢", "喝", "咖", "啡"]),
        ("寿司が好き", ["寿司", "司が", "が好", "好き", "寿", "司", "が", "好", "き"]),
        ("ｺｰﾋｰ", ["コー", "ーヒ", "ヒー", "コ", "ー", "ヒ", "ー"]),
        ("김치 좋아", ["김치", "김", "치", "좋아", "좋", "아"]),
        ("Python和Go", ["python", "和", "go"]),
        ("नमस्ते दुनिया", ["नमस्ते", "दुनिया"]),
        ("\u0301a\u0301 q\u0308", ["\u00e1", "q\u0308"]),  # NFKC composes what it can
        ("", []),
        ("!?… — 🙂", []),
    ],
)
def test_document_terms(text: str, terms: list[str]) -> None:
    assert document_terms(text) == terms


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        ("咖啡", ["咖啡"]),
        ("寿司", ["寿司"]),
        ("明", ["明"]),
        ("谁喜欢咖啡", ["谁喜", "喜欢", "欢咖", "咖啡"]),
        ("Coffee coffee COFFEE", ["coffee"]),
        ('"NEAR(a b)" OR * (x)', ["near", "a", "b", "or", "x"]),
        ("", []),
    ],
)
def test_query_terms(query: str, terms: list[str]) -> None:
    assert query_terms(query) == terms


def test_query_terms_are_bounded() -> None:
    many = " ".join(f"w{n}" for n in range(100))
    assert query_terms(many) == [f"w{n}" for n in range(MAX_QUERY_TERMS)]
    assert query_terms("x" * 500) == ["x" * MAX_TERM_CHARS]
    assert document_terms("y" * 500) == ["y" * MAX_TERM_CHARS]


def test_query_expressions_quote_every_term() -> None:
    assert fts5_query(['a"b', "c"]) == '"a""b" OR "c"'
    assert tsquery(["it's", "a\\b"]) == "'it''s' | 'a\\\\b'"


def test_visibility_keys_select_what_the_chat_admits() -> None:
    def keys(m: Memory) -> set[str]:
        return set(
            memory_keys(
                platform=m.platform,
                person_id=m.person_id,
                chat_id=m.chat_id,
                scope=m.scope,
                enabled=m.enabled,
            ).split()
        )

    def admitted(v: Visibility) -> set[str]:
        return {token for token in visibility_keys(v, None).replace("(", " ").replace(")", " ").split()} - {
            "keys",
            ":",
            "OR",
            "AND",
        }

    cases = [
        memory(),
        memory(scope="private"),
        memory(scope="global"),
        memory(enabled=False),
        memory(chat_id="oc_2"),
        memory(platform="telegram"),
    ]
    views = [
        Visibility("feishu", "oc_1", None, False),
        Visibility("feishu", "oc_1", "ou_a", True),
        Visibility("feishu", "dm", "ou_b", True),
        Visibility("telegram", "oc_1", None, False),
    ]
    for m in cases:
        for v in views:
            assert bool(keys(m) & admitted(v)) is v.admits(m), (m, v)
    assert (
        memory_keys(platform="feishu", person_id="ou_a", chat_id="oc_1", scope="group", enabled=False) == ""
    )
    person = visibility_keys(views[0], "ou_a")
    assert person.startswith(visibility_keys(views[0], None) + " AND keys : k")
