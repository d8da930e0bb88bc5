"""Message provenance from real platform payloads: what the ingress adapters mark (forwards, replies,
recalls, the bot's own and other bots' messages) reaches the segment fields the driver checks evidence
against, through the same adapters and projection as the services."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from larkbot.canonical.context import Segment
from larkbot.canonical.names import Platform
from larkbot.ingress_feishu.core import Adapted, FeishuAdapter
from larkbot.ingress_telegram.core import TelegramAdapter
from larkbot.pipeline.core import Projection, RenderParams

ROOT = Path(__file__).resolve().parents[1]
FEISHU = ROOT / "services/ingress-feishu/src/larkbot/ingress_feishu/fake/payloads"
TELEGRAM = ROOT / "services/ingress-telegram/tests/fixtures/updates"
TG_BOT = "7000000001"
TG_GROUP = "-1001234567890"
FS_BOT = "ou_b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0"
FS_GROUP = "oc_5ce6d572455d361153b7xx51da133945"
RECEIVED_MS = 1_767_225_600_000

#: (sender_id, is_myself, is_self_sent, is_bot, is_deleted, is_forwarded, reply_to_message_id)
Provenance = tuple[str | None, bool, bool, bool, bool, bool, str | None]


def _load(directory: Path, name: str) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads((directory / f"{name}.json").read_text(encoding="utf-8"))
    return payload


def _provenance(segment: Segment) -> Provenance:
    return (
        segment.sender_id,
        segment.is_myself,
        segment.is_self_sent,
        segment.is_bot,
        segment.is_deleted,
        segment.is_forwarded,
        segment.reply_to_message_id,
    )


def _messages(projection: Projection) -> dict[str, Provenance]:
    return {
        segment.message_id: _provenance(segment)
        for segment in projection.segments
        if segment.message_id is not None
    }


def test_telegram_forwards_replies_and_bots() -> None:
    other_bot = _load(TELEGRAM, "message_text_plain")
    other_bot["update_id"] += 1000
    other_bot["message"] |= {
        "message_id": 900,
        "from": {"id": 8000000002, "is_bot": True, "first_name": "Helper", "username": "helper_bot"},
    }
    updates = [
        _load(TELEGRAM, name)
        for name in (
            "message_text_plain",
            "message_reply_plain",
            "message_reply_with_quote",
            "message_forward_user",
            "message_forward_hidden_user",
            "message_forward_chat",
            "message_forward_chat_signed",
            "message_forward_channel",
            "message_forward_legacy_user",
            "message_forward_legacy_hidden_user",
            "message_forward_legacy_channel",
            "message_from_bot_itself",
        )
    ] + [other_bot]
    adapter = TelegramAdapter(bot_id=TG_BOT, configured_chats=None, utc_offset_min=480)
    projection = Projection(RenderParams(Platform.TELEGRAM, TG_GROUP, bot_user_id=TG_BOT))
    for update in updates:
        for event in adapter.adapt(update, RECEIVED_MS).events:
            assert event.chat_id == TG_GROUP
            projection.apply(event)
    messages = _messages(projection)
    alice, bob = "111111111", "222222222"
    forwards = {mid: p for mid, p in messages.items() if p[5]}
    assert messages["501"] == (alice, False, False, False, False, False, None)
    assert messages["509"] == (bob, False, False, False, False, False, "501")
    # Replying with a quote of a message from before the window: the canonical id of the embedded target.
    assert messages["508"] == (alice, False, False, False, False, False, "480")
    # Every forward_origin kind and the pre-7.0 fields: the forwarder is the sender, the message is marked.
    assert len(forwards) == 8
    assert all(p == (alice, False, False, False, False, True, None) for p in forwards.values())
    assert messages["532"] == (TG_BOT, True, True, True, False, False, None)
    assert messages["900"] == ("8000000002", False, False, True, False, False, None)
    xml = {segment.message_id: segment.xml for segment in projection.segments}
    assert all("forwarded_from=" in xml[mid] for mid in forwards)
    assert not any("forwarded_from=" in xml[mid] for mid in messages.keys() - forwards.keys())


def test_a_topic_message_is_not_a_reply_to_the_topic() -> None:
    adapter = TelegramAdapter(bot_id=TG_BOT, configured_chats=None, utc_offset_min=480)
    (event,) = adapter.adapt(_load(TELEGRAM, "message_forum_topic"), RECEIVED_MS).events
    projection = Projection(RenderParams(Platform.TELEGRAM, event.chat_id, bot_user_id=TG_BOT))
    projection.apply(event)
    (segment,) = projection.segments
    assert segment.reply_to_message_id is None


def _feishu_message(name: str, message_id: str, sender_type: str, open_id: str) -> dict[str, Any]:
    payload = copy.deepcopy(_load(FEISHU, name))
    payload["header"]["event_id"] = f"ev_{message_id}"
    event = payload["event"]
    event["message"]["message_id"] = message_id
    event["sender"]["sender_type"] = sender_type
    event["sender"]["sender_id"]["open_id"] = open_id
    return payload


def test_feishu_replies_recalls_and_bots() -> None:
    payloads = [
        _load(FEISHU, "message_text"),
        _load(FEISHU, "message_text_reply"),
        _load(FEISHU, "message_recalled"),
        _load(FEISHU, "message_merge_forward"),
        _feishu_message("message_post", "om_own", "app", FS_BOT),
        _feishu_message("message_post", "om_other_app", "app", "ou_other_app"),
    ]
    adapter = FeishuAdapter(bot_open_id=FS_BOT, configured_chats=None, utc_offset_min=480)
    projection = Projection(RenderParams(Platform.FEISHU, FS_GROUP, bot_user_id=FS_BOT))
    for payload in payloads:
        result = adapter.adapt(payload, RECEIVED_MS, {})
        assert isinstance(result, Adapted)
        for event in result.events:
            projection.apply(event)
    original, reply = "om_dc13264520392913993dd051dba21dcf", "om_5ce6d572455d361153b7cb51da133945"
    member = "ou_84aad35d084aa403a838cf73ee18467"
    assert _messages(projection) == {
        original: ("ou_e1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6", False, False, False, True, False, None),
        reply: (member, False, False, False, False, False, original),
        # Feishu marks neither a merge-forward nor a single forwarded message as forwarded: the member who
        # forwarded is the sender, and the content is the placeholder the XML shows.
        "om_6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d": (member, False, False, False, False, False, None),
        "om_own": (FS_BOT, True, False, True, False, False, None),
        "om_other_app": ("ou_other_app", False, False, True, False, False, None),
    }
