"""The exception tree of ingress-feishu, inside the one LarkBot tree (``larkbot.canonical.errors``).

Transient versus final is the type: a caller that may try again catches :class:`RetryableError`'s
branch, a final refusal is a :class:`PermanentError` or a :class:`ContractError`. Where each lives::

    ContractError (larkbot.canonical)
    └── FeishuPayloadError      a Feishu payload we cannot turn into canonical events; dead-lettered
        ├── MalformedPayload    not a schema-2.0 envelope, or a field is missing / of the wrong type
        └── UnknownEventType    a well-formed envelope of an event type we do not adapt
    RetryableError (larkbot.canonical)
    ├── adapters.rest.RateLimited          still rate limited; ``delay_s`` is Feishu's reset time
    ├── adapters.rest.PlatformTimeout      no answer: the request may have been executed
    ├── adapters.rest.PlatformUnavailable  the request never reached Feishu
    ├── adapters.rest.ApiTransient         an error answer worth repeating (5xx, rate-limit codes)
    └── runtime.deadletter.DeadLetterFailed  a dead-letter record not written (the event comes back)
    PermanentError (larkbot.canonical)
    ├── UnsupportedEmoji                   an outbound reaction with no Feishu ``emoji_type``
    ├── adapters.rest.ApiNotFound          the object is not there or not visible to this app
    ├── adapters.rest.ApiForbidden         the app lacks an ability or a scope
    ├── adapters.rest.ApiRefused           any other refusal of the request
    ├── adapters.inbound.EventRefused      an event that can never be published; dead-lettered
    └── adapters.actions.SendOutcomeUnknown  a send gave up after a lost answer: reported ``unknown``

``adapters.rest.FeishuApiError`` is the common base of the four ``Api*`` kinds (every error answer of
the OpenAPI, whatever it means); ``adapters.rest.api_error`` picks the kind (``core.apierrors``).

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
