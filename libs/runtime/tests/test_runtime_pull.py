"""Streaming pull against a real JetStream server: messages handed over as they arrive, stale request
ends ignored, at most one batch asked for, a missing consumer reported."""

from __future__ import annotations

import secrets
import time

import pytest
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig

from larkbot.runtime.bus import Bus
from larkbot.runtime.pull import ConsumerGone, PullStream

#: Long enough that a pull waiting for its batch (or for its request to expire) could not pass for prompt.
EXPIRES_S = 30.0
#: What "at once" means here, far below EXPIRES_S on however busy a machine.
PROMPT_S = 10.0


async def _consumer(bus: Bus) -> tuple[str, str, str]:
    tag = secrets.token_hex(4)
    stream, subject, durable = f"P{tag}", f"p{tag}", f"c{tag}"
    await bus.js.add_stream(StreamConfig(name=stream, subjects=[f"{subject}.>"]))
    await bus.js.add_consumer(stream, ConsumerConfig(durable_name=durable, ack_policy=AckPolicy.EXPLICIT))
    return stream, subject, durable


async def test_a_message_is_handed_over_without_waiting_for_the_batch(bus: Bus) -> None:
    stream, subject, durable = await _consumer(bus)
    pull = PullStream(bus.js, stream, durable, batch=500, expires_s=EXPIRES_S)
    await pull.start()
    try:
        assert await pull.next_batch(0) == []  # a request for 500 is now open, nothing stored
        await bus.js.publish(f"{subject}.a", b"one")
        started = time.monotonic()
        msgs = await pull.next_batch(EXPIRES_S)
        assert time.monotonic() - started < PROMPT_S
        assert [m.data for m in msgs] == [b"one"]
        assert pull.pending  # the request stays open for the other 499
    finally:
        await pull.close()


async def test_the_end_of_an_earlier_request_is_not_taken_for_the_current_one(bus: Bus) -> None:
    """nats-py's fetch read a late ``408`` of its previous request as the answer to the current one and
    left a lingering request behind, so the next message waited for that request to expire."""
    stream, subject, durable = await _consumer(bus)
    pull = PullStream(bus.js, stream, durable, batch=500, expires_s=EXPIRES_S)
    await pull.start()
    try:
        assert await pull.next_batch(0) == []
        inbox = pull._inbox
        stale = Msg(bus.nc, subject=f"{inbox}.0", reply="", data=b"", headers={"Status": "408"})
        await pull._on_msg(stale)
        assert pull.pending  # the open request is still the one being waited on
        await bus.js.publish(f"{subject}.a", b"after")
        started = time.monotonic()
        msgs = await pull.next_batch(EXPIRES_S)
        assert time.monotonic() - started < PROMPT_S
        assert [m.data for m in msgs] == [b"after"]
        assert pull._sent == 1  # no second request was sent
    finally:
        await pull.close()


async def test_at_most_one_batch_is_asked_for_and_order_is_kept(bus: Bus) -> None:
    stream, subject, durable = await _consumer(bus)
    for n in range(20):
        await bus.js.publish(f"{subject}.a", str(n).encode())
    pull = PullStream(bus.js, stream, durable, batch=5, expires_s=EXPIRES_S)
    await pull.start()
    try:
        received = await pull.next_batch(EXPIRES_S)
        # The caller has not asked again: the server delivered the one request of 5 and holds the rest.
        info = await bus.js.consumer_info(stream, durable)
        assert info.num_pending == 15
        assert info.num_ack_pending == 5
        while len(received) < 20:
            batch = await pull.next_batch(EXPIRES_S)
            assert 0 < len(batch) <= 5
            received += batch
        assert [int(m.data) for m in received] == list(range(20))
    finally:
        await pull.close()


async def test_draining_returns_once_nothing_more_can_arrive(bus: Bus) -> None:
    stream, subject, durable = await _consumer(bus)
    await bus.js.publish(f"{subject}.a", b"x")
    pull = PullStream(bus.js, stream, durable, batch=1, expires_s=EXPIRES_S)
    await pull.start()
    try:
        assert [m.data for m in await pull.next_batch(EXPIRES_S)] == [b"x"]
        assert not pull.pending  # the request for 1 was fulfilled
        started = time.monotonic()
        assert await pull.next_batch(EXPIRES_S, request=False) == []
        assert time.monotonic() - started < PROMPT_S
    finally:
        await pull.close()


async def test_a_deleted_or_missing_consumer_raises(bus: Bus) -> None:
    """The server drops a deleted consumer's open request without a word: it is given up after its
    expiry, and the next request finds no responder (as nats-py's fetch: one empty round, then raise)."""
    stream, _subject, durable = await _consumer(bus)
    pull = PullStream(bus.js, stream, durable, batch=10, expires_s=0.5)
    await pull.start()
    try:
        assert await pull.next_batch(0) == []
        await bus.js.delete_consumer(stream, durable)
        with pytest.raises(ConsumerGone):
            await pull.next_batch(EXPIRES_S)
    finally:
        await pull.close()
    missing = PullStream(bus.js, stream, "never-declared", batch=10, expires_s=EXPIRES_S)
    await missing.start()
    try:
        with pytest.raises(ConsumerGone):
            await missing.next_batch(EXPIRES_S)
    finally:
        await missing.close()
