"""The inbound path under answers that must end an event rather than have Feishu re-push it for hours:
OpenAPI lookups refused for good, and events larger than a WebSocket frame or a bus message may be.

Real lark-oapi long connection against the fake Feishu, real JetStream.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import REGISTRY

from larkbot.canonical.codec import decode_as
from larkbot.canonical.content import Text
from larkbot.canonical.events import EVENT_ADAPTER, MessageEvent, ReactionEvent
from larkbot.canonical.names import OBJECT_STORE_BLOBS, STREAM_DEAD_LETTER, STREAM_EVENTS, Service
from larkbot.ingress_feishu.app import FeishuOptions, IngressFeishuService
from larkbot.ingress_feishu.fake.longconn import LongConnection
from larkbot.ingress_feishu.fake.samples import ALICE, BOB, CHAT, OTHER_CHAT, payload
from larkbot.ingress_feishu.fake.server import FakeFeishu
from larkbot.runtime.bootstrap import bootstrap
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import parse_config
from larkbot.runtime.service import built

REACTION = "im.message.reaction.created_v1"


@pytest.fixture
async def fake() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu(users={ALICE: "Alice Wang"}) as server:
        yield server


@pytest.fixture
async def connection(fake: FakeFeishu, bus: Bus, nats_url: str) -> AsyncIterator[LongConnection]:
    config = parse_config(
        {
            "feishu": {"app_id": fake.app_id, "app_secret": fake.app_secret, "domain": fake.url},
            "utc_offset_min": 480,
            "chats": {f"feishu:{CHAT}": {}},
        },
        env={},
    )
    # The outcomes are under test, not Feishu's 3 s budget: a 10 MB event takes ~0.4 s here, more on a
    # loaded machine.
    recipe = IngressFeishuService(config, FeishuOptions(api_timeout_s=5.0, ack_timeout_s=10.0))
    async with built(Service.INGRESS_FEISHU, recipe, config, nats_url=nats_url):
        await fake.long_connection.wait_connected()
        yield fake.long_connection


def events_total(event_type: str, outcome: str) -> float:
    labels = {"event_type": event_type, "outcome": outcome}
    return REGISTRY.get_sample_value("larkbot_ingress_feishu_events_total", labels) or 0.0


async def stored(bus: Bus, stream: str) -> list[tuple[dict[str, str], bytes]]:
    info = await bus.js.stream_info(stream)
    if info.state.messages == 0:
        return []
    out = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        msg = await bus.js.get_msg(stream, seq)
        out.append((dict(msg.headers or {}), msg.data or b""))
    return out


def reaction_on(message_id: str, event_id: str) -> dict[str, Any]:
    data = copy.deepcopy(payload("reaction_created"))
    data["header"]["event_id"] = event_id
    data["event"]["message_id"] = message_id
    return data


# -- OpenAPI lookups -----------------------------------------------------------------------------------
async def test_reaction_on_a_message_feishu_does_not_know_is_dropped_and_acknowledged(
    connection: LongConnection, fake: FakeFeishu, bus: Bus
) -> None:
    """Message GET answers 230001 (HTTP 400) for an id it does not know: the event is acknowledged 200
    and counted ``dropped_unknown_message``, never re-pushed for hours."""
    before = events_total(REACTION, "dropped_unknown_message")
    unknown = reaction_on("om_00000000000000000000000000000404", "a1" * 16)
    assert await connection.push(unknown) == 200
    assert await connection.redeliver(unknown["header"]["event_id"]) == 200
    assert events_total(REACTION, "dropped_unknown_message") == before + 2
    assert await stored(bus, STREAM_EVENTS) == []
    assert await stored(bus, STREAM_DEAD_LETTER) == []


@pytest.mark.parametrize(
    ("code", "status", "reason"),
    [(230027, 400, "lookup_forbidden"), (99992402, 400, "lookup_refused")],
)
async def test_a_lookup_refused_for_good_dead_letters_the_event(
    connection: LongConnection, fake: FakeFeishu, bus: Bus, code: int, status: int, reason: str
) -> None:
    """The app lacks the scope, or Feishu refuses the request itself: repeating cannot help, so the
    event is acknowledged and kept as a dead letter naming the code (a member's reaction is not lost)."""
    fake.message_chats["om_000000000000000000000000000000aa"] = CHAT
    fake.fail_next("message.get", status=status, code=code)
    event = reaction_on("om_000000000000000000000000000000aa", "b2" * 16)
    assert await connection.push(event) == 200
    [(headers, body)] = await stored(bus, STREAM_DEAD_LETTER)
    assert headers["Larkbot-Dead-Letter-Reason"] == reason
    assert str(code) in headers["Larkbot-Dead-Letter-Error"]
    assert headers["Larkbot-Dead-Letter-Subject"] == REACTION
    assert b"om_000000000000000000000000000000aa" in body
    assert await stored(bus, STREAM_EVENTS) == []


async def test_a_transient_lookup_failure_is_left_to_feishus_re_push(
    connection: LongConnection, fake: FakeFeishu, bus: Bus
) -> None:
    fake.message_chats["om_000000000000000000000000000000bb"] = CHAT
    fake.fail_next("message.get", status=500, code=1500)
    event = reaction_on("om_000000000000000000000000000000bb", "c3" * 16)
    assert await connection.push(event) == 500
    assert await connection.redeliver(event["header"]["event_id"]) == 200
    [(headers, data)] = await stored(bus, STREAM_EVENTS)
    reaction = decode_as(data, EVENT_ADAPTER, headers)
    assert isinstance(reaction, ReactionEvent)
    assert (reaction.chat_id, reaction.message_id) == (CHAT, "om_000000000000000000000000000000bb")
    assert await stored(bus, STREAM_DEAD_LETTER) == []


# -- sizes ---------------------------------------------------------------------------------------------
def text_event(event_id: str, message_id: str, text: str) -> dict[str, Any]:
    data = copy.deepcopy(payload("message_text"))
    data["header"]["event_id"] = event_id
    data["event"]["message"]["message_id"] = message_id
    # ASCII escapes in the content string (``\\u4e2d``), escaped once more in the envelope.
    data["event"]["message"]["content"] = json.dumps({"text": text})
    data["event"]["message"]["mentions"] = []
    return data


async def test_an_event_over_one_mib_is_accepted_on_the_same_connection(
    connection: LongConnection, bus: Bus
) -> None:
    """A 150,000-character text (Feishu's 150 KB limit) is ~1.05 MB as an envelope: over the 1 MiB frame
    limit of ``websockets``, which closed the connection (1009) before any handler saw the event."""
    text = "中" * 150_000
    event = text_event("d4" * 16, "om_0000000000000000000000000000long", text)
    assert len(json.dumps(event, ensure_ascii=False).encode()) > 1024 * 1024
    assert await connection.push(event) == 200
    assert (connection.connections, len(connection.sockets)) == (1, 1)
    [(headers, data)] = await stored(bus, STREAM_EVENTS)
    message = decode_as(data, EVENT_ADAPTER, headers)
    assert isinstance(message, MessageEvent)
    assert message.content.nodes == (Text(text=text),)


async def test_an_event_the_bus_cannot_carry_is_dead_lettered_whole_and_acknowledged(
    connection: LongConnection, bus: Bus
) -> None:
    """Its canonical event exceeds the bus's 8 MiB message limit (each U+0001 is ``\\u0001`` in JSON):
    acknowledged 200 on the same connection, dead-lettered ``too_large``, the payload kept whole in the
    object store (a bus message could not hold it), and a re-push adds no second record."""
    event = text_event("e5" * 16, "om_00000000000000000000000000000big", "\x01" * 1_500_000)
    assert await connection.push(event) == 200
    assert await connection.redeliver(event["header"]["event_id"]) == 200
    assert (connection.connections, len(connection.sockets)) == (1, 1)
    assert await stored(bus, STREAM_EVENTS) == []
    [(headers, body)] = await stored(bus, STREAM_DEAD_LETTER)
    assert headers["Larkbot-Dead-Letter-Reason"] == "too_large"
    assert "max_payload" in headers["Larkbot-Dead-Letter-Error"]
    assert body == b""
    blob = await (await bus.js.object_store(OBJECT_STORE_BLOBS)).get(headers["Larkbot-Dead-Letter-Blob"])
    assert blob.data == connection.pushed[event["header"]["event_id"]]


async def test_a_dead_letter_not_written_leaves_the_event_to_feishus_re_push(
    connection: LongConnection, bus: Bus
) -> None:
    """The dead-letter record cannot be written (no ``DEADLETTER`` stream answers): the event is answered
    500, so Feishu re-pushes it; once the stream is back, the re-push is recorded and acknowledged."""
    broken = copy.deepcopy(payload("message_image"))
    del broken["event"]["message"]["chat_id"]
    await bus.js.delete_stream(STREAM_DEAD_LETTER)
    assert await connection.push(broken) == 500
    await bootstrap(bus.js)
    assert await connection.redeliver(broken["header"]["event_id"]) == 200
    [(headers, body)] = await stored(bus, STREAM_DEAD_LETTER)
    assert headers["Larkbot-Dead-Letter-Reason"] == "malformed"
    assert headers["Larkbot-Dead-Letter-Stream"] == "feishu"
    assert headers["Larkbot-Dead-Letter-Consumer"] == "ingress-feishu"
    assert body == connection.pushed[broken["header"]["event_id"]]


# -- shared cards --------------------------------------------------------------------------------------
async def test_shared_cards_name_what_was_shared_and_a_refused_name_holds_nothing_up(
    connection: LongConnection, fake: FakeFeishu, bus: Bus
) -> None:
    """A shared contact is named through the contact API, a shared group through the chat API; a group
    the app may not read leaves the card unnamed, and the message is published all the same."""
    fake.users[BOB] = "Bob Li"
    fake.chat_names[OTHER_CHAT] = "Dinner crew"
    unreadable = copy.deepcopy(payload("message_share_chat"))
    unreadable["header"]["event_id"] = "d4" * 16
    unreadable["event"]["message"]["message_id"] = "om_" + "d4" * 16
    unreadable["event"]["message"]["content"] = json.dumps({"chat_id": "oc_" + "0" * 32})
    for event in (payload("message_share_user"), payload("message_share_chat"), unreadable):
        assert await connection.push(event) == 200
    texts = [
        decode_as(body, EVENT_ADAPTER, headers).content.plain_text()  # type: ignore[union-attr]
        for headers, body in await stored(bus, STREAM_EVENTS)
    ]
    assert texts == ["[shared contact: Bob Li]", "[shared group: Dinner crew]", "[shared group]"]
    assert await stored(bus, STREAM_DEAD_LETTER) == []
