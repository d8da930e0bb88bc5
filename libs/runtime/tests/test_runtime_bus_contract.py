"""The bus wrapper against a real JetStream server: dedup, ordered consume, redelivery, dead letters."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable

import pytest
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig
from pydantic import BaseModel

from larkbot.canonical.actions import ActionRequest, ActionResult, SendMessageAction
from larkbot.canonical.codec import decode, encode
from larkbot.canonical.context import SnapshotRequest
from larkbot.canonical.errors import PermanentError, RetryableError
from larkbot.canonical.events import TypingSignal
from larkbot.canonical.names import (
    HEADER_DL_REASON,
    HEADER_DL_SEQUENCE,
    HEADER_SCHEMA,
    STREAM_DEAD_LETTER,
    Platform,
    actions_subject,
    dead_letter_subject,
)
from larkbot.runtime.bus import (
    Bus,
    BusUnavailable,
    NoResponders,
    PayloadTooLarge,
    ServiceRefused,
    ServiceUnavailable,
    connect,
)
from larkbot.runtime.config import NatsSettings
from larkbot.runtime.consume import Delivery, ErrorPolicy, PullConsumer
from larkbot.runtime.deadletter import DeadLetters
from larkbot.runtime.ingress import actions_endpoint
from larkbot.runtime.pull import ConsumerGone
from larkbot.runtime.serve import Endpoint, model_decoder, service_error_reply

WAIT = 30.0


async def _stream(bus: Bus, *, ack_wait_s: float = 30.0) -> tuple[str, str, str]:
    tag = secrets.token_hex(4)
    stream, subject, durable = f"T{tag}", f"t{tag}.>", f"c{tag}"
    await bus.js.add_stream(StreamConfig(name=stream, subjects=[subject]))
    await bus.js.add_consumer(
        stream, ConsumerConfig(durable_name=durable, ack_policy=AckPolicy.EXPLICIT, ack_wait=ack_wait_s)
    )
    return stream, f"t{tag}", durable


def _signal(n: int) -> TypingSignal:
    return TypingSignal(platform="telegram", chat_id="-100123", user_id=str(n), at_ms=1_700_000_000_000 + n)


async def _run_until(consumer: PullConsumer, done: asyncio.Event) -> None:
    task = asyncio.create_task(consumer.run())
    try:
        await asyncio.wait_for(done.wait(), WAIT)
    finally:
        consumer.stop()
        await asyncio.wait_for(task, WAIT)


async def test_publish_with_msg_id_is_deduplicated(bus: Bus) -> None:
    stream, prefix, _ = await _stream(bus)
    first = await bus.publish(f"{prefix}.a", _signal(1), msg_id="feishu:om_1")
    again = await bus.publish(f"{prefix}.a", _signal(1), msg_id="feishu:om_1")
    other = await bus.publish(f"{prefix}.a", _signal(2), msg_id="feishu:om_2")
    assert not first.duplicate
    assert again.duplicate is True
    assert again.seq == first.seq
    assert other.seq == first.seq + 1
    info = await bus.js.stream_info(stream)
    assert info.state.messages == 2


async def test_pull_consumer_handles_in_order_and_acks(bus: Bus) -> None:
    stream, prefix, durable = await _stream(bus)
    for n in range(50):
        await bus.publish(f"{prefix}.chat", _signal(n))
    seen: list[str] = []
    done = asyncio.Event()

    async def handler(d: Delivery) -> None:
        assert d.headers[HEADER_SCHEMA] == "1"
        seen.append(TypingSignal.model_validate_json(d.data).user_id)
        if len(seen) == 50:
            done.set()

    await _run_until(PullConsumer(bus.js, stream, durable, handler, batch=7), done)
    assert seen == [str(n) for n in range(50)]
    info = await bus.js.consumer_info(stream, durable)
    assert info.num_ack_pending == 0
    assert info.num_pending == 0


async def test_unacked_message_is_redelivered_after_ack_wait(bus: Bus) -> None:
    stream, prefix, durable = await _stream(bus, ack_wait_s=1.0)
    await bus.publish(f"{prefix}.chat", _signal(7))
    sub = await bus.js.pull_subscribe_bind(durable, stream=stream)
    (first,) = await sub.fetch(1, timeout=WAIT)
    assert first.metadata.num_delivered == 1
    # Not acknowledged (a crashed worker): the server hands it out again once ack_wait has passed.
    (again,) = await sub.fetch(1, timeout=WAIT)
    assert again.metadata.num_delivered == 2
    assert again.metadata.sequence.stream == first.metadata.sequence.stream
    await again.ack()
    await sub.unsubscribe()


async def test_retryable_error_naks_and_the_message_comes_back(bus: Bus) -> None:
    stream, prefix, durable = await _stream(bus)
    await bus.publish(f"{prefix}.chat", _signal(1))
    attempts: list[int] = []
    done = asyncio.Event()

    async def handler(d: Delivery) -> None:
        attempts.append(d.num_delivered)
        if d.num_delivered < 3:
            raise RetryableError("database busy", delay_s=0.05)
        done.set()

    await _run_until(PullConsumer(bus.js, stream, durable, handler), done)
    assert attempts == [1, 2, 3]


async def _eventually(predicate: Callable[[], Awaitable[bool]], timeout_s: float = WAIT) -> None:
    """Wait for a condition the server reaches asynchronously (ack processing), with a deadline."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


class _Boom(Exception):
    pass


@pytest.mark.parametrize(
    ("bad_payload", "failure", "reason"),
    [
        (b"{not json", None, "undecodable"),
        (None, PermanentError("chat id refers to nothing"), "poison"),
        (None, _Boom("a bug in the handler"), "crashed"),
    ],
)
async def test_poison_message_is_terminated_into_the_dead_letter_stream(
    bus: Bus, bad_payload: bytes | None, failure: Exception | None, reason: str
) -> None:
    stream, prefix, durable = await _stream(bus)
    if bad_payload is not None:
        await bus.js.publish(f"{prefix}.bad", bad_payload, headers={HEADER_SCHEMA: "1"})
    else:
        await bus.publish(f"{prefix}.bad", _signal(3))
    await bus.publish(f"{prefix}.good", _signal(4))
    dl_subject = dead_letter_subject(stream, durable)
    watch = await bus.nc.subscribe(dl_subject)
    handled: list[str] = []
    attempts = 0
    good = asyncio.Event()

    async def handler(d: Delivery) -> None:
        nonlocal attempts
        decode(d.data, TypingSignal, d.headers)
        if d.subject.endswith(".bad"):
            attempts += 1
            assert failure is not None
            raise failure
        handled.append(d.subject)
        good.set()

    consumer = PullConsumer(
        bus.js,
        stream,
        durable,
        handler,
        policy=ErrorPolicy(DeadLetters(bus.js), max_crashes=2, base_delay_s=0.05),
    )
    task = asyncio.create_task(consumer.run())
    try:
        record = await watch.next_msg(timeout=WAIT)
        await asyncio.wait_for(good.wait(), WAIT)

        async def settled() -> bool:
            info = await bus.js.consumer_info(stream, durable)
            return info.num_ack_pending == 0 and info.num_pending == 0

        await _eventually(settled)
    finally:
        consumer.stop()
        await asyncio.wait_for(task, WAIT)
        await watch.unsubscribe()
    assert record.headers is not None
    assert record.headers[HEADER_DL_REASON] == reason
    assert record.headers[HEADER_DL_SEQUENCE] == "1"
    assert record.data == (bad_payload if bad_payload is not None else encode(_signal(3)))
    stored = await bus.js.get_last_msg(STREAM_DEAD_LETTER, dl_subject)
    assert stored.data == record.data
    assert handled == [f"{prefix}.good"]
    assert attempts == (2 if reason == "crashed" else (1 if reason == "poison" else 0))


async def test_trace_context_travels_in_headers(bus: Bus) -> None:
    from larkbot.canonical.names import HEADER_TRACE
    from larkbot.runtime.logs import current_trace, log_context, new_traceparent

    stream, prefix, durable = await _stream(bus)
    trace = new_traceparent()
    with log_context(trace=trace):
        await bus.publish(f"{prefix}.chat", _signal(1))
    seen: list[str | None] = []
    done = asyncio.Event()

    async def handler(d: Delivery) -> None:
        seen.append(d.headers.get(HEADER_TRACE))
        seen.append(current_trace())  # bound for everything the handler logs or publishes
        done.set()

    await _run_until(PullConsumer(bus.js, stream, durable, handler), done)
    assert seen == [trace, trace]


async def test_events_are_stored_under_their_partition(bus: Bus) -> None:
    from larkbot.canonical.names import STREAM_EVENTS, events_subject, partition_of, split_chat_subject

    chats = [("feishu", f"oc_{n:x}{n * 7919}") for n in range(20)] + [
        ("telegram", f"-100{n}") for n in range(20)
    ]
    for platform, chat in chats:
        await bus.publish(events_subject(platform, chat), _signal(1))
    partitions = set()
    for platform, chat in chats:
        stored = await bus.js.get_last_msg(STREAM_EVENTS, f"events.*.{platform}.{chat}")
        partition = int(stored.subject.split(".")[1])
        # The server's partition(N, 1, 2) and ours agree, so a service can tell which replica owns a chat.
        assert partition == partition_of(platform, chat)
        assert split_chat_subject(stored.subject) == (platform, chat)
        partitions.add(partition)
    assert len(partitions) > 8  # spread, not all in one


class _Blob(BaseModel):
    text: str


async def test_a_message_over_max_payload_is_refused_before_it_can_close_the_connection(bus: Bus) -> None:
    """nats-py checks the payload alone; a payload that fits only without its headers made the server
    close the connection ("Maximum Payload Violation"). The bus refuses it with a permanent error."""
    _stream_name, prefix, _ = await _stream(bus)
    limit = bus.nc.max_payload
    fits_alone = _Blob(text="x" * (limit - len(encode(_Blob(text=""))) - 16))
    assert len(encode(fits_alone)) < limit
    with pytest.raises(PayloadTooLarge, match="max_payload"):
        await bus.publish(f"{prefix}.big", fits_alone, msg_id="big-1")
    assert bus.connected
    ack = await bus.publish(f"{prefix}.small", _signal(1), timeout_s=WAIT)
    assert ack.seq == 1


async def test_a_request_nobody_answers_fails_as_no_responders(bus: Bus) -> None:
    subject = f"pipeline.replica.gone-{secrets.token_hex(3)}.snapshot"
    with pytest.raises(NoResponders) as info:
        await bus.request(subject, _signal(1), TypingSignal, timeout_s=WAIT)
    assert info.value.subject == subject
    assert isinstance(info.value, BusUnavailable)  # retryable, as every caller of the bus expects


async def test_a_service_error_reply_is_raised_as_the_error_it_is(bus: Bus) -> None:
    """An endpoint's ``ServiceError`` reaches the requester typed — code, retryable or not — never as a
    reply "declared as another type" than the one asked for."""
    subject = f"t{secrets.token_hex(4)}.lookup"

    async def handler(request: TypingSignal) -> TypingSignal:
        if request.user_id == "1":
            raise RetryableError("partition 3 is changing hands")
        raise PermanentError("that chat is gone")

    endpoint = Endpoint(bus, subject, "q", model_decoder(TypingSignal), handler, service_error_reply)
    await endpoint.start()
    try:
        with pytest.raises(ServiceUnavailable) as unavailable:
            await bus.request(subject, _signal(1), TypingSignal, timeout_s=WAIT)
        assert (unavailable.value.error.code, unavailable.value.error.retryable) == ("unavailable", True)
        assert "partition 3 is changing hands" in str(unavailable.value)
        with pytest.raises(ServiceRefused) as refused:
            await bus.request(subject, _signal(2), TypingSignal, timeout_s=WAIT)
        assert (refused.value.error.code, refused.value.error.retryable) == ("refused", False)
        # A request that does not fit the contract: refused as such (not retried).
        wrong = SnapshotRequest(platform=Platform.TELEGRAM, chat_id="-100123")
        with pytest.raises(ServiceRefused) as bad:
            await bus.request(subject, wrong, TypingSignal, timeout_s=WAIT)
        assert bad.value.error.code == "bad_request"
    finally:
        await endpoint.stop()


async def test_a_consumer_without_a_leader_for_a_while_is_asked_again_not_given_up(
    bus: Bus, caplog: pytest.LogCaptureFixture
) -> None:
    # On a cluster a replicated consumer answers 503 while its servers elect a leader; a consumer
    # deleted and declared again answers the same way meanwhile.
    stream, prefix, durable = await _stream(bus)
    got: list[str] = []
    done = asyncio.Event()

    async def handler(d: Delivery) -> None:
        got.append(TypingSignal.model_validate_json(d.data).user_id)
        done.set()

    consumer = PullConsumer(bus.js, stream, durable, handler, fetch_timeout_s=0.5)
    task = asyncio.create_task(consumer.run())
    try:
        await bus.js.delete_consumer(stream, durable)
        async with asyncio.timeout(WAIT):
            while not any("asking again in" in r.getMessage() for r in caplog.records):
                assert not task.done(), task.exception()
                await asyncio.sleep(0.05)
        await bus.js.add_consumer(stream, ConsumerConfig(durable_name=durable, ack_policy=AckPolicy.EXPLICIT))
        await bus.publish(f"{prefix}.chat", _signal(3))
        await asyncio.wait_for(done.wait(), WAIT)
        assert got == ["3"]
    finally:
        consumer.stop()
        await asyncio.wait_for(task, WAIT)


async def test_a_consumer_gone_for_longer_than_allowed_ends_the_loop(bus: Bus) -> None:
    stream, _prefix, durable = await _stream(bus)

    async def handler(d: Delivery) -> None:
        raise AssertionError("nothing to deliver")

    consumer = PullConsumer(bus.js, stream, durable, handler, fetch_timeout_s=0.5, unanswered_for_s=1.0)
    await bus.js.delete_consumer(stream, durable)
    with pytest.raises(ConsumerGone):
        await asyncio.wait_for(consumer.run(), WAIT)


async def test_an_action_handler_that_raises_is_answered_by_what_it_raised(bus: Bus) -> None:
    """A bad request is refused for good; a store that did not answer before anything was done is a
    retryable failure; anything else stopped part-way, perhaps after the platform acted: ``unknown``, so
    a send is never repeated on a guess (nor reported refused when it may be in the chat)."""
    platform = f"probe-{secrets.token_hex(3)}"

    async def handler(action: ActionRequest) -> ActionResult:
        if action.idempotency_key == "k-busy":
            raise BusUnavailable("the ledger did not answer")
        raise RuntimeError("crashed half-way")

    def send(key: str) -> SendMessageAction:
        return SendMessageAction(
            platform=Platform.TELEGRAM, idempotency_key=key, chat_id="-100123", text="hi"
        )

    endpoint = actions_endpoint(bus, platform, handler)
    await endpoint.start()
    try:
        subject = actions_subject(platform)
        busy = await bus.request(subject, send("k-busy"), ActionResult, timeout_s=WAIT)
        crashed = await bus.request(subject, send("k-crash"), ActionResult, timeout_s=WAIT)
        bad = decode(
            (await bus.nc.request(subject, b'{"kind":"send_message"}', timeout=WAIT)).data, ActionResult
        )
    finally:
        await endpoint.stop()
    assert busy.error is not None
    assert crashed.error is not None
    assert bad.error is not None
    assert (busy.outcome, busy.error.code, busy.error.retryable) == ("failed", "unavailable", True)
    assert (crashed.outcome, crashed.error.code, crashed.error.retryable) == ("unknown", "internal", False)
    assert (bad.outcome, bad.error.code, bad.error.retryable) == ("failed", "bad_request", False)


async def test_a_flushed_subscription_is_at_the_server_before_a_publish_from_another_connection(
    bus: Bus, nats_url: str
) -> None:
    # nats-py's own flush() can be answered before a SUB queued just ahead of it reached the server; a
    # message published right after from another connection then finds no subscriber and is gone. Over
    # 200 rounds that loses a few; Bus.flush() must lose none.
    other = await connect(NatsSettings(), "test-other", url=nats_url, give_up_after_s=30)
    tag = secrets.token_hex(4)
    try:
        for i in range(200):
            got = asyncio.Event()

            async def on_msg(_msg: Msg, got: asyncio.Event = got) -> None:
                got.set()

            sub = await bus.nc.subscribe(f"flush.{tag}.{i}", cb=on_msg)
            await bus.flush()
            await other.nc.publish(f"flush.{tag}.{i}", b"x")
            await other.flush()
            await asyncio.wait_for(got.wait(), WAIT)
            await sub.unsubscribe()
    finally:
        await other.close(drain_timeout_s=5)
