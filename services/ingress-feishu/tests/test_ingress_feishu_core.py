"""Unit tests of the pure core: adapter edge cases, outbound formatting, pacing, names, webhook checks."""

from __future__ import annotations

import copy
import json

import pytest

from larkbot.canonical.content import Mention, Text
from larkbot.canonical.events import MessageEvent, ReactionEvent
from larkbot.ingress_feishu.core import (
    Adapted,
    Dropped,
    FeishuAdapter,
    MalformedPayload,
    NeedsChat,
    UnknownEventType,
    UnsupportedEmoji,
    emoji,
)
from larkbot.ingress_feishu.core.apierrors import ApiFailure, classify
from larkbot.ingress_feishu.core.names import (
    NameEntry,
    Source,
    contact_answer,
    merge,
    needs_lookup,
    payload_name,
)
from larkbot.ingress_feishu.core.outbound import (
    feishu_uuid,
    post_content,
    self_content,
    split_text,
    to_feishu_markdown,
)
from larkbot.ingress_feishu.core.pacing import SendPacer
from larkbot.ingress_feishu.core.webhook import (
    Accepted,
    Challenge,
    Rejected,
    decrypt,
    encrypt,
    signature,
    verify,
)
from larkbot.ingress_feishu.fake.samples import ALICE, BOB, BOT, CHAT, FIRST_MESSAGE, P2P_CHAT, payload


def adapter(chats: frozenset[str] | None = frozenset({CHAT})) -> FeishuAdapter:
    return FeishuAdapter(BOT, chats, 0)


# -- adapter -------------------------------------------------------------------------------------------
def test_reaction_needs_chat_until_the_message_is_known() -> None:
    a = adapter()
    result = a.adapt(payload("reaction_created"), 1)
    assert result == NeedsChat(
        "im.message.reaction.created_v1", "f1c2e3d4a5b6c7d8e9f0a1b2c3d4e5f6", FIRST_MESSAGE
    )
    a.adapt(payload("message_text"), 1)  # remembers message → chat
    adapted = a.adapt(payload("reaction_created"), 2)
    assert isinstance(adapted, Adapted)
    [event] = adapted.events
    assert isinstance(event, ReactionEvent)
    assert event.chat_id == CHAT


def test_reaction_on_a_private_message_is_dropped() -> None:
    a = adapter(None)
    private = payload("message_private")
    a.adapt(private, 1)
    reaction = copy.deepcopy(payload("reaction_created"))
    reaction["event"]["message_id"] = private["event"]["message"]["message_id"]
    assert isinstance(a.adapt(reaction, 2), Dropped)


def test_replay_mode_accepts_every_group_but_never_private_chats() -> None:
    a = adapter(None)
    assert isinstance(a.adapt(payload("message_unconfigured"), 1), Adapted)
    dropped = a.adapt(payload("message_private"), 1)
    assert isinstance(dropped, Dropped)
    assert dropped.reason == "private_chat"


def test_redelivery_adapts_to_identical_events_except_arrival_time() -> None:
    a = adapter()
    first = a.adapt(payload("message_post"), 100)
    second = a.adapt(payload("message_post"), 900_000)
    assert isinstance(first, Adapted)
    assert isinstance(second, Adapted)
    assert first.events[0].dedup_key == second.events[0].dedup_key
    assert first.events[0].model_copy(update={"received_at_ms": 0}) == second.events[0].model_copy(
        update={"received_at_ms": 0}
    )


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda p: p.pop("schema"), "$.schema"),
        (lambda p: p["header"].pop("event_id"), "$.header.event_id"),
        (
            lambda p: p["event"]["message"].__setitem__("content", "{not json"),
            "$.event.message.content: not JSON",
        ),
        (lambda p: p["event"]["message"].__setitem__("create_time", "yesterday"), "create_time"),
        (lambda p: p["event"]["sender"]["sender_id"].pop("open_id"), "open_id"),
        (lambda p: p["event"]["message"].__setitem__("mentions", {"key": 1}), "mentions: not a list"),
    ],
)
def test_malformed_payloads_name_the_field(mutate: object, fragment: str) -> None:
    broken = copy.deepcopy(payload("message_text"))
    mutate(broken)  # type: ignore[operator]
    with pytest.raises(MalformedPayload) as info:
        adapter().adapt(broken, 1)
    assert fragment in str(info.value)
    assert "午饭" not in str(info.value)  # never the user's text


def test_unknown_event_type() -> None:
    with pytest.raises(UnknownEventType) as info:
        adapter().adapt(payload("message_read"), 1)
    assert info.value.reason == "unknown_event_type"


def test_image_without_key_is_malformed() -> None:
    broken = copy.deepcopy(payload("message_image"))
    broken["event"]["message"]["content"] = json.dumps({"file_key": "x"})
    with pytest.raises(MalformedPayload, match="image_key"):
        adapter().adapt(broken, 1)


def test_unknown_message_type_is_a_readable_placeholder() -> None:
    odd = copy.deepcopy(payload("message_text"))
    odd["event"]["message"]["message_type"] = "hologram"
    odd["event"]["message"]["content"] = "{}"
    result = adapter().adapt(odd, 1)
    assert isinstance(result, Adapted)
    event = result.events[0]
    assert isinstance(event, MessageEvent)
    assert event.content.plain_text() == "[hologram message]"


def test_sender_name_comes_from_the_name_table() -> None:
    result = adapter().adapt(payload("message_text_reply"), 1, {ALICE: "Alice Wang"})
    assert isinstance(result, Adapted)
    event = result.events[0]
    assert isinstance(event, MessageEvent)
    assert event.sender.display_name == "Alice Wang"
    assert event.reply_to_message_id == FIRST_MESSAGE


# -- outbound ------------------------------------------------------------------------------------------
def test_mentions_only_for_listed_ids_and_raw_at_is_defused() -> None:
    text = (
        f'<mention uid="{ALICE}">@Alice</mention> <mention uid="{BOB}">@Bob</mention> <at user_id="x">y</at>'
    )
    md = to_feishu_markdown(text, frozenset({ALICE}))
    assert md == f'<at user_id="{ALICE}"></at> @Bob ‹at user_id="x">y‹/at>'
    content = self_content(text, frozenset({ALICE}))
    assert content.nodes[0] == Mention(user_id=ALICE, text="@Alice")
    assert content.nodes[1] == Text(text=' @Bob <at user_id="x">y</at>')


def test_post_content_shape() -> None:
    assert json.loads(post_content("**hi**")) == {
        "zh_cn": {"title": "", "content": [[{"tag": "md", "text": "**hi**"}]]}
    }


def test_uuid_is_capped_and_deterministic() -> None:
    assert feishu_uuid("turn-1") == "turn-1"
    assert feishu_uuid("turn-1", 2) == "turn-1-2"
    long_key = "k" * 80
    assert len(feishu_uuid(long_key, 3)) <= 50
    assert feishu_uuid(long_key, 3) == feishu_uuid(long_key, 3)
    assert feishu_uuid(long_key, 3) != feishu_uuid(long_key, 4)


def test_split_respects_the_byte_limit_and_keeps_text() -> None:
    text = "第一段" * 50 + "\n\n" + "second paragraph " * 20 + "\n" + "x" * 300
    parts = split_text(text, limit=200)
    assert all(len(p.encode()) <= 200 for p in parts)
    assert "".join(parts).replace("\n", "") == text.replace("\n", "")
    assert split_text("short", limit=200) == ["short"]


def test_emoji_mapping() -> None:
    assert emoji.to_feishu("👍") == "THUMBSUP"
    assert emoji.to_feishu("❤️") == "HEART"
    assert emoji.to_feishu("❤") == "HEART"
    assert emoji.to_feishu("JIAYI") == "JIAYI"
    assert emoji.to_canonical("THUMBSUP") == "👍"
    assert emoji.to_canonical("JIAYI") == "JIAYI"
    with pytest.raises(UnsupportedEmoji):
        emoji.to_feishu("🦜")


# -- pacing and names ----------------------------------------------------------------------------------
def test_pacer_spaces_sends_per_chat_and_per_app() -> None:
    pacer = SendPacer()
    delays = [pacer.reserve("a", 10.0) for _ in range(6)]
    assert delays == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    assert pacer.reserve("b", 10.0) == pytest.approx(1.0 + 0.02)  # the app gap follows the latest slot
    pacer.back_off(20.0)
    assert pacer.reserve("c", 11.0) == pytest.approx(9.0)


def test_name_rule_contact_api_wins_payload_names_only_fill_gaps() -> None:
    mention = merge(None, payload_name("ou_a", "Ali"))
    assert mention == NameEntry("ou_a", "Ali", Source.PAYLOAD, None)
    assert merge(mention, payload_name("ou_a", "Alice W.")) is None  # a payload never replaces a name
    found = merge(mention, contact_answer("ou_a", "Alice Wang", 1000.0))
    assert found == NameEntry("ou_a", "Alice Wang", Source.CONTACT, 1000.0)
    assert merge(found, payload_name("ou_a", "Ali")) is None  # nor the contact API's
    missed = merge(found, contact_answer("ou_a", None, 2000.0))  # a failed refresh keeps the name
    assert missed == NameEntry("ou_a", "Alice Wang", Source.CONTACT, 2000.0)
    renamed = merge(missed, contact_answer("ou_a", "Alice Li", 3000.0))  # a directory rename is real
    assert renamed == NameEntry("ou_a", "Alice Li", Source.CONTACT, 3000.0)
    assert merge(renamed, contact_answer("ou_a", "Alice Li", 3000.0)) is None


def test_name_lookups_follow_the_contact_answer_not_payload_names() -> None:
    assert needs_lookup(None, 0.0, 100.0)
    assert needs_lookup(NameEntry("ou_a", "Ali", Source.PAYLOAD, None), 0.0, 100.0)
    answered = NameEntry("ou_a", None, None, 1000.0)
    assert not needs_lookup(answered, 1099.0, 100.0)
    assert needs_lookup(answered, 1100.0, 100.0)


def test_name_entries_round_trip_and_refuse_foreign_values() -> None:
    entry = NameEntry("ou_a", "名字", Source.CONTACT, 1.5)
    assert NameEntry.from_json(entry.to_json()) == entry
    for bad in (b"[]", b'{"open_id": 1}', b'{"open_id": "ou_a", "name": "x", "source": null}'):
        with pytest.raises(ValueError):  # noqa: PT011 - json, enum and shape errors are all ValueError
            NameEntry.from_json(bad)


# -- webhook -------------------------------------------------------------------------------------------
def test_encrypt_roundtrip_and_bad_key() -> None:
    sealed = encrypt(b'{"a":1}', "key", b"0" * 16)
    assert decrypt(sealed, "key") == b'{"a":1}'
    with pytest.raises(ValueError):  # noqa: PT011 - wrong key gives a padding or JSON error, both ValueError
        json.loads(decrypt(sealed, "other"))


def test_verify_rules() -> None:
    body = json.dumps(payload("message_text")).encode()
    good = {
        "X-Lark-Request-Timestamp": "1",
        "X-Lark-Request-Nonce": "n",
        "X-Lark-Signature": signature("1", "n", "ek", body),
    }
    assert isinstance(verify(body, good, encrypt_key="ek", verification_token="v3rIfIcAt10nT0k3n"), Accepted)
    assert verify(body, {}, encrypt_key="ek", verification_token=None) == Rejected(
        "bad_signature", "signature headers are missing"
    )
    assert isinstance(verify(body, {}, encrypt_key=None, verification_token="other"), Rejected)
    assert verify(b"[]", {}, encrypt_key=None, verification_token=None) == Rejected(
        "not_json", "the body is not a JSON object"
    )
    challenge = json.dumps({"type": "url_verification", "challenge": "c", "token": "t"}).encode()
    assert verify(challenge, {}, encrypt_key="ek", verification_token="t") == Challenge("c")
    sealed = json.dumps({"encrypt": encrypt(body, "ek", b"1" * 16)}).encode()
    assert verify(sealed, {}, encrypt_key=None, verification_token=None) == Rejected(
        "undecryptable", "an encrypted callback arrived but no encrypt key is configured"
    )


# -- OpenAPI error classes -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("code", "status", "failure"),
    [
        (230001, 400, ApiFailure.NOT_FOUND),  # message GET of an id Feishu does not know
        (230110, 400, ApiFailure.NOT_FOUND),
        (41050, 400, ApiFailure.NOT_FOUND),
        (230027, 400, ApiFailure.FORBIDDEN),
        (99991672, 400, ApiFailure.FORBIDDEN),
        (99992402, 400, ApiFailure.REFUSED),
        (123456, 404, ApiFailure.REFUSED),
        (99991400, 400, ApiFailure.TRANSIENT),
        (230020, 400, ApiFailure.TRANSIENT),
        (1500, 500, ApiFailure.TRANSIENT),
        (123456, 429, ApiFailure.TRANSIENT),
        (-1, 200, ApiFailure.TRANSIENT),
    ],
)
def test_openapi_error_classes(code: int, status: int, failure: ApiFailure) -> None:
    assert classify(code, status) is failure


# -- direct chats ----------------------------------------------------------------------------------------
def direct(person: str = ALICE) -> FeishuAdapter:
    return FeishuAdapter(BOT, frozenset({CHAT, P2P_CHAT}), 0, direct_chats={P2P_CHAT: person})


def test_a_configured_direct_chat_is_served_with_its_events() -> None:
    a = direct()
    private = payload("message_private")
    adapted = a.adapt(private, 1)
    assert isinstance(adapted, Adapted)
    [event] = adapted.events
    assert isinstance(event, MessageEvent)
    assert (event.chat_id, event.chat_type, event.sender.id) == (P2P_CHAT, "private", ALICE)
    # The person's reactions and recalls in it are served too, and carry the chat type.
    reaction = copy.deepcopy(payload("reaction_created"))
    reaction["event"]["message_id"] = event.message_id
    reaction["event"]["user_id"]["open_id"] = ALICE
    recall = copy.deepcopy(payload("message_recalled"))
    recall["event"].update(message_id=event.message_id, chat_id=P2P_CHAT)
    for later in (reaction, recall):
        result = a.adapt(later, 2)
        assert isinstance(result, Adapted), later["header"]["event_type"]
        assert [(e.chat_id, e.chat_type) for e in result.events] == [(P2P_CHAT, "private")]
    # Without direct_with a configured direct chat is served as well (no private memories there).
    plain = FeishuAdapter(BOT, frozenset({P2P_CHAT}), 0).adapt(private, 1)
    assert isinstance(plain, Adapted)
    assert plain.events[0].chat_type == "private"


def test_a_direct_chat_the_configuration_does_not_name_is_dropped_naming_the_person() -> None:
    dropped = adapter().adapt(payload("message_private"), 1)
    assert dropped == Dropped(
        "im.message.receive_v1", "ev8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f", "private_chat", P2P_CHAT, ALICE
    )
    unconfigured = adapter().adapt(payload("message_unconfigured"), 1)
    assert isinstance(unconfigured, Dropped)
    assert (unconfigured.reason, unconfigured.person) == ("unconfigured_chat", None)


def test_a_chat_configured_as_direct_that_is_not_one_with_that_person_is_dropped() -> None:
    # direct_with names someone else than the person writing in the direct chat.
    other = direct(person=BOB).adapt(payload("message_private"), 1)
    assert isinstance(other, Dropped)
    assert (other.reason, other.chat_id, other.person) == ("not_direct", P2P_CHAT, ALICE)
    # direct_with set on a group.
    group = FeishuAdapter(BOT, frozenset({CHAT}), 0, direct_chats={CHAT: ALICE})
    in_group = group.adapt(payload("message_text"), 1)
    assert isinstance(in_group, Dropped)
    assert (in_group.reason, in_group.chat_id) == ("not_direct", CHAT)
