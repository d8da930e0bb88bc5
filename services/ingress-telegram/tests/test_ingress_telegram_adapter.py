"""Adapter behaviour beyond the single-fixture goldens: order-dependent rules, the whitelist, UTF-16
properties of entity handling."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from larkbot.canonical.content import Bold, Text
from larkbot.canonical.events import EditEvent, MessageEvent
from larkbot.ingress_telegram.core import MalformedUpdate, TelegramAdapter
from larkbot.ingress_telegram.core.entities import to_content, utf16_len
from larkbot.ingress_telegram.core.payload import Obj

FIXTURES = Path(__file__).parent / "fixtures" / "updates"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return data


def test_phantom_edit_with_identical_content_is_skipped() -> None:
    adapter = TelegramAdapter(None, None, 0)
    original = load("message_text_plain")
    adapter.adapt(original, 1)
    phantom = {"update_id": 5, "edited_message": {**original["message"], "edit_date": 1767225700}}
    assert adapter.adapt(phantom, 2).dropped == "phantom_edit"
    real = load("edited_message")
    (event,) = adapter.adapt(real, 3).events
    assert isinstance(event, EditEvent)
    # Editing back to the text seen last is again a real change; repeating it is a phantom.
    back = {"update_id": 6, "edited_message": {**original["message"], "edit_date": 1767225800}}
    assert len(adapter.adapt(back, 4).events) == 1
    assert adapter.adapt({**back, "update_id": 7}, 5).dropped == "phantom_edit"


def test_edit_of_a_message_never_seen_is_published() -> None:
    (event,) = TelegramAdapter(None, None, 0).adapt(load("edited_message"), 1).events
    assert isinstance(event, EditEvent)
    assert event.dedup_key.startswith("-1001234567890:501:edit:1767225720:")


def test_edits_within_one_second_have_keys_of_their_own_and_a_redelivery_keeps_its_key() -> None:
    """``edit_date`` counts seconds; a bot streaming its answer edits several times in one. Keyed by the
    date alone, the later states hit the first one's key and were lost as "duplicates"."""
    edited = load("edited_message")
    later = json.loads(json.dumps(edited))
    later["update_id"] += 1
    later["edited_message"]["text"] += " (and more)"
    first_key = TelegramAdapter(None, None, 0).adapt(edited, 1).events[0].dedup_key
    later_key = TelegramAdapter(None, None, 0).adapt(later, 2).events[0].dedup_key
    assert later["edited_message"]["edit_date"] == edited["edited_message"]["edit_date"]
    assert first_key != later_key
    assert TelegramAdapter(None, None, 0).adapt(edited, 9).events[0].dedup_key == first_key


def test_fingerprint_memory_is_bounded() -> None:
    adapter = TelegramAdapter(None, None, 0, fingerprint_capacity=1)
    original = load("message_text_plain")
    adapter.adapt(original, 1)
    adapter.adapt(load("message_entities_styles"), 2)  # evicts message 501
    phantom = {"update_id": 5, "edited_message": {**original["message"], "edit_date": 1767225700}}
    assert len(adapter.adapt(phantom, 3).events) == 1


def test_unconfigured_chats_are_dropped_before_validation() -> None:
    adapter = TelegramAdapter(None, frozenset({"42"}), 0)
    assert adapter.adapt(load("message_text_plain"), 1).dropped == "chat_not_configured"
    poll = load("unsupported_message_kind")  # refused in a configured chat
    assert adapter.adapt(poll, 1).dropped == "chat_not_configured"
    allowed = TelegramAdapter(None, frozenset({"-1001234567890"}), 0)
    assert len(allowed.adapt(load("message_text_plain"), 1).events) == 1


def test_event_stamps_come_from_the_caller() -> None:
    (event,) = TelegramAdapter(None, None, -300).adapt(load("message_text_plain"), 1234).events
    assert (event.received_at_ms, event.utc_offset_min, event.timestamp_sec) == (1234, -300, 1767225600.0)


def test_adapt_message_builds_the_self_sent_copy() -> None:
    sent = {
        **load("message_text_plain")["message"],
        "from": load("message_from_bot_itself")["message"]["from"],
    }
    event = TelegramAdapter("7000000001", None, 0).adapt_message(sent, 9)
    assert isinstance(event, MessageEvent)
    assert event.is_self_sent
    assert event.dedup_key == "-1001234567890:501"


def test_update_id_must_be_an_integer() -> None:
    with pytest.raises(MalformedUpdate, match="update_id"):
        TelegramAdapter(None, None, 0).adapt({"update_id": "1", "message": {}}, 1)


def test_not_an_object_is_malformed() -> None:
    with pytest.raises(MalformedUpdate, match="expected an object"):
        TelegramAdapter(None, None, 0).adapt([1, 2], 1)  # type: ignore[arg-type]


def _entity(offset: int, length: int, kind: str = "bold") -> Obj:
    return Obj({"offset": offset, "length": length, "type": kind}, "e")


def test_astral_characters_do_not_shift_entities() -> None:
    text = "😀😀 ok"
    content = to_content(text, [_entity(5, 2)])
    assert content.nodes == (Text(text="😀😀 "), Bold(children=(Text(text="ok"),)))


def test_crossing_entities_are_split_not_lost() -> None:
    content = to_content("abcdef", [_entity(0, 4, "bold"), _entity(2, 4, "italic")])
    assert content.model_dump(mode="json")["nodes"] == [
        {"kind": "bold", "children": [{"kind": "text", "text": "ab"}, {"kind": "italic", "children": [
            {"kind": "text", "text": "cd"}]}]},
        {"kind": "italic", "children": [{"kind": "text", "text": "ef"}]},
    ]  # fmt: skip


def test_unknown_entity_kinds_keep_their_text() -> None:
    content = to_content("call +1 555", [_entity(5, 6, "phone_number"), _entity(0, 4, "some_future_kind")])
    assert content.nodes == (Text(text="call +1 555"),)


_KINDS = st.sampled_from(
    ["bold", "italic", "underline", "strikethrough", "spoiler", "code", "pre", "mention", "url", "blockquote"]
)


@st.composite
def _text_and_entities(draw: st.DrawFn) -> tuple[str, list[Obj]]:
    text = draw(st.text(alphabet=st.sampled_from("ab \n😀é𝕏👨‍👩"), min_size=1, max_size=30))
    bounds = [0]
    for ch in text:
        bounds.append(bounds[-1] + utf16_len(ch))
    entities = []
    for _ in range(draw(st.integers(0, 6))):
        a, b = sorted(draw(st.sampled_from(bounds)) for _ in range(2))
        entities.append(Obj({"offset": a, "length": b - a, "type": draw(_KINDS)}, "e"))
    return text, entities


@settings(max_examples=300, deadline=None)
@given(_text_and_entities())
def test_plain_text_of_the_tree_is_the_message_text(case: tuple[str, list[Obj]]) -> None:
    text, entities = case
    assert to_content(text, entities).plain_text() == text


def test_values_the_contract_refuses_are_malformed() -> None:
    update = load("message_reaction_anonymous")
    update["message_reaction"]["new_reaction"] = [{"type": "emoji", "emoji": ""}]
    with pytest.raises(MalformedUpdate, match="canonical"):
        TelegramAdapter(None, None, 0).adapt(update, 1)
