"""Traces: OpenTelemetry spans across the bus, exported over OTLP/HTTP when the environment asks for it.

A turn is one trace: the ingress opens its root span when the platform's event arrives, and every
message carries the W3C ``traceparent`` of the span that sent it (``bus.publish``/``request`` inject
it). Each entry kind opens its span as a child of the header's span (:func:`handling`: the consumer
continues the producer's trace); a span that stands for several messages (a pipeline commit) links to
the others. Where work hands over inside a service (the driver's wake-up after its debounce) the
caller passes the trace on (:func:`span` with ``parent``).

Tracing is on when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set
and ``OTEL_SDK_DISABLED`` is not ``true``; the SDK reads the rest of the standard variables itself
(``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_*``, ``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_RESOURCE_ATTRIBUTES``).
Off, it is free: OpenTelemetry is not even imported, every span is one shared no-op context manager,
and a message passes on the ``traceparent`` it was handled under (logs still correlate by trace id).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Final, Literal

from larkbot.canonical.names import HEADER_TRACE

from .logs import current_trace, log_context, new_traceparent

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "MAX_LINKS",
    "NO_SPAN",
    "Kind",
    "Value",
    "enabled",
    "handling",
    "receiving",
    "record_span",
    "set_attributes",
    "setup_tracing",
    "shutdown_tracing",
    "span",
    "trace_of",
    "traceparent",
    "use_provider",
    "within",
]

log = logging.getLogger(__name__)

Kind = Literal["internal", "server", "client", "producer", "consumer"]
Value = str | bool | int | float
#: What every span is while tracing is off.
NO_SPAN: Final[AbstractContextManager[None]] = nullcontext()
#: Links a span keeps at most (a commit of hundreds of events links to the first of them).
MAX_LINKS: Final = 32

_tracer: Tracer | None = None
_provider: TracerProvider | None = None


def enabled() -> bool:
    return _tracer is not None


def setup_tracing(service: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Install the OTLP exporter when the environment names an endpoint; true when tracing is on."""
    wanted = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not wanted or environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # Resource.create merges OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME over these.
    attributes: dict[str, str] = {"service.name": f"larkbot-{service}", "service.namespace": "larkbot"}
    instance = environ.get("LARKBOT_REPLICA") or environ.get("HOSTNAME")
    if instance:
        attributes["service.instance.id"] = instance
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    use_provider(provider)
    # The endpoint only: the exporter's headers may hold a collector's credentials.
    log.info("tracing on: spans exported over OTLP/HTTP to %s", wanted.split("?")[0])
    return True


def use_provider(provider: TracerProvider | None) -> None:
    """Trace into ``provider`` from now on (``None``: tracing off). Tests install one with an in-memory
    exporter; :func:`setup_tracing` one that exports over OTLP."""
    global _tracer, _provider
    _provider = provider
    _tracer = provider.get_tracer("larkbot") if provider is not None else None


def shutdown_tracing(timeout_ms: int = 5000) -> None:
    """Export what is buffered (at exit; blocking, so outside the event loop)."""
    provider = _provider
    use_provider(None)
    if provider is not None:
        provider.force_flush(timeout_ms)
        provider.shutdown()


def trace_of(headers: Mapping[str, str] | None) -> str | None:
    return headers.get(HEADER_TRACE) if headers else None


def traceparent() -> str | None:
    """The ``traceparent`` to send with a message now: the current span's, else the one bound to the
    log context (the message being handled)."""
    if _tracer is not None:
        from opentelemetry import trace

        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            return _format(context.trace_id, context.span_id, context.trace_flags)
    return current_trace()


def span(
    name: str,
    *,
    kind: Kind = "internal",
    parent: str | None = None,
    root: bool = False,
    links: Iterable[str | None] = (),
    attributes: Mapping[str, Value] | None = None,
) -> AbstractContextManager[Any]:
    """A span around a block, made current inside it (its ``Span``, or ``None`` when tracing is off).

    ``parent``: a ``traceparent`` to continue (from a message, or one a caller kept); without it the
    current span is the parent, and ``root=True`` starts a new trace. An exception escaping the block
    is recorded on the span and marks it an error."""
    if _tracer is None:
        return NO_SPAN
    return _span(_tracer, name, kind, parent, root, links, attributes)


def receiving(name: str, attributes: Mapping[str, Value] | None = None) -> AbstractContextManager[Any]:
    """Where an outside event enters (an ingress receiving from the platform): the root span of a new
    trace. Off, a fresh ``traceparent`` is bound to the log context instead, so that what the event
    causes in every service still logs one trace id."""
    if _tracer is None:
        return log_context(trace=new_traceparent())
    return _span(_tracer, name, "consumer", None, True, (), attributes)


def handling(
    name: str, headers: Mapping[str, str] | None, kind: Kind, attributes: Mapping[str, Value] | None = None
) -> AbstractContextManager[Any]:
    """The span of an entry kind handling one message: a child of the span that sent it."""
    if _tracer is None:
        return NO_SPAN
    return _span(_tracer, name, kind, trace_of(headers), False, (), attributes)


def within(trace: str | None) -> AbstractContextManager[Any]:
    """Continue ``trace`` (a ``traceparent`` kept from a message) in a block that has no span of its own:
    what the block sends is that trace's. Off, it is bound to the log context."""
    if trace is None:
        return NO_SPAN
    if _tracer is None:
        return log_context(trace=trace)
    return _within(trace)


@contextmanager
def _within(trace: str) -> Iterator[None]:
    from opentelemetry import context
    from opentelemetry import trace as api

    found = _parse(trace)
    if found is None:
        yield
        return
    token = context.attach(api.set_span_in_context(api.NonRecordingSpan(found)))
    try:
        yield
    finally:
        context.detach(token)


def record_span(
    name: str,
    start_ns: int,
    end_ns: int,
    *,
    parent: str | None,
    links: Iterable[str | None] = (),
    attributes: Mapping[str, Value] | None = None,
) -> str | None:
    """A span of work already done (``time.time_ns()`` bounds), for work that served many traces at once
    (one commit of many chats' events). Returns its ``traceparent`` to pass on; ``parent`` when tracing
    is off."""
    if _tracer is None:
        return parent
    from opentelemetry import trace

    made = _tracer.start_span(
        name,
        context=_context(parent, root=False),
        kind=trace.SpanKind.INTERNAL,
        attributes=attributes,
        links=_links(links),
        start_time=start_ns,
    )
    made.end(end_time=end_ns)
    context = made.get_span_context()
    return _format(context.trace_id, context.span_id, context.trace_flags)


def set_attributes(current: Span | None, attributes: Mapping[str, Value]) -> None:
    """Attributes learnt during a span (tokens of a model call); nothing when tracing is off."""
    if current is not None:
        current.set_attributes(attributes)


@contextmanager
def _span(
    tracer: Tracer,
    name: str,
    kind: Kind,
    parent: str | None,
    root: bool,
    links: Iterable[str | None],
    attributes: Mapping[str, Value] | None,
) -> Iterator[Span]:
    from opentelemetry import trace

    with tracer.start_as_current_span(
        name,
        context=_context(parent, root=root),
        kind=trace.SpanKind[kind.upper()],
        attributes=attributes,
        links=_links(links),
    ) as current:
        yield current


def _context(parent: str | None, *, root: bool) -> Any:
    """The OpenTelemetry context to start a span in: ``parent``'s, a fresh one for a root, else the
    current one (``None``)."""
    from opentelemetry import trace
    from opentelemetry.context import Context

    if parent is not None:
        found = _parse(parent)
        if found is not None:
            return trace.set_span_in_context(trace.NonRecordingSpan(found), Context())
    return Context() if root else None


def _links(traces: Iterable[str | None]) -> list[Any]:
    from opentelemetry.trace import Link

    links: list[Any] = []
    for parent in traces:
        found = _parse(parent) if parent else None
        if found is not None:
            links.append(Link(found))
            if len(links) == MAX_LINKS:
                break
    return links


def _parse(header: str) -> Any:
    """The remote span context a ``traceparent`` names; ``None`` for one that is not W3C's (logged
    nowhere: a header is the sender's, and a bad one only starts a new trace)."""
    from opentelemetry.trace import SpanContext, TraceFlags

    parts = header.strip().split("-")
    if len(parts) < 4 or len(parts[0]) != 2 or parts[0] == "ff" or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3][:2], 16)
    except ValueError:
        return None
    if trace_id == 0 or span_id == 0:
        return None
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags & 1))


def _format(trace_id: int, span_id: int, flags: int) -> str:
    return f"00-{trace_id:032x}-{span_id:016x}-{int(flags) & 0xFF:02x}"
