"""The acked pull consumer: a durable pull consumer (declared by the bootstrap) driven through the
middleware chain (:mod:`.chain`)::

    log context → trace → metrics → error policy → handler

The error policy is the one place where outcomes become JetStream acknowledgements:

============================  =====================================================================
handler outcome               acknowledgement
============================  =====================================================================
returns                       ``ack``
``RetryableError``            ``nak(delay)``, the delay doubling with each delivery (capped)
``ContractError``             dead-letter record, then ``term`` (undecodable: redelivery cannot help)
``PermanentError``            dead-letter record, then ``term`` (poison)
any other exception           logged with its traceback and ``nak(delay)``; after
                              ``max_crashes`` deliveries: dead-letter record, then ``term``
============================  =====================================================================

The dead-letter record (:mod:`.deadletter`) is published (and PubAck'ed) *before* the term, so a message
is never lost: if the record cannot be written the message is nak'ed and comes back.

A pull answered 503 (the consumer has no leader: its replicas are electing one after a server was lost,
or it was deleted) is asked again with backoff; only after ``unanswered_for_s`` without an answer does
:meth:`PullConsumer.run` end with :class:`~.pull.ConsumerGone`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import nats
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from larkbot.canonical.errors import ContractError, PermanentError, RetryableError
from larkbot.canonical.names import HEADER_TRACE

from . import metrics, tracing
from .backoff import Backoff
from .chain import build
from .deadletter import DeadLetter, DeadLetterFailed, DeadLetters, describe
from .logs import log_context, mask
from .pull import ConsumerGone, PullStream

__all__ = ["Delivery", "ErrorPolicy", "Handler", "Middleware", "PullConsumer"]

log = logging.getLogger(__name__)

#: Asking a consumer again while its replicas elect a leader: 0.25 s doubling to 2 s.
_ELECTION_BACKOFF = Backoff(0.25, 2.0, 2.0, 0.25)


@dataclass(slots=True)
class Delivery:
    """One delivered message with its JetStream metadata."""

    msg: Msg
    stream: str
    consumer: str
    subject: str
    data: bytes
    headers: dict[str, str]
    stream_seq: int
    num_delivered: int
    outcome: str = field(default="", init=False)

    def context(self) -> AbstractContextManager[None]:
        return log_context(
            subject=self.subject,
            stream_seq=self.stream_seq,
            consumer=self.consumer,
            trace=self.headers.get(HEADER_TRACE),
        )

    def span(self) -> AbstractContextManager[Any]:
        if not tracing.enabled():
            return tracing.NO_SPAN
        attributes: dict[str, tracing.Value] = {
            "messaging.system": "nats",
            "messaging.destination.name": self.subject,
            "messaging.consumer.group.name": self.consumer,
            "messaging.nats.stream_sequence": self.stream_seq,
            "messaging.nats.delivered": self.num_delivered,
        }
        return tracing.handling(f"process {self.stream}", self.headers, "consumer", attributes)

    def observe(self, seconds: float) -> None:
        metrics.HANDLE_SECONDS.labels(self.consumer).observe(seconds)
        metrics.MESSAGES.labels(self.consumer, self.outcome or "none").inc()

    @classmethod
    def of(cls, msg: Msg) -> Delivery:
        meta = msg.metadata
        return cls(
            msg=msg,
            stream=meta.stream,
            consumer=meta.consumer or "",
            subject=msg.subject,
            data=msg.data,
            headers=dict(msg.headers or {}),
            stream_seq=meta.sequence.stream,
            num_delivered=meta.num_delivered,
        )


Handler = Callable[[Delivery], Awaitable[None]]
Middleware = Callable[[Handler, Delivery], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ErrorPolicy:
    """Maps handler outcomes to acknowledgements (see the module docstring)."""

    dead_letters: DeadLetters
    max_crashes: int = 5
    base_delay_s: float = 0.5
    max_delay_s: float = 60.0

    def backoff(self, delivery: Delivery, first_delay_s: float) -> float:
        return float(min(self.max_delay_s, first_delay_s * 2 ** max(0, delivery.num_delivered - 1)))

    async def __call__(self, handler: Handler, delivery: Delivery) -> None:
        try:
            await handler(delivery)
        except RetryableError as exc:
            delay = self.backoff(delivery, exc.delay_s)
            log.warning("retryable failure, redelivering in %.2f s: %s", delay, mask(str(exc)))
            await self._nak(delivery, delay)
        except ContractError as exc:
            await self._dead_letter(delivery, "undecodable", exc)
        except PermanentError as exc:
            await self._dead_letter(delivery, "poison", exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if delivery.num_delivered >= self.max_crashes:
                log.exception("handler failed %d times; dead-lettering", delivery.num_delivered)
                await self._dead_letter(delivery, "crashed", exc)
            else:
                delay = self.backoff(delivery, self.base_delay_s)
                log.exception(
                    "handler failed (delivery %d); redelivering in %.2f s", delivery.num_delivered, delay
                )
                await self._nak(delivery, delay)
        else:
            await delivery.msg.ack()
            delivery.outcome = "ack"

    async def _nak(self, delivery: Delivery, delay_s: float) -> None:
        await delivery.msg.nak(delay=delay_s)
        delivery.outcome = "nak"

    async def _dead_letter(self, delivery: Delivery, reason: str, exc: BaseException) -> None:
        letter = DeadLetter(
            source=delivery.stream,
            consumer=delivery.consumer,
            reason=reason,
            error=describe(exc),
            data=delivery.data,
            subject=delivery.subject,
            sequence=delivery.stream_seq,
            deliveries=delivery.num_delivered,
            headers=delivery.headers,
        )
        try:
            await self.dead_letters.write(letter)
        except DeadLetterFailed as dl_exc:
            log.error("%s; message kept for redelivery", dl_exc)
            await self._nak(delivery, self.max_delay_s / 4)
            return
        await delivery.msg.term()
        delivery.outcome = "term"


class PullConsumer:
    """Fetches from a durable pull consumer declared by the bootstrap and handles messages in order."""

    def __init__(
        self,
        js: JetStreamContext,
        stream: str,
        durable: str,
        handler: Handler,
        *,
        batch: int = 100,
        fetch_timeout_s: float = 1.0,
        middlewares: Sequence[Middleware] | None = None,
        policy: ErrorPolicy | None = None,
        unanswered_for_s: float = 60.0,
    ) -> None:
        self.js = js
        self.stream = stream
        self.durable = durable
        self.batch = batch
        self.fetch_timeout_s = fetch_timeout_s
        #: How long pulls may go unanswered (503: the consumer has no leader — a cluster electing one, or
        #: a consumer deleted) before :meth:`run` gives up with :class:`ConsumerGone`.
        self.unanswered_for_s = unanswered_for_s
        self.policy = policy or ErrorPolicy(DeadLetters(js))
        self.handle = build(handler, self.policy, middlewares)
        self._stopping = asyncio.Event()
        self._pull: PullStream | None = None
        self.idle = asyncio.Event()

    def stop(self) -> None:
        """Stop asking for messages. Those already asked for are still handled and acknowledged (at most
        ``batch``, arriving within ``fetch_timeout_s``); then :meth:`run` returns."""
        self._stopping.set()
        if self._pull is not None:
            self._pull.wake()

    async def run(self) -> None:
        pull = PullStream(
            self.js, self.stream, self.durable, batch=self.batch, expires_s=self.fetch_timeout_s
        )
        self._pull = pull
        await pull.start()
        unanswered: list[float] = []  # when each pull since the last answered one was refused
        try:
            while True:
                stopping = self._stopping.is_set()
                if stopping and not pull.pending:
                    break
                try:
                    # Returns as soon as anything arrived (see larkbot.runtime.pull for why not nats-py's
                    # fetch); while stopping, only drains what was already asked for.
                    msgs = await pull.next_batch(self.fetch_timeout_s, request=not stopping)
                except (nats.errors.ConnectionClosedError, nats.errors.ConnectionDrainingError):
                    break
                except ConsumerGone as exc:
                    # A replicated consumer answers 503 while its servers elect a leader (seconds):
                    # ask again, backing off, for a bounded time.
                    unanswered.append(time.monotonic())
                    if stopping or unanswered[-1] - unanswered[0] > self.unanswered_for_s:
                        raise
                    wait = _ELECTION_BACKOFF.delay(len(unanswered), random.random())
                    log.warning("%s; asking again in %.2f s", exc, wait)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stopping.wait(), wait)
                    continue
                unanswered.clear()
                if not msgs:
                    self.idle.set()
                    continue
                self.idle.clear()
                for msg in msgs:
                    await self.handle(Delivery.of(msg))
        finally:
            # Unsubscribe before the connection drains, or drain waits for its full timeout.
            await pull.close()

    async def report_lag(self) -> None:
        info = await self.js.consumer_info(self.stream, self.durable)
        metrics.CONSUMER_PENDING.labels(self.durable).set(info.num_pending or 0)
        metrics.CONSUMER_ACK_PENDING.labels(self.durable).set(info.num_ack_pending or 0)
