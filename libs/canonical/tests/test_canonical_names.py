"""Subject escaping and the declared bus layout."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from larkbot.canonical import names
from larkbot.canonical.content import Content
from larkbot.canonical.events import MessageEvent, Sender
from larkbot.canonical.fingerprint import event_msg_id

# Subject syntax, whitespace and control characters (the server rejects NUL in a subject).
UNSAFE = frozenset(".*> \x7f") | {chr(code) for code in range(0x20)}


@settings(database=None, max_examples=300)
@given(st.text(min_size=1))
def test_subject_token_round_trips(value: str) -> None:
    token = names.subject_token(value)
    assert not (set(token) & UNSAFE)
    assert names.unescape_subject_token(token) == value


@settings(database=None)
@given(st.text(alphabet=st.sampled_from("ab.%*> 2E"), min_size=1))
def test_subject_token_round_trips_escape_lookalikes(value: str) -> None:
    assert names.unescape_subject_token(names.subject_token(value)) == value


@pytest.mark.parametrize(
    ("value", "token"),
    [
        ("oc_a0553eda9014c201e6969b478895c230", "oc_a0553eda9014c201e6969b478895c230"),
        ("-1001234567890", "-1001234567890"),
        ("a.b", "a%2Eb"),
        ("team chat", "team%20chat"),
        ("*", "%2A"),
        (">", "%3E"),
        ("100%", "100%25"),
        ("%2E", "%252E"),
        ("a\x00b\tc", "a%00b%09c"),
    ],
)
def test_subject_token_examples(value: str, token: str) -> None:
    assert names.subject_token(value) == token
    assert names.unescape_subject_token(token) == value


def test_empty_id_is_not_a_token() -> None:
    with pytest.raises(ValueError, match="empty"):
        names.subject_token("")


@pytest.mark.parametrize("build", [names.events_subject, names.context_subject, names.typing_subject])
@pytest.mark.parametrize("chat_id", ["oc_a0553eda9014c201e6969b478895c230", "-1001234567890", "odd.chat *>%"])
def test_chat_subjects_split_back(build: Callable[[str, str], str], chat_id: str) -> None:
    subject = build(names.Platform.FEISHU, chat_id)
    assert len(subject.split(".")) == 3
    assert names.split_chat_subject(subject) == ("feishu", chat_id)


def test_events_subject_shape() -> None:
    assert names.events_subject(names.Platform.TELEGRAM, "-100123") == "events.telegram.-100123"


@pytest.mark.parametrize("subject", ["events.feishu", "events.feishu.a.b", "events"])
def test_split_rejects_other_shapes(subject: str) -> None:
    with pytest.raises(ValueError, match="per-chat"):
        names.split_chat_subject(subject)


def test_msg_id_format() -> None:
    assert names.msg_id(names.Platform.FEISHU, "om_dc13264520392913993dd051dba21dcf") == (
        "feishu:om_dc13264520392913993dd051dba21dcf"
    )
    assert names.msg_id("telegram", "edit:4821:1760683950") == "telegram:edit:4821:1760683950"


def test_every_consumer_reads_a_declared_stream() -> None:
    streams = {stream.name: stream for stream in names.STREAMS}
    for consumer in names.CONSUMERS:
        assert consumer.stream in streams
        if consumer.filter_subject is not None:
            assert consumer.filter_subject in streams[consumer.stream].subjects


def test_layout_names_are_unique() -> None:
    assert len({s.name for s in names.STREAMS}) == len(names.STREAMS)
    assert len({c.durable for c in names.CONSUMERS}) == len(names.CONSUMERS)
    assert len({kv.bucket for kv in names.KEY_VALUES}) == len(names.KEY_VALUES)


def test_every_service_has_a_distinct_port() -> None:
    assert set(names.SERVICE_PORTS) == set(names.Service)
    assert len(set(names.SERVICE_PORTS.values())) == len(names.SERVICE_PORTS)


def test_event_msg_id_is_the_same_for_a_redelivery_and_differs_for_other_content() -> None:
    event = MessageEvent(
        platform=names.Platform.FEISHU,
        chat_id="oc_1",
        dedup_key="om_1",
        event_id="ev_1",
        received_at_ms=1_000,
        timestamp_sec=1.0,
        utc_offset_min=480,
        message_id="om_1",
        sender=Sender(id="ou_a", display_name="ou_a"),
        content=Content.from_text("hi"),
    )
    again = event.model_copy(
        update={
            "received_at_ms": 9_000,
            "utc_offset_min": 0,
            "event_id": "ev_2",
            "sender": Sender(id="ou_a", display_name="Alice"),
        }
    )
    other = event.model_copy(update={"content": Content.from_text("bye")})
    assert re.fullmatch(r"feishu:om_1#[0-9a-f]{16}", event_msg_id(event))
    assert event_msg_id(again) == event_msg_id(event)
    assert event_msg_id(other) != event_msg_id(event)
