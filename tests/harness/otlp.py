"""A trace collector on loopback speaking OTLP/HTTP (protobuf, ``POST /v1/traces``), the way an
OpenTelemetry Collector or Tempo receives what the services export: every span, decoded, in memory."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from .web import serving


@dataclass(frozen=True, slots=True)
class Collected:
    service: str
    name: str
    trace_id: str
    span_id: str
    #: ``""`` for a root span.
    parent_id: str
    attributes: dict[str, object]
    links: tuple[str, ...]


def _value(value: AnyValue) -> object:
    field = value.WhichOneof("value")
    return getattr(value, field) if field else None


class Collector:
    def __init__(self) -> None:
        self.spans: list[Collected] = []

    async def receive(self, request: web.Request) -> web.Response:
        body = await request.read()
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        export = ExportTraceServiceRequest.FromString(body)
        for resource in export.resource_spans:
            names = [a.value.string_value for a in resource.resource.attributes if a.key == "service.name"]
            for scope in resource.scope_spans:
                for span in scope.spans:
                    self.spans.append(
                        Collected(
                            service=names[0] if names else "",
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            links=tuple(link.span_id.hex() for link in span.links),
                        )
                    )
        reply = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=reply, content_type="application/x-protobuf")

    def trace(self, trace_id: str) -> list[Collected]:
        return [s for s in self.spans if s.trace_id == trace_id]


@asynccontextmanager
async def collecting() -> AsyncIterator[tuple[Collector, str]]:
    """A collector and its base URL (what ``OTEL_EXPORTER_OTLP_ENDPOINT`` names)."""
    collector = Collector()
    app = web.Application()
    app.router.add_post("/v1/traces", collector.receive)
    async with serving(app) as url:
        yield collector, url
