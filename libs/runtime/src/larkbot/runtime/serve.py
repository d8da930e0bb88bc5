"""Request/reply endpoints on core NATS with queue groups (replicas share the load), built through the
middleware chain (:mod:`.chain`): log context → trace → metrics → reply policy → handler.

Each endpoint decodes its request model, runs the handler and replies with a model. Every request gets a
reply: a request that does not decode, or a handler that raises, is answered by the endpoint's
``error_reply`` (each endpoint has its own typed error shape, e.g. ``ActionResult`` or ``LLMError``; the
others answer a :class:`~larkbot.canonical.replies.ServiceError`, :func:`service_error_reply`), so a
caller never waits for a timeout to learn that its request was bad.

Logging: a bad request or a failed handler is logged at WARNING each time. A retryable failure (the
service cannot answer *now*, e.g. a partition changing hands) is logged at DEBUG only: the caller receives
it typed and retries, and whatever raised it logs its cause once — a restart must not turn every retried
request into a warning.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import nats
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from pydantic import BaseModel, TypeAdapter

from larkbot.canonical.codec import decode, decode_as, encode, headers_for
from larkbot.canonical.errors import ContractError, LarkbotError, RetryableError
from larkbot.canonical.names import HEADER_TRACE
from larkbot.canonical.replies import ServiceError

from . import metrics, tracing
from .bus import Bus, ServiceRefused, ServiceUnavailable
from .chain import Handler, build
from .logs import log_context, mask

__all__ = ["Endpoint", "ReplyPolicy", "Request", "adapter_decoder", "model_decoder", "service_error_reply"]

log = logging.getLogger(__name__)

Req = TypeVar("Req")
M = TypeVar("M", bound=BaseModel)


def service_error_reply(_data: bytes, exc: BaseException) -> ServiceError:
    """The ``error_reply`` of an endpoint without an error shape of its own. A :class:`ServiceError` a
    handler received while forwarding the request is relayed as it came."""
    if isinstance(exc, ServiceUnavailable | ServiceRefused):
        return exc.error
    message = f"{type(exc).__name__}: {exc}"[:500]
    if isinstance(exc, ContractError):
        return ServiceError(code="bad_request", message=message, retryable=False)
    if isinstance(exc, RetryableError):
        return ServiceError(code="unavailable", message=message, retryable=True)
    if isinstance(exc, LarkbotError):
        return ServiceError(code="refused", message=message, retryable=False)
    # An unexpected failure (logged with its traceback here): the same request may well succeed later.
    return ServiceError(code="internal", message=message, retryable=True)


def model_decoder(model: type[M]) -> Callable[[bytes, dict[str, str]], M]:
    """A decoder for one request model (schema version checked)."""
    return lambda data, headers: decode(data, model, headers)


def adapter_decoder(adapter: TypeAdapter[Req]) -> Callable[[bytes, dict[str, str]], Req]:
    """A decoder for a discriminated union of request models (schema version checked)."""
    return lambda data, headers: decode_as(data, adapter, headers)


@dataclass(slots=True)
class Request:
    """One request as an endpoint's chain sees it; the policy sets ``reply`` and ``outcome``."""

    endpoint: str
    msg: Msg
    reply: BaseModel | None = None
    outcome: str = "ok"

    def context(self) -> AbstractContextManager[None]:
        return log_context(endpoint=self.endpoint, trace=(self.msg.headers or {}).get(HEADER_TRACE))

    def span(self) -> AbstractContextManager[Any]:
        if not tracing.enabled():
            return tracing.NO_SPAN
        attributes = {"messaging.system": "nats", "messaging.destination.name": self.msg.subject}
        return tracing.handling(f"serve {self.endpoint}", self.msg.headers, "server", attributes)

    def observe(self, seconds: float) -> None:
        metrics.REQUESTS.labels(self.endpoint, self.outcome).inc()
        metrics.REQUEST_SECONDS.labels(self.endpoint).observe(seconds)


@dataclass(frozen=True, slots=True)
class ReplyPolicy:
    """The one place where a handler's outcome becomes the reply: its model, or ``error_reply`` of what it
    raised (logged as the module docstring says). Then the reply is sent."""

    bus: Bus
    error_reply: Callable[[bytes, BaseException], BaseModel]

    async def __call__(self, handler: Handler[Request], request: Request) -> None:
        data = request.msg.data
        try:
            await handler(request)
        except ContractError as exc:
            request.outcome = "bad_request"
            log.warning("rejected request: %s", mask(str(exc)))
            request.reply = self.error_reply(data, exc)
        except RetryableError as exc:
            request.outcome = "retryable"
            log.debug("request not answered now: %s", mask(f"{type(exc).__name__}: {exc}"))
            request.reply = self.error_reply(data, exc)
        except LarkbotError as exc:
            request.outcome = "error"
            log.warning("request failed: %s", mask(f"{type(exc).__name__}: {exc}"))
            request.reply = self.error_reply(data, exc)
        except Exception as exc:
            request.outcome = "error"
            log.exception("request handler crashed")
            request.reply = self.error_reply(data, exc)
        reply, to = request.reply, request.msg.reply
        if reply is None or not to:
            return
        try:
            await self.bus.nc.publish(to, encode(reply), headers=headers_for(reply))
        except nats.errors.Error as exc:
            log.warning("reply could not be sent: %s", type(exc).__name__)


class Endpoint(Generic[Req]):
    """A request/reply service on ``subject`` (queue group ``queue``; ``""``: every instance answers)."""

    def __init__(
        self,
        bus: Bus,
        subject: str,
        queue: str,
        decoder: Callable[[bytes, dict[str, str]], Req],
        handler: Callable[[Req], Awaitable[BaseModel]],
        error_reply: Callable[[bytes, BaseException], BaseModel],
        *,
        max_concurrency: int = 64,
    ) -> None:
        self.bus = bus
        self.subject = subject
        self.queue = queue
        self.decoder = decoder
        self.handler = handler
        self.error_reply = error_reply
        self.handle = build(self._answer, ReplyPolicy(bus, error_reply))
        self._limit = asyncio.Semaphore(max_concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._sub: Subscription | None = None

    async def start(self) -> None:
        self._sub = await self.bus.nc.subscribe(self.subject, queue=self.queue, cb=self._on_msg)
        # A flush round-trip makes the server register the interest before we report started: without
        # it a request sent right after start-up (from another connection) can find no responders.
        await self.bus.flush()

    async def stop(self) -> None:
        """Stop taking requests and finish the ones in flight."""
        if self._sub is not None:
            with contextlib.suppress(nats.errors.Error):
                await self._sub.unsubscribe()
            self._sub = None
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _on_msg(self, msg: Msg) -> None:
        task = asyncio.create_task(self._serve(msg))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, msg: Msg) -> None:
        async with self._limit:
            await self.handle(Request(self.subject, msg))

    async def _answer(self, request: Request) -> None:
        msg = request.msg
        request.reply = await self.handler(self.decoder(msg.data, dict(msg.headers or {})))
