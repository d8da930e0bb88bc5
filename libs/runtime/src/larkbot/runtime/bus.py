"""The NATS connection: connect with backoff, publish with dedup ids, request/reply, drain.

Bounded connect, unbounded reconnect: nats-py either gives up on the first failure or retries the initial
connect forever inside ``connect()``. We make each initial attempt fail fast (``allow_reconnect=False``),
retry it here with exponential backoff (so start-up order of NATS and services does not matter), and
switch the live client to unlimited reconnects once it is connected.

A request fails in one of these typed ways, each carrying what a caller acts on::

    BusUnavailable (RetryableError)   NATS did not answer
    ├── NoResponders                  nobody subscribes to the subject (``subject``): the service, or the
    │                                 replica addressed, is not running
    ├── RequestTimedOut               a subscriber exists but no reply came within the timeout
    ├── StreamFull                    a publish the stream refused at its limit (discard ``new``)
    └── ServiceUnavailable            the service answered with a retryable ``ServiceError`` (``error``)
    ServiceRefused (PermanentError)   the service answered with a ``ServiceError`` that is not retryable

A reply declared (``Larkbot-Type``) as :class:`~larkbot.canonical.replies.ServiceError` is decoded as the
error it is, never as the model asked for: a caller learns the service's own reason, not that the reply
"is declared as another type".
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import PubAck
from pydantic import BaseModel, TypeAdapter

from larkbot.canonical.codec import decode, decode_as, encode, headers_for
from larkbot.canonical.errors import PermanentError, RetryableError
from larkbot.canonical.names import HEADER_MSG_ID, HEADER_TRACE, HEADER_TYPE
from larkbot.canonical.replies import ServiceError

from . import tracing
from .backoff import Backoff, Failure, forever
from .config import NatsSettings
from .logs import mask
from .retry import retrying

__all__ = [
    "Bus",
    "BusUnavailable",
    "NoResponders",
    "PayloadTooLarge",
    "RequestTimedOut",
    "ServiceRefused",
    "ServiceUnavailable",
    "StreamFull",
    "connect",
    "flush",
    "message_size",
    "raise_service_error",
    "server_address",
]

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


class BusUnavailable(RetryableError):
    """NATS did not answer (connect, publish or request timed out)."""


class NoResponders(BusUnavailable):
    """No subscriber on ``subject``: the service (or the replica addressed) is not running."""

    def __init__(self, subject: str) -> None:
        super().__init__(f"no service answers on {subject}")
        self.subject = subject


class RequestTimedOut(BusUnavailable):
    """A request on ``subject`` got no reply within its timeout."""

    def __init__(self, subject: str, timeout_s: float) -> None:
        super().__init__(f"request on {subject} timed out after {timeout_s:g} s")
        self.subject = subject


class ServiceUnavailable(BusUnavailable):
    """The service answered with a retryable :class:`ServiceError` (``error``; act on ``error.code``)."""

    def __init__(self, subject: str, error: ServiceError) -> None:
        super().__init__(f"{subject}: {error.code}: {error.message}")
        self.subject = subject
        self.error = error


class StreamFull(BusUnavailable):
    """The stream refused the message at its limit (``max_bytes`` / ``max_msgs`` with discard ``new``):
    the producer keeps its input and tries again once consumers have drained some (``subject``)."""

    def __init__(self, subject: str, description: str) -> None:
        super().__init__(f"publish to {subject} refused: {description}")
        self.subject = subject


#: JetStream's "maximum bytes / messages exceeded" (a stream at its limit with discard ``new``).
_STREAM_FULL_CODES = frozenset({10077, 10078})


class ServiceRefused(PermanentError):
    """The service answered with a :class:`ServiceError` that is not retryable (``error``)."""

    def __init__(self, subject: str, error: ServiceError) -> None:
        super().__init__(f"{subject}: {error.code}: {error.message}")
        self.subject = subject
        self.error = error


def raise_service_error(subject: str, msg: Msg) -> None:
    """Raise the service's error when the reply is a :class:`ServiceError`; return otherwise."""
    headers = dict(msg.headers or {})
    if headers.get(HEADER_TYPE) != ServiceError.__name__:
        return
    error = decode(msg.data, ServiceError, headers)
    raise (ServiceUnavailable if error.retryable else ServiceRefused)(subject, error)


class PayloadTooLarge(PermanentError):
    """The message (payload and headers) is larger than the server accepts (its ``max_payload``):
    publishing it can never succeed. Checked before sending: nats-py checks the payload alone, and a
    message the server refuses for its size closes the whole connection."""


def server_address(url: str) -> str:
    """``host:port`` of a server URL, for logs and metrics: never its user, password or token."""
    rest = url.partition("://")[2] or url
    return rest.rpartition("@")[2].split("/", 1)[0]


def message_size(data: bytes, headers: dict[str, str]) -> int:
    """Bytes a message counts against ``max_payload``: the payload plus the ``NATS/1.0`` header block."""
    if not headers:
        return len(data)
    block = 12 + sum(len(k.encode()) + len(v.encode()) + 4 for k, v in headers.items())
    return len(data) + block


async def flush(nc: Client) -> None:
    """Return once the server has read everything this client wrote so far, subscriptions included.

    ``Client.flush()`` alone does not promise that: nats-py 2.16 writes its PING straight to the socket,
    ahead of the commands still queued for its flusher task, so the PONG can come back before a SUB or PUB
    issued just before it reached the server (a subscriber then misses a message published right after).
    Pushing the queue out first puts the PING behind them.
    """
    push = getattr(nc, "_flush_pending", None)
    if push is not None and nc.is_connected:
        await push(force_flush=True)
    await nc.flush()


class Bus:
    """A connected NATS client with a JetStream context and typed helpers."""

    def __init__(self, nc: Client, name: str) -> None:
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream()
        self.name = name
        self.disconnected_since: float | None = None
        self.closing = False

    @property
    def connected(self) -> bool:
        return bool(self.nc.is_connected)

    @property
    def server(self) -> str:
        """The server this connection talks to now, ``host:port`` (never its credentials); ``""`` while
        disconnected."""
        url = self.nc.connected_url
        if url is None or not self.nc.is_connected:
            return ""
        return f"{url.hostname}:{url.port}" if url.port else str(url.hostname)

    async def flush(self) -> None:
        """Return once the server has read everything written so far (see :func:`flush`)."""
        await flush(self.nc)

    async def publish(
        self,
        subject: str,
        model: BaseModel,
        *,
        msg_id: str | None = None,
        headers: dict[str, str] | None = None,
        timeout_s: float = 5.0,
    ) -> PubAck:
        """Publish to a stream and wait for the PubAck (durably stored, or deduplicated by ``msg_id``)."""
        if tracing.enabled():
            with tracing.span(f"publish {_family(subject)}", kind="producer", attributes=_about(subject)):
                return await self._publish(subject, model, msg_id, headers, timeout_s)
        return await self._publish(subject, model, msg_id, headers, timeout_s)

    async def _publish(
        self,
        subject: str,
        model: BaseModel,
        msg_id: str | None,
        headers: dict[str, str] | None,
        timeout_s: float,
    ) -> PubAck:
        hdrs = headers_for(model, headers)
        _propagate_trace(hdrs)
        if msg_id is not None:
            hdrs[HEADER_MSG_ID] = msg_id
        data = encode(model)
        size = message_size(data, hdrs)
        if size > self.nc.max_payload:
            raise PayloadTooLarge(
                f"publish to {subject}: {size} bytes exceed the server's max_payload of {self.nc.max_payload}"
            )
        try:
            ack: PubAck = await self.js.publish(subject, data, timeout=timeout_s, headers=hdrs)
        except (
            nats.errors.TimeoutError,
            nats.errors.ConnectionClosedError,
            nats.js.errors.NoStreamResponseError,
        ) as exc:
            raise BusUnavailable(f"publish to {subject} failed: {type(exc).__name__}") from None
        except nats.js.errors.APIError as exc:
            if exc.err_code in _STREAM_FULL_CODES:
                raise StreamFull(subject, exc.description or "the stream is full") from None
            raise
        return ack

    async def publish_core(
        self, subject: str, model: BaseModel, headers: dict[str, str] | None = None
    ) -> None:
        """Fire-and-forget core publish (typing signals and other ephemeral data)."""
        hdrs = headers_for(model, headers)
        _propagate_trace(hdrs)
        await self.nc.publish(subject, encode(model), headers=hdrs)

    async def request(self, subject: str, model: BaseModel, reply: type[M], *, timeout_s: float) -> M:
        msg = await self._request(subject, model, timeout_s)
        raise_service_error(subject, msg)
        return decode(msg.data, reply, dict(msg.headers or {}))

    async def request_as(
        self, subject: str, model: BaseModel, adapter: TypeAdapter[T], *, timeout_s: float
    ) -> T:
        msg = await self._request(subject, model, timeout_s)
        raise_service_error(subject, msg)
        return decode_as(msg.data, adapter, dict(msg.headers or {}))

    async def _request(self, subject: str, model: BaseModel, timeout_s: float) -> Msg:
        if tracing.enabled():
            with tracing.span(f"request {_family(subject)}", kind="client", attributes=_about(subject)):
                return await self._request_once(subject, model, timeout_s)
        return await self._request_once(subject, model, timeout_s)

    async def _request_once(self, subject: str, model: BaseModel, timeout_s: float) -> Msg:
        try:
            hdrs = headers_for(model)
            _propagate_trace(hdrs)
            return await self.nc.request(subject, encode(model), timeout=timeout_s, headers=hdrs)
        except nats.errors.NoRespondersError:
            raise NoResponders(subject) from None
        except nats.errors.TimeoutError:
            raise RequestTimedOut(subject, timeout_s) from None

    async def close(self, drain_timeout_s: float = 10.0) -> None:
        if self.nc.is_closed:
            return
        self.closing = True
        try:
            await asyncio.wait_for(self.nc.drain(), timeout=drain_timeout_s)
        except (TimeoutError, nats.errors.Error) as exc:
            log.warning("drain did not finish cleanly: %s", type(exc).__name__)
        if not self.nc.is_closed:
            await self.nc.close()


def _connect_failure(exc: BaseException) -> Failure | None:
    return Failure.TRANSIENT if isinstance(exc, OSError | TimeoutError | nats.errors.Error) else None


def _propagate_trace(headers: dict[str, str]) -> None:
    """Carry the current trace context to whoever handles this message (DESIGN §6, :mod:`.tracing`)."""
    trace = tracing.traceparent()
    if trace is not None:
        headers.setdefault(HEADER_TRACE, trace)


def _family(subject: str) -> str:
    """A span name's part of a subject: its first two tokens (``events.feishu``, ``llm.generate``),
    never a chat id."""
    return ".".join(subject.split(".", 2)[:2])


def _about(subject: str) -> dict[str, tracing.Value]:
    return {"messaging.system": "nats", "messaging.destination.name": subject}


async def connect(
    settings: NatsSettings,
    name: str,
    *,
    url: str | None = None,
    give_up_after_s: float | None = None,
    on_state: Callable[[str], Awaitable[None]] | None = None,
) -> Bus:
    """Connect with exponential backoff (0.25 s doubling to ``max_reconnect_wait_s``, ±25 % jitter; the
    runtime's retry policy, :mod:`.retry`).

    ``give_up_after_s`` bounds the total wait (``None`` waits forever, the right choice for a service
    whose only job needs the bus). Reconnects after the first connection are unlimited.
    """
    bus_ref: list[Bus] = []
    state: dict[str, Any] = {}

    async def error_cb(exc: Exception) -> None:
        # nats-py reports every failed reconnect here; one line each, never a traceback storm.
        log.warning("nats: %s", mask(f"{type(exc).__name__}: {exc}"))

    async def disconnected_cb() -> None:
        if bus_ref and bus_ref[0].closing:
            return
        if bus_ref and bus_ref[0].disconnected_since is None:
            bus_ref[0].disconnected_since = time.monotonic()
        log.warning("nats: disconnected")
        if on_state:
            await on_state("disconnected")

    async def reconnected_cb() -> None:
        if bus_ref:
            bus_ref[0].disconnected_since = None
        log.info("nats: reconnected")
        if on_state:
            await on_state("reconnected")

    async def closed_cb() -> None:
        state["closed"] = True

    options: dict[str, Any] = {
        # A cluster's servers (nats-py tries each in turn and learns the others from the cluster's INFO).
        "servers": list(settings.server_urls(url)),
        "name": f"{settings.name_prefix}-{name}",
        "connect_timeout": settings.connect_timeout_s,
        "reconnect_time_wait": settings.reconnect_time_wait_s,
        "allow_reconnect": False,
        "max_reconnect_attempts": 1,
        "error_cb": error_cb,
        "disconnected_cb": disconnected_cb,
        "reconnected_cb": reconnected_cb,
        "closed_cb": closed_cb,
        "ping_interval": 10,
        "max_outstanding_pings": 3,
    }
    if settings.user:
        options["user"] = settings.user
    if settings.password:
        options["password"] = settings.password.get_secret_value()
    if settings.token:
        options["token"] = settings.token.get_secret_value()

    started = time.monotonic()
    attempts = 0

    def left_s() -> float:
        if give_up_after_s is None:
            return float("inf")
        return give_up_after_s - (time.monotonic() - started)

    def retried(_failure: Failure, attempt: int, wait: float, exc: BaseException | None) -> None:
        log.warning(
            "nats: connect attempt %d failed (%s); retrying in %.2f s", attempt, type(exc).__name__, wait
        )

    policy = forever(Backoff(0.25, max(0.25, settings.max_reconnect_wait_s), 2.0, 0.25))
    try:
        async for attempt in retrying(policy, _connect_failure, left_s=left_s, on_retry=retried):
            with attempt:
                attempts = attempt.retry_state.attempt_number
                nc = await nats.connect(**options)
    except (OSError, TimeoutError, nats.errors.Error):
        shown = ", ".join(server_address(server) for server in options["servers"])
        raise BusUnavailable(f"NATS at {shown} is unreachable after {attempts} attempts") from None
    # Connected: from now on nats-py reconnects by itself, forever.
    nc.options["allow_reconnect"] = True
    nc.options["max_reconnect_attempts"] = -1
    bus = Bus(nc, name)
    bus_ref.append(bus)
    return bus
