"""The one dead-letter writer: one header schema for a stream message and for a platform payload, the
blob of an input too large for its record, and a failed write that raises rather than loses."""

from __future__ import annotations

import secrets

import nats
import pytest

from larkbot.canonical.names import (
    HEADER_DL_BLOB,
    HEADER_DL_CONSUMER,
    HEADER_DL_DELIVERIES,
    HEADER_DL_ERROR,
    HEADER_DL_REASON,
    HEADER_DL_SEQUENCE,
    HEADER_DL_STREAM,
    HEADER_DL_SUBJECT,
    HEADER_MSG_ID,
    OBJECT_STORE_BLOBS,
    STREAM_DEAD_LETTER,
    dead_letter_subject,
)
from larkbot.runtime.bus import Bus
from larkbot.runtime.deadletter import DeadLetter, DeadLetterFailed, DeadLetters, describe

WAIT = 30.0


async def _records(bus: Bus, source: str, consumer: str, n: int) -> list[tuple[bytes, dict[str, str]]]:
    sub = await bus.js.subscribe(dead_letter_subject(source, consumer), stream=STREAM_DEAD_LETTER)
    try:
        out = []
        for _ in range(n):
            msg = await sub.next_msg(timeout=WAIT)
            out.append((msg.data, dict(msg.headers or {})))
        return out
    finally:
        await sub.unsubscribe()


async def test_a_stream_message_s_record_names_its_source_sequence_and_original_headers(bus: Bus) -> None:
    consumer = f"c{secrets.token_hex(3)}"
    secret = "sk-" + "x" * 20
    letter = DeadLetter(
        source="EVENTS",
        consumer=consumer,
        reason="poison",
        error=describe(ValueError(f"bad\nline {secret}")),
        data=b"payload",
        subject="events.3.feishu.oc_1",
        sequence=41,
        deliveries=2,
        headers={"Larkbot-Type": "MessageEvent"},
    )
    writer = DeadLetters(bus.js)
    await writer.write(letter)
    await writer.write(letter)  # the same input read again: a duplicate, not a second record
    [(data, headers)] = await _records(bus, "EVENTS", consumer, 1)
    assert data == b"payload"
    assert headers[HEADER_MSG_ID] == f"dl:EVENTS:{consumer}:41"
    assert headers[HEADER_DL_REASON] == "poison"
    assert headers[HEADER_DL_ERROR].startswith("ValueError: bad line ")
    assert "\n" not in headers[HEADER_DL_ERROR]
    assert headers[HEADER_DL_STREAM] == "EVENTS"
    assert headers[HEADER_DL_CONSUMER] == consumer
    assert headers[HEADER_DL_SUBJECT] == "events.3.feishu.oc_1"
    assert headers[HEADER_DL_SEQUENCE] == "41"
    assert headers[HEADER_DL_DELIVERIES] == "2"
    assert headers["Original-Larkbot-Type"] == "MessageEvent"
    info = await bus.js.stream_info(
        STREAM_DEAD_LETTER, subjects_filter=dead_letter_subject("EVENTS", consumer)
    )
    assert info.state.subjects == {dead_letter_subject("EVENTS", consumer): 1}


async def test_a_platform_payload_has_no_sequence_and_one_too_large_is_kept_in_a_blob(bus: Bus) -> None:
    ingress = f"ingress-{secrets.token_hex(3)}"
    writer = DeadLetters(bus.js)
    small = b'{"update_id": 7}'
    large = b"x" * (bus.nc.max_payload + 10)
    await writer.write(DeadLetter("telegram", ingress, "malformed", "no message", small, key="update:7"))
    await writer.write(
        DeadLetter("telegram", ingress, "too_large", "max_payload", large, subject="im.message")
    )
    (first, h1), (second, h2) = await _records(bus, "telegram", ingress, 2)
    assert first == small
    assert h1[HEADER_MSG_ID] == f"dl:telegram:{ingress}:update:7"
    assert HEADER_DL_SEQUENCE not in h1
    assert HEADER_DL_BLOB not in h1
    assert second == b""
    blob = await (await bus.js.object_store(OBJECT_STORE_BLOBS)).get(h2[HEADER_DL_BLOB])
    assert blob.data == large


async def test_a_write_that_fails_raises_so_that_the_input_is_not_acknowledged(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    writer = DeadLetters(nc.jetstream(), timeout_s=1.0)
    await nc.close()
    with pytest.raises(DeadLetterFailed, match="not written"):
        await writer.write(DeadLetter("EVENTS", "pipeline", "undecodable", "not JSON", b"{", sequence=1))
