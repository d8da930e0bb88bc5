"""Streaming pull from a JetStream pull consumer: a delivered message is handed over as soon as it arrives.

Why not nats-py's ``fetch(batch, timeout)``: every fetch of a subscription shares one reply inbox, so
the status that ends an *earlier* pull request (the server's ``408 Request Timeout``, when the client's
own timer fired first — a race that a busy event loop loses often) is read as the answer to the *current*
one. nats-py then sends a second, lingering pull request for the whole batch, and the server is left
holding a request the client no longer tracks. The next message is delivered against it, and the fetch
that receives it waits for the rest of the batch until that request expires: up to the whole fetch
timeout (measured: single messages delivered 100–750 ms late with a 1 s timeout, while the median was
1 ms; in the turn benchmark these were the p99 outliers).

Here each pull request has a reply subject of its own (``<inbox>.<n>``, one wildcard subscription), so a
status is always attributed to the request it ends and a stale one is ignored; and nothing waits for a
batch to fill: :meth:`PullStream.next_batch` returns whatever has arrived as soon as anything has.

At most one pull request is open at a time, for at most ``batch`` messages minus those received and not
yet taken, and a new one is sent only from :meth:`next_batch`: a caller that stops asking (back-pressure)
holds at most ``batch`` messages. A request expires after ``expires_s`` on the server; one whose end
never arrives (a server restart loses it) is given up ``expires_s`` later.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque
from dataclasses import dataclass

import nats
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext

from .bus import BusUnavailable

__all__ = ["DESCRIPTION", "RETRY_S", "STATUS", "ConsumerGone", "PullStream"]

log = logging.getLogger(__name__)

STATUS = "Status"
DESCRIPTION = "Description"
#: Pull requests that end without error: expired, or nothing to deliver.
_ENDED = frozenset({"408", "404"})
#: Idle heartbeat / flow control (never requested here, ignored if seen).
_CONTROL = "100"
#: After a pull request was refused for another reason, wait this long before asking again.
RETRY_S = 0.5


class ConsumerGone(BusUnavailable, nats.errors.Error):
    """The consumer does not exist (deleted under us, or never declared): no server answers its pulls.
    Retryable (declaring it again fixes it), and still a ``nats.errors.Error`` for code that retries
    NATS failures."""


@dataclass(slots=True)
class _Request:
    token: str
    remaining: int
    give_up_at: float


class PullStream:
    """The messages of one pull consumer, in delivery order, as they arrive."""

    def __init__(
        self,
        js: JetStreamContext,
        stream: str,
        consumer: str,
        *,
        batch: int,
        expires_s: float,
    ) -> None:
        if batch < 1:
            raise ValueError("batch must be at least 1")
        self._nc = js._nc
        self._next_subject = f"{js._prefix}.CONSUMER.MSG.NEXT.{stream}.{consumer}"
        self.stream = stream
        self.consumer = consumer
        self.batch = batch
        self.expires_s = expires_s
        self._inbox = ""
        self._sub: Subscription | None = None
        self._buffer: deque[Msg] = deque()
        self._open: _Request | None = None
        self._sent = 0
        self._not_before = 0.0
        self._failure: BaseException | None = None
        self._woken = False
        self._arrived = asyncio.Event()

    async def start(self) -> None:
        self._inbox = self._nc.new_inbox()
        self._sub = await self._nc.subscribe(f"{self._inbox}.*", cb=self._on_msg)

    async def close(self) -> None:
        """Unsubscribe. An open request is dropped by the server (nobody listens to its replies any more);
        whatever it had already sent is lost here, so a clean stop first drains it
        (``next_batch(request=False)`` until :attr:`pending` is false)."""
        sub, self._sub = self._sub, None
        if sub is not None:
            with contextlib.suppress(nats.errors.Error):
                await sub.unsubscribe()

    @property
    def pending(self) -> bool:
        """Messages may still arrive (a request is open) or wait to be taken."""
        return self._open is not None or bool(self._buffer)

    def wake(self) -> None:
        """Make a waiting :meth:`next_batch` return now (with what has arrived, possibly nothing)."""
        self._woken = True
        self._arrived.set()

    async def next_batch(self, timeout_s: float, *, request: bool = True) -> list[Msg]:
        """Up to ``batch`` messages, as soon as at least one has arrived; ``[]`` after ``timeout_s`` or on
        :meth:`wake`. With ``request=False`` no new pull request is sent (draining before a stop)."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self._failure is not None:
                failure, self._failure = self._failure, None
                raise failure
            now = time.monotonic()
            if self._open is not None and now >= self._open.give_up_at:
                log.warning("pull request on %s/%s got no answer; asking again", self.stream, self.consumer)
                self._open = None
            if request and self._open is None and now >= self._not_before:
                await self._request(now)
            if self._buffer:
                return self._take()
            if not request and self._open is None:
                return []  # draining, and nothing more can arrive
            if self._woken:
                self._woken = False
                return []
            remaining = deadline - now
            if remaining <= 0:
                return []
            if self._open is not None:
                remaining = min(remaining, self._open.give_up_at - now)
            elif request:
                remaining = min(remaining, self._not_before - now)
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, remaining)):
                    await self._arrived.wait()

    def _take(self) -> list[Msg]:
        n = min(self.batch, len(self._buffer))
        return [self._buffer.popleft() for _ in range(n)]

    async def _request(self, now: float) -> None:
        want = self.batch - len(self._buffer)
        if want <= 0 or self._sub is None:
            return
        self._sent += 1
        token = str(self._sent)
        expires_ns = max(1_000_000, int(self.expires_s * 1_000_000_000))
        # Its end (408) is due at expiry; one that never comes (a restarted server forgot the request) is
        # given up half a second later, and a late one is then ignored as stale.
        self._open = _Request(token, want, now + self.expires_s + 0.5)
        payload = json.dumps({"batch": want, "expires": expires_ns}).encode()
        await self._nc.publish(self._next_subject, payload, reply=f"{self._inbox}.{token}")

    async def _on_msg(self, msg: Msg) -> None:
        if msg.reply:  # a delivered message (its reply subject is the $JS.ACK… acknowledgement)
            self._buffer.append(msg)
            request = self._open
            if request is not None:
                request.remaining -= 1
                if request.remaining <= 0:
                    self._open = None
            self._arrived.set()
            return
        headers = msg.headers or {}
        status = headers.get(STATUS, "")
        if status == _CONTROL:
            return
        token = msg.subject.rsplit(".", 1)[-1]
        request = self._open
        if request is None or request.token != token:
            return  # the end of a request already given up (or fulfilled): stale
        self._open = None
        description = headers.get(DESCRIPTION, "")
        if status == "503" or (status == "409" and "deleted" in description.lower()):
            self._failure = ConsumerGone(f"consumer {self.stream}/{self.consumer}: {status} {description}")
        elif status not in _ENDED:
            log.warning(
                "pull request on %s/%s refused: %s %s", self.stream, self.consumer, status, description
            )
            self._not_before = time.monotonic() + RETRY_S
        self._arrived.set()
