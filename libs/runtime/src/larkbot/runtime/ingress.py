"""What both ingress services share: the ``actions.<platform>`` endpoint and the identity publication."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from larkbot.canonical.actions import ACTION_ADAPTER, ActionError, ActionRequest, ActionResult
from larkbot.canonical.codec import encode
from larkbot.canonical.events import BotIdentity
from larkbot.canonical.names import KV_IDENTITY, QUEUE_ACTIONS, actions_subject, identity_key

from .bus import Bus
from .serve import Endpoint, adapter_decoder


def failed(idempotency_key: str, code: str, message: str, *, retryable: bool = False) -> ActionResult:
    return ActionResult(
        idempotency_key=idempotency_key,
        ok=False,
        outcome="failed",
        error=ActionError(code=code, message=message, retryable=retryable),
    )


def action_error_reply(data: bytes, exc: BaseException) -> ActionResult:
    """Reply to an action request that could not be decoded or crashed the handler."""
    key = "unknown"
    try:
        found = json.loads(data).get("idempotency_key")
        if isinstance(found, str) and found:
            key = found
    except (ValueError, AttributeError):
        pass
    return failed(key, "bad_request", f"{type(exc).__name__}: {exc}"[:500])


def actions_endpoint(
    bus: Bus, platform: str, handler: Callable[[ActionRequest], Awaitable[ActionResult]]
) -> Endpoint[ActionRequest]:
    """The ``actions.<platform>`` request/reply endpoint (queue group: ingress replicas share it)."""
    return Endpoint(
        bus,
        actions_subject(platform),
        QUEUE_ACTIONS,
        adapter_decoder(ACTION_ADAPTER),
        handler,
        action_error_reply,
    )


async def publish_identity(bus: Bus, identity: BotIdentity) -> None:
    kv = await bus.js.key_value(KV_IDENTITY)
    await kv.put(identity_key(identity.platform.value), encode(identity))
