"""The middleware chain every entry kind is built through, the aiogram way.

One middleware signature, ``async (handler, event) -> None``, composed in one fixed order::

    log context → trace → metrics → outcome policy → handler

- *log context* puts the event's correlation fields (subject, sequence, trace, …) on every log line the
  handler writes;
- *trace* opens the event's span (:mod:`.tracing`), a child of the one that sent it; free while tracing
  is off;
- *metrics* times the handler and counts the event by the outcome the policy recorded;
- the *outcome policy* is the one place, per kind, where what the handler did (returned, or raised one
  of the canonical errors, or anything else) becomes what the kind does with its input: ack / nak /
  term + dead letter (pull consumer), a restart from the offsets (partition reader), a reply (endpoint),
  a log line and a count (subscription, KV watch).

An event is an :class:`Envelope`: it knows its log context and its metrics, and carries the ``outcome``
its policy sets. :func:`build` assembles a kind's chain; ``middlewares`` (rarely needed) replaces the
first three links, never the policy.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from functools import partial
from typing import Any, Protocol, TypeVar

from . import tracing

__all__ = [
    "Envelope",
    "Handler",
    "Middleware",
    "build",
    "chain",
    "log_context_middleware",
    "metrics_middleware",
    "trace_middleware",
]


class Envelope(Protocol):
    """What the shared middlewares need of an event."""

    outcome: str

    def context(self) -> AbstractContextManager[None]:
        """The log context of the event (``logs.log_context`` with its correlation fields)."""
        ...

    def span(self) -> AbstractContextManager[Any]:
        """The span of handling the event (``tracing.handling``; ``tracing.NO_SPAN`` for a kind whose
        events are not traced one by one)."""
        ...

    def observe(self, seconds: float) -> None:
        """Record the handling time and the outcome in the kind's metrics."""
        ...


E = TypeVar("E", bound=Envelope)

Handler = Callable[[E], Awaitable[None]]
Middleware = Callable[[Handler[E], E], Awaitable[None]]


def chain(handler: Handler[E], middlewares: Sequence[Middleware[E]]) -> Handler[E]:
    """Compose so that ``middlewares[0]`` is outermost."""
    wrapped = handler
    for middleware in reversed(middlewares):
        wrapped = partial(middleware, wrapped)
    return wrapped


async def log_context_middleware(handler: Handler[E], event: E) -> None:
    with event.context():
        await handler(event)


async def trace_middleware(handler: Handler[E], event: E) -> None:
    with event.span() as span:
        try:
            await handler(event)
        finally:
            if span is not None:
                # What the policy made of the handler's outcome (ack, nak, a reply's error…).
                span.set_attribute("larkbot.outcome", event.outcome or "none")


async def metrics_middleware(handler: Handler[E], event: E) -> None:
    started = time.perf_counter()
    try:
        await handler(event)
    finally:
        event.observe(time.perf_counter() - started)


def build(
    handler: Handler[E], policy: Middleware[E], middlewares: Sequence[Middleware[E]] | None = None
) -> Handler[E]:
    """``handler`` wrapped in ``middlewares`` (default: log context → trace → metrics) and then
    ``policy``. The trace link is left out while tracing is off (decided once, here: a service sets
    tracing up before it builds its ways in)."""
    if middlewares is not None:
        stack = list(middlewares)
    elif tracing.enabled():
        stack = [log_context_middleware, trace_middleware, metrics_middleware]
    else:
        stack = [log_context_middleware, metrics_middleware]
    return chain(handler, [*stack, policy])
