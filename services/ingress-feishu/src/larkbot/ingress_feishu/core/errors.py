"""Errors of the Feishu adapter, all inside the one LarkBot tree.

::

    ContractError (larkbot.canonical)
    └── FeishuPayloadError      a Feishu payload we cannot turn into canonical events; dead-lettered
        ├── MalformedPayload    not a schema-2.0 envelope, or a field is missing / of the wrong type
        └── UnknownEventType    a well-formed envelope of an event type we do not adapt
    PermanentError (larkbot.canonical)
    └── UnsupportedEmoji        an outbound reaction with no Feishu ``emoji_type``

``reason`` is a short stable token for metrics and dead-letter headers; the message names the field path,
never a field value (payloads carry user text).
"""

from __future__ import annotations

from larkbot.canonical.errors import ContractError, PermanentError


class FeishuPayloadError(ContractError):
    reason = "invalid"

    def __init__(self, message: str, *, event_type: str | None = None) -> None:
        super().__init__(message)
        self.event_type = event_type


class MalformedPayload(FeishuPayloadError):
    reason = "malformed"


class UnknownEventType(FeishuPayloadError):
    reason = "unknown_event_type"


class UnsupportedEmoji(PermanentError):
    """The emoji has no Feishu reaction type; ``code`` is the action-error token."""

    code = "unknown_emoji"
