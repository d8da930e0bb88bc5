"""The ephemeral subscription: core NATS messages nobody acknowledges (typing signals, media results).

Built through the middleware chain (:mod:`.chain`)::

    log context → trace → metrics → log-and-count policy → handler

A core message is fire-and-forget: there is nothing to acknowledge and nothing comes back, so the policy
(:class:`LogPolicy`, shared with :mod:`.watch`) only logs and counts:

============================  ==============================================================
handler outcome               what happens
============================  ==============================================================
returns                       counted ``ok``
``ContractError``             WARNING (the message does not decode), counted ``undecodable``
other ``LarkbotError``        WARNING, counted ``error``
any other exception           ERROR with its traceback, counted ``error``
============================  ==============================================================

The subscription keeps going in every case. A message is decoded by the subscription's ``decoder``
(schema version checked), so a handler receives the model.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import nats
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription as NatsSubscription

from larkbot.canonical.errors import ContractError, LarkbotError
from larkbot.canonical.names import HEADER_TRACE

from . import metrics, tracing
from .bus import Bus
from .chain import Envelope, Handler, build
from .logs import log_context, mask

__all__ = ["Message", "Subscription", "log_policy"]

log = logging.getLogger(__name__)

T = TypeVar("T")
E = TypeVar("E", bound=Envelope)


@dataclass(slots=True)
class Message:
    """One core message as a subscription's chain sees it."""

    subscription: str
    msg: Msg
    outcome: str = "ok"

    def context(self) -> AbstractContextManager[None]:
        return log_context(subject=self.msg.subject, trace=(self.msg.headers or {}).get(HEADER_TRACE))

    def span(self) -> AbstractContextManager[Any]:
        if not tracing.enabled():
            return tracing.NO_SPAN
        attributes = {"messaging.system": "nats", "messaging.destination.name": self.msg.subject}
        return tracing.handling(f"receive {self.subscription}", self.msg.headers, "consumer", attributes)

    def observe(self, seconds: float) -> None:
        del seconds  # a core message is counted, not timed
        metrics.SUBSCRIPTION_MESSAGES.labels(self.subscription, self.outcome).inc()


async def log_policy(handler: Handler[E], event: E) -> None:
    """Log and count: the outcome policy of the kinds with nothing to acknowledge."""
    try:
        await handler(event)
    except ContractError as exc:
        event.outcome = "undecodable"
        log.warning("ignored what does not decode: %s", mask(str(exc)))
    except LarkbotError as exc:
        event.outcome = "error"
        log.warning("handler failed: %s", mask(f"{type(exc).__name__}: {exc}"))
    except Exception:
        event.outcome = "error"
        log.exception("handler crashed")


class Subscription(Generic[T]):
    """Every message on ``subject`` (a wildcard is fine), decoded, to ``handler``, one at a time.

    ``queue``: share the messages among the members of a queue group (``""``: every instance gets all)."""

    def __init__(
        self,
        bus: Bus,
        subject: str,
        decoder: Callable[[bytes, dict[str, str]], T],
        handler: Callable[[T], Awaitable[None]],
        *,
        queue: str = "",
    ) -> None:
        self.bus = bus
        self.subject = subject
        self.queue = queue
        self.decoder = decoder
        self.handler = handler
        self.handle = build(self._deliver, log_policy)
        self._sub: NatsSubscription | None = None

    async def start(self) -> None:
        """Subscribe; returns once the server has registered the interest (a flush round trip)."""
        self._sub = await self.bus.nc.subscribe(self.subject, queue=self.queue, cb=self._on_msg)
        await self.bus.flush()

    async def stop(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None:
            with contextlib.suppress(nats.errors.Error):
                await sub.unsubscribe()

    async def _on_msg(self, msg: Msg) -> None:
        await self.handle(Message(self.subject, msg))

    async def _deliver(self, message: Message) -> None:
        msg = message.msg
        await self.handler(self.decoder(msg.data, dict(msg.headers or {})))
