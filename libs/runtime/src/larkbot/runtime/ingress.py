"""What both ingress services share: the ``actions.<platform>`` and ``fetch.<platform>`` endpoints, the
identity publication, :class:`OncePerKey` for actions whose repeat would misreport what happened, and
:func:`report_done` for the events that report what the bot did on the platform.

``fetch.<platform>`` runs the same handler as ``actions.<platform>``, for the read-only actions only
(``larkbot.canonical.actions.READ_ONLY_ACTIONS``): it is where the media workers ask for downloads and
custom emoji, because their NATS user may not publish on ``actions.>``. Any other action there is refused
while it is decoded (:class:`NotReadOnly`), so the handler never sees it: nothing is sent, nothing is
booked, and its idempotency key stays free for the caller that may use it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import random
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

import nats.errors

from larkbot.canonical.actions import (
    ACTION_ADAPTER,
    NOT_READ_ONLY,
    READ_ONLY_ACTIONS,
    ActionError,
    ActionRequest,
    ActionResult,
)
from larkbot.canonical.codec import decode_as, encode
from larkbot.canonical.errors import ContractError, RetryableError
from larkbot.canonical.events import BotIdentity
from larkbot.canonical.names import KV_IDENTITY, QUEUE_ACTIONS, actions_subject, fetch_subject, identity_key

from . import tracing
from .backoff import Backoff, Failure, RetryPolicy
from .bus import Bus, BusUnavailable
from .retry import retrying
from .serve import Endpoint, adapter_decoder

__all__ = [
    "REPORT_BUDGET_S",
    "REPORT_RETRY",
    "IngressEndpoints",
    "NotReadOnly",
    "OncePerKey",
    "action_error_reply",
    "actions_endpoint",
    "failed",
    "fetch_endpoint",
    "publish_identity",
    "report_done",
]

log = logging.getLogger(__name__)

#: An event reporting what the bot did (its sent message, a deletion) that the bus did not store is asked
#: again, 0.5 s doubling to 8 s, ±25 %, for :data:`REPORT_BUDGET_S` — longer than a cluster's election —
#: then it is lost (logged): what it reports has happened and is not undone.
REPORT_RETRY: Final = RetryPolicy(
    Backoff(initial_s=0.5, max_s=8.0, factor=2.0, jitter=0.25), max_attempts=None
)
REPORT_BUDGET_S: Final = 30.0


def failed(idempotency_key: str, code: str, message: str, *, retryable: bool = False) -> ActionResult:
    return ActionResult(
        idempotency_key=idempotency_key,
        ok=False,
        outcome="failed",
        error=ActionError(code=code, message=message, retryable=retryable),
    )


class OncePerKey:
    """Runs an action at most once at a time per idempotency key in this process, and answers a key
    that already completed (``done``) with that result as ``duplicate``. For actions whose repeat would
    report something else than what happened (a second deletion finds nothing to delete): a caller
    asking again after a lost answer, or while the first attempt still runs, gets the first attempt's
    report. The newest ``keep`` completed keys are remembered."""

    def __init__(self, keep: int = 1000) -> None:
        self.keep = keep
        self._done: OrderedDict[str, ActionResult] = OrderedDict()
        self._running: dict[str, asyncio.Task[ActionResult]] = {}

    async def run(self, key: str, work: Callable[[], Awaitable[ActionResult]]) -> ActionResult:
        previous = self._done.get(key)
        if previous is not None:
            return previous.model_copy(update={"outcome": "duplicate"})
        task = self._running.get(key)
        first = task is None
        if task is None:
            task = asyncio.ensure_future(work())
            self._running[key] = task
            task.add_done_callback(functools.partial(self._finished, key))
        # Shielded: a caller that gives up does not stop what already acts on the platform.
        result = await asyncio.shield(task)
        if first or result.outcome != "done":
            return result
        return result.model_copy(update={"outcome": "duplicate"})

    def _finished(self, key: str, task: asyncio.Task[ActionResult]) -> None:
        self._running.pop(key, None)
        if task.cancelled() or task.exception() is not None:
            return
        result = task.result()
        if result.outcome == "done":
            self._done[key] = result
            while len(self._done) > self.keep:
                self._done.popitem(last=False)


class NotReadOnly(ContractError):
    """An action that is not read-only, asked on ``fetch.<platform>``: refused, never run."""

    def __init__(self, kind: str, subject: str) -> None:
        super().__init__(f"{kind} is not a read-only action: {subject} serves only downloads and lookups")


def action_error_reply(data: bytes, exc: BaseException) -> ActionResult:
    """Reply to an action request that could not be decoded or that the handler raised on.

    - an action that is not read-only on ``fetch.<platform>``: ``failed``, ``not_read_only``;
    - a request outside the contract: ``failed``, ``bad_request`` (asking again cannot help);
    - a retryable error (the handler could not start it now: a store or the bus did not answer):
      ``failed``, ``unavailable``, retryable — handlers raise one only before they act;
    - anything else: the handler stopped part-way, perhaps after the platform acted, so the outcome is
      ``unknown`` (``internal``): a send is never repeated on a guess."""
    key = "unknown"
    try:
        found = json.loads(data).get("idempotency_key")
        if isinstance(found, str) and found:
            key = found
    except (ValueError, AttributeError):
        pass
    message = f"{type(exc).__name__}: {exc}"[:500]
    if isinstance(exc, NotReadOnly):
        return failed(key, NOT_READ_ONLY, str(exc))
    if isinstance(exc, ContractError):
        return failed(key, "bad_request", message)
    if isinstance(exc, RetryableError):
        return failed(key, "unavailable", message, retryable=True)
    error = ActionError(code="internal", message=message, retryable=False)
    return ActionResult(idempotency_key=key, ok=False, outcome="unknown", error=error)


def _traced(
    platform: str, handler: Callable[[ActionRequest], Awaitable[ActionResult]]
) -> Callable[[ActionRequest], Awaitable[ActionResult]]:
    """``handler`` with each action a span (``<platform> <kind>``: the call to the platform)."""

    async def act(request: ActionRequest) -> ActionResult:
        if not tracing.enabled():
            return await handler(request)
        with tracing.span(f"{platform} {request.kind}", kind="client") as span:
            result = await handler(request)
            tracing.set_attributes(span, {"larkbot.outcome": result.outcome})
            return result

    return act


def actions_endpoint(
    bus: Bus, platform: str, handler: Callable[[ActionRequest], Awaitable[ActionResult]]
) -> Endpoint[ActionRequest]:
    """The ``actions.<platform>`` request/reply endpoint (queue group: ingress replicas share it); each
    action is a span (``<platform> <kind>``: the call to the platform)."""
    return Endpoint(
        bus,
        actions_subject(platform),
        QUEUE_ACTIONS,
        adapter_decoder(ACTION_ADAPTER),
        _traced(platform, handler),
        action_error_reply,
    )


def fetch_endpoint(
    bus: Bus, platform: str, handler: Callable[[ActionRequest], Awaitable[ActionResult]]
) -> Endpoint[ActionRequest]:
    """The ``fetch.<platform>`` endpoint: ``handler`` (the one behind ``actions.<platform>``) for the
    read-only actions, in the same queue group and with the same spans; any other action is answered
    ``failed`` / ``not_read_only`` without reaching it (the module docstring)."""
    subject = fetch_subject(platform)

    def read_only(data: bytes, headers: dict[str, str]) -> ActionRequest:
        action = decode_as(data, ACTION_ADAPTER, headers)
        if not isinstance(action, READ_ONLY_ACTIONS):
            raise NotReadOnly(action.kind, subject)
        return action

    return Endpoint(bus, subject, QUEUE_ACTIONS, read_only, _traced(platform, handler), action_error_reply)


@dataclass(frozen=True, slots=True)
class IngressEndpoints:
    """What an ingress serves: ``actions.<platform>`` and ``fetch.<platform>``, one handler behind both."""

    actions: Endpoint[ActionRequest]
    fetch: Endpoint[ActionRequest]

    @classmethod
    async def serve(
        cls, bus: Bus, platform: str, handler: Callable[[ActionRequest], Awaitable[ActionResult]]
    ) -> IngressEndpoints:
        endpoints = cls(actions_endpoint(bus, platform, handler), fetch_endpoint(bus, platform, handler))
        await endpoints.actions.start()
        await endpoints.fetch.start()
        return endpoints

    async def stop(self) -> None:
        """Stop taking requests on both and finish the ones in flight."""
        await asyncio.gather(self.actions.stop(), self.fetch.stop())


async def publish_identity(bus: Bus, identity: BotIdentity) -> None:
    kv = await bus.js.key_value(KV_IDENTITY)
    await kv.put(identity_key(identity.platform.value), encode(identity))


def _bus_failure(exc: BaseException) -> Failure | None:
    return Failure.TRANSIENT if isinstance(exc, BusUnavailable | nats.errors.Error | TimeoutError) else None


async def report_done(
    publish: Callable[[], Awaitable[object]],
    what: str,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    jitter: Callable[[], float] = random.random,
) -> bool:
    """Publish an event that reports what the bot did on the platform (``publish``: one attempt, under a
    message id the stream deduplicates), asked again while the bus does not answer (:data:`REPORT_RETRY`).
    False when it was lost (logged at ERROR): the action it reports stays done all the same — an answer
    of "failed" would be a lie, and its repeat would do it twice."""
    started = clock()

    def retried(_failure: Failure, attempts: int, wait: float, exc: BaseException | None) -> None:
        log.warning("%s not stored (attempt %d), retrying in %.2f s: %s", what, attempts, wait, exc)

    try:
        async for attempt in retrying(
            REPORT_RETRY,
            _bus_failure,
            left_s=lambda: REPORT_BUDGET_S - (clock() - started),
            on_retry=retried,
            sleep=sleep,
            jitter=jitter,
        ):
            with attempt:
                await publish()
    except (BusUnavailable, nats.errors.Error, TimeoutError) as exc:
        log.error("%s lost after %g s of retries: %s", what, REPORT_BUDGET_S, exc)
        return False
    return True
