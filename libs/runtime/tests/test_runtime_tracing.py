"""Traces across the bus, against a real JetStream server, into an in-memory exporter: a consumer's and an
endpoint's spans continue the sender's trace; off, nothing is traced and the header passes through."""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import sys
from collections.abc import Iterator

import pytest
from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from larkbot.canonical.events import TypingSignal
from larkbot.canonical.names import HEADER_TRACE
from larkbot.runtime import tracing
from larkbot.runtime.bus import Bus
from larkbot.runtime.consume import Delivery, PullConsumer
from larkbot.runtime.logs import log_context
from larkbot.runtime.serve import Endpoint, model_decoder, service_error_reply
from larkbot.runtime.subscribe import Subscription

WAIT = 30.0


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_provider(provider)
    try:
        yield exporter
    finally:
        tracing.use_provider(None)


def _signal(n: int) -> TypingSignal:
    return TypingSignal(platform="telegram", chat_id="-100123", user_id=str(n), at_ms=1_700_000_000_000 + n)


async def _stream(bus: Bus) -> tuple[str, str, str]:
    tag = secrets.token_hex(4)
    stream, durable = f"T{tag}", f"c{tag}"
    await bus.js.add_stream(StreamConfig(name=stream, subjects=[f"t{tag}.>"]))
    await bus.js.add_consumer(stream, ConsumerConfig(durable_name=durable, ack_policy=AckPolicy.EXPLICIT))
    return stream, f"t{tag}", durable


def _named(exporter: InMemorySpanExporter, prefix: str) -> ReadableSpan:
    (found,) = [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]
    return found


def _parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


async def test_a_consumer_continues_the_publishers_trace_and_passes_it_on(
    bus: Bus, spans: InMemorySpanExporter
) -> None:
    stream, prefix, durable = await _stream(bus)
    handled = asyncio.Event()
    seen: dict[str, str] = {}

    async def handler(delivery: Delivery) -> None:
        if delivery.subject.endswith(".chat"):
            seen["received"] = delivery.headers[HEADER_TRACE]
            await bus.publish(f"{prefix}.next", _signal(2))
        else:
            handled.set()

    with tracing.span("receive", kind="consumer", root=True):
        await bus.publish(f"{prefix}.chat", _signal(1))
    consumer = PullConsumer(bus.js, stream, durable, handler)
    task = asyncio.create_task(consumer.run())
    try:
        await asyncio.wait_for(handled.wait(), WAIT)
    finally:
        consumer.stop()
        await asyncio.wait_for(task, WAIT)

    root = _named(spans, "receive")
    first, second = _named(spans, f"publish {prefix}.chat"), _named(spans, f"publish {prefix}.next")
    (process,) = [
        s
        for s in spans.get_finished_spans()
        if s.name == f"process {stream}"
        and (s.attributes or {})["messaging.destination.name"] == f"{prefix}.chat"
    ]
    assert root.parent is None
    kinds = (first.kind, process.kind, second.kind)
    assert kinds == (SpanKind.PRODUCER, SpanKind.CONSUMER, SpanKind.PRODUCER)
    # One trace, each span the child of the one before: receive → publish → process → publish.
    assert {s.context.trace_id for s in (root, first, process, second)} == {root.context.trace_id}
    assert _parent_id(first) == root.context.span_id
    assert _parent_id(process) == first.context.span_id
    assert _parent_id(second) == process.context.span_id
    # The header named the publish span; the consumer's outcome is on its span.
    assert seen["received"].split("-")[2] == f"{first.context.span_id:016x}"
    assert process.attributes is not None
    assert process.attributes["larkbot.outcome"] == "ack"
    assert process.attributes["messaging.consumer.group.name"] == durable


async def test_an_endpoints_span_is_the_child_of_the_request_and_records_its_outcome(
    bus: Bus, spans: InMemorySpanExporter
) -> None:
    subject = f"svc.{secrets.token_hex(4)}"

    async def handler(signal: TypingSignal) -> TypingSignal:
        if signal.user_id == "bad":
            raise ValueError("cannot")
        return signal

    endpoint = Endpoint(bus, subject, "q", model_decoder(TypingSignal), handler, service_error_reply)
    await endpoint.start()
    try:
        with tracing.span("turn", root=True):
            await bus.request(subject, _signal(1), TypingSignal, timeout_s=WAIT)
    finally:
        await endpoint.stop()
    turn, request, serve = (_named(spans, name) for name in ("turn", "request svc.", "serve svc."))
    assert (request.kind, serve.kind) == (SpanKind.CLIENT, SpanKind.SERVER)
    assert _parent_id(request) == turn.context.span_id
    assert _parent_id(serve) == request.context.span_id
    assert serve.context.trace_id == turn.context.trace_id
    assert serve.attributes is not None
    assert serve.attributes["larkbot.outcome"] == "ok"


async def test_a_subscription_continues_the_trace_and_a_raising_block_marks_its_span(
    bus: Bus, spans: InMemorySpanExporter
) -> None:
    subject = f"typing.t{secrets.token_hex(4)}"
    got = asyncio.Event()

    async def handler(_signal: TypingSignal) -> None:
        got.set()

    sub = Subscription(bus, subject, lambda data, headers: TypingSignal.model_validate_json(data), handler)
    await sub.start()
    try:
        with tracing.span("typing", root=True) as typing:
            await bus.publish_core(subject, _signal(1))
        await asyncio.wait_for(got.wait(), WAIT)
    finally:
        await sub.stop()
    receive = _named(spans, "receive typing.")
    assert _parent_id(receive) == typing.get_span_context().span_id

    with pytest.raises(RuntimeError), tracing.span("failing"):
        raise RuntimeError("boom")
    assert _named(spans, "failing").status.status_code is StatusCode.ERROR


def test_a_span_of_work_done_links_the_traces_it_served(spans: InMemorySpanExporter) -> None:
    parent = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
    other = "00-" + "3" * 32 + "-" + "4" * 16 + "-01"
    passed = tracing.record_span("commit", 1_000, 2_000, parent=parent, links=[other, None, "garbage"])
    (commit,) = spans.get_finished_spans()
    assert commit.context.trace_id == int("1" * 32, 16)
    assert _parent_id(commit) == int("2" * 16, 16)
    assert [link.context.trace_id for link in commit.links] == [int("3" * 32, 16)]
    assert (commit.start_time, commit.end_time) == (1_000, 2_000)
    assert passed == f"00-{'1' * 32}-{commit.context.span_id:016x}-01"
    # A header that is not W3C's starts a new trace instead of failing the handler.
    with tracing.span("fresh", parent="not-a-traceparent"):
        pass
    assert _named(spans, "fresh").context.trace_id != int("1" * 32, 16)


async def test_off_nothing_is_traced_and_a_handler_passes_on_the_trace_it_received(bus: Bus) -> None:
    stream, prefix, durable = await _stream(bus)
    assert not tracing.enabled()
    received = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    assert tracing.span("anything") is tracing.NO_SPAN
    assert tracing.record_span("commit", 1, 2, parent=received) == received
    with log_context(trace=received):
        await bus.publish(f"{prefix}.chat", _signal(1))
    sub = await bus.js.pull_subscribe_bind(durable, stream=stream)
    (msg,) = await sub.fetch(1, timeout=WAIT)
    assert (msg.headers or {})[HEADER_TRACE] == received


def test_setup_turns_tracing_on_only_when_an_endpoint_is_named() -> None:
    assert not tracing.setup_tracing("pipeline", {})
    disabled = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}
    assert not tracing.setup_tracing("pipeline", disabled)
    assert not tracing.enabled()
    try:
        assert tracing.setup_tracing("pipeline", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
        assert tracing.enabled()
    finally:
        tracing.shutdown_tracing(timeout_ms=100)
    assert not tracing.enabled()


def test_off_a_service_does_not_even_import_opentelemetry() -> None:
    code = (
        "import sys; import larkbot.runtime.service, larkbot.runtime.consume, larkbot.runtime.serve; "
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"


async def test_a_block_within_a_kept_trace_sends_that_trace(bus: Bus, spans: InMemorySpanExporter) -> None:
    stream, prefix, durable = await _stream(bus)
    kept = "00-" + "5" * 32 + "-" + "6" * 16 + "-01"
    with tracing.within(kept):
        await bus.publish(f"{prefix}.job", _signal(1))
    publish = _named(spans, f"publish {prefix}.job")
    assert publish.context.trace_id == int("5" * 32, 16)
    assert _parent_id(publish) == int("6" * 16, 16)
    sub = await bus.js.pull_subscribe_bind(durable, stream=stream)
    (msg,) = await sub.fetch(1, timeout=WAIT)
    assert (msg.headers or {})[HEADER_TRACE] == f"00-{'5' * 32}-{publish.context.span_id:016x}-01"
    assert tracing.within(None) is tracing.NO_SPAN
