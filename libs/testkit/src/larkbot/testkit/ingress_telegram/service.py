"""ingress-telegram run in-process, as tests reach it: the link once it is up, the URL of its webhook."""

from __future__ import annotations

import asyncio

from larkbot.ingress_telegram.adapters.link import Receiving
from larkbot.ingress_telegram.adapters.webhook import WebhookReceiver
from larkbot.ingress_telegram.app import IdleTelegram, TelegramIngress
from larkbot.runtime.service import Built

from ..conditions import DEFAULT_TIMEOUT_S


class NotConfigured(AssertionError):
    """The service under test is not the shape the test needs."""


def configured(service: Built[TelegramIngress | IdleTelegram]) -> TelegramIngress:
    """The components of a service started with a ``telegram`` section."""
    components = service.components
    if not isinstance(components, TelegramIngress):
        raise NotConfigured("ingress-telegram runs idle: the configuration has no telegram section")
    return components


async def receiving(
    service: Built[TelegramIngress | IdleTelegram], timeout_s: float = DEFAULT_TIMEOUT_S
) -> Receiving:
    """The link's parts, once it is up (``getMe`` answered, receiving started)."""
    link = configured(service).link
    await asyncio.wait_for(link.ready.wait(), timeout_s)
    state = link.state
    if not isinstance(state, Receiving):
        raise NotConfigured("the link reported ready without receiving")
    return state


async def webhook_url(
    service: Built[TelegramIngress | IdleTelegram], timeout_s: float = DEFAULT_TIMEOUT_S
) -> str:
    """The URL Telegram would post updates to (the service runs in webhook mode), once the link is up."""
    receiver = (await receiving(service, timeout_s)).receiver
    if not isinstance(receiver, WebhookReceiver):
        raise NotConfigured("ingress-telegram long-polls; it has no webhook")
    return f"http://127.0.0.1:{receiver.bound_port}{receiver.path}"
