"""The platforms' connections (``feishu``, ``telegram``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ._base import Secret, _problems, _Section


class TelegramBudgets(_Section):
    """What the bot may spend on Telegram (docs/budgets.md). ``0``: unlimited."""

    #: Messages per minute in one group, across every ingress replica: Telegram's Bot API FAQ gives
    #: about 20 a minute per group, past which it answers 429 for a while.
    messages_per_minute: int = Field(default=20, ge=0)


class FeishuBudgets(_Section):
    """What the bot may spend on Feishu (docs/budgets.md). ``0``: unlimited, the default — a plan's
    OpenAPI quota is the operator's to know."""

    #: Messages per minute in one chat, across every ingress replica (Feishu paces at 5/s per chat).
    messages_per_minute: int = Field(default=0, ge=0)
    #: OpenAPI calls per UTC day and per UTC month, every call the ingress makes counted.
    api_calls_per_day: int = Field(default=0, ge=0)
    api_calls_per_month: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _day_within_month(self) -> FeishuBudgets:
        day, month = self.api_calls_per_day, self.api_calls_per_month
        if day and month and day > month:
            msg = f"a day's calls ({day}) cannot exceed the month's (api_calls_per_month: {month})"
            raise _problems("feishu budgets", [(("api_calls_per_day",), msg, day)])
        return self


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
    budgets: FeishuBudgets = FeishuBudgets()


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
    budgets: TelegramBudgets = TelegramBudgets()
