"""The platforms' connections (``feishu``, ``telegram``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ._base import Secret, _Section


class FeishuSettings(_Section):
    app_id: str
    app_secret: Secret
    domain: str = "https://open.feishu.cn"
    mode: Literal["long_connection", "webhook"] = "long_connection"
    verification_token: Secret | None = None
    encrypt_key: Secret | None = None
    #: Webhook receiver (mode ``webhook``): its own listener, apart from the operations port.
    webhook_host: str = "0.0.0.0"
    webhook_port: int = Field(default=9111, ge=0, le=65535)
    webhook_path: str = "/feishu/events"
    name_ttl_s: float = Field(default=6 * 3600.0, gt=0)
    #: Must stay well under Feishu's 3 s: the event frame is acknowledged only after the PubAck.
    ack_timeout_s: float = Field(default=2.5, gt=0, lt=3)
    api_timeout_s: float = Field(default=10.0, gt=0)
    #: At most this many attempts of one send (same uuid); its deadline (the turn's) normally ends it first.
    send_attempts: int = Field(default=8, ge=1)
    #: Restart the long connection after it has been down this long (the SDK can die silently).
    reconnect_watchdog_s: float = Field(default=60.0, gt=0)


class TelegramSettings(_Section):
    bot_token: Secret
    api_base: str = "https://api.telegram.org"
    mode: Literal["polling", "webhook"] = "polling"
    webhook_secret: Secret | None = None
    #: Webhook receiver (mode ``webhook``): its own listener, apart from the operations port;
    #: ``webhook_url`` (public HTTPS URL) is registered with ``setWebhook`` when set.
    webhook_host: str = "0.0.0.0"
    webhook_port: int = Field(default=8443, ge=0, le=65535)
    webhook_url: str | None = None
    polling_timeout_s: int = Field(default=25, ge=1, le=50)
