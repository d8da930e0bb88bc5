"""ingress-feishu run in-process, as tests reach it: the wired components of a configured service, the
URL of its webhook."""

from __future__ import annotations

from larkbot.ingress_feishu.adapters.link import WebhookLink
from larkbot.ingress_feishu.app import FeishuIngress, IdleFeishu
from larkbot.runtime.service import Built


class NotConfigured(AssertionError):
    """The service under test is not the shape the test needs."""


def configured(service: Built[FeishuIngress | IdleFeishu]) -> FeishuIngress:
    """The components of a service started with a ``feishu`` section."""
    components = service.components
    if not isinstance(components, FeishuIngress):
        raise NotConfigured("ingress-feishu runs idle: the configuration has no feishu section")
    return components


def webhook_url(service: Built[FeishuIngress | IdleFeishu]) -> str:
    """The URL Feishu would post event callbacks to (the service runs in webhook mode)."""
    link = configured(service).link
    if not isinstance(link, WebhookLink):
        raise NotConfigured("ingress-feishu runs on the long connection, not the webhook")
    return f"http://127.0.0.1:{link.server.bound_port}{link.server.path}"
