"""The exception tree of the LLM gateway, rooted in :mod:`larkbot.canonical.errors`.

None of these leaves the gateway: a call's failure is replied as an ``LLMError`` of its category, in one
place per kind of call (``Gateway.generate``, ``Transcriber.transcribe``); a request that does not decode
is replied ``invalid_request`` (``app.error_reply``). Whether a call's failure is tried again is its
TYPE; the wire's ``category`` is what the caller acts on (the contract)::

    LarkbotError
    ├── ContractError
    │   └── WireError             a body without the shape its wire format promises (a provider's reply;
    │                             a request the fake provider reads)
    ├── RetryableError
    │   └── TransportError        a provider call that produced no HTTP response (adapters.transport)
    │       ├── ProviderTimeout
    │       └── ProviderUnreachable
    ├── PermanentError
    │   ├── ImageUnavailable      an image key not in the object store, or not an image (adapters.images)
    │   └── AudioUnavailable      an audio key not in the object store, or too large (adapters.audio)
    └── CallFailed                one call's failure, with its wire ``category`` (:func:`call_failed`)
        ├── TransientFailure      ``transient`` — also a RetryableError: retried within the deadline
        │                         (``retry.llm_call``)
        └── FinalFailure          every other category — also a PermanentError: replied at once

The fake provider's refusal of a request (``fake.server``) is a ``ContractError`` of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, assert_never

from larkbot.canonical.errors import ContractError, LarkbotError, PermanentError, RetryableError
from larkbot.canonical.llm import LLMErrorCategory

if TYPE_CHECKING:
    from .core.errors import ErrorInfo


class WireError(ContractError):
    """A provider body that does not have the shape its wire format promises."""


class TransportError(RetryableError):
    """A provider call that produced no HTTP response."""


class ProviderTimeout(TransportError):
    pass


class ProviderUnreachable(TransportError):
    pass


class ImageUnavailable(PermanentError):
    """An image key that is not in the store or is not a readable image."""


class AudioUnavailable(PermanentError):
    """An audio key that is not in the store, or larger than a provider takes."""


class CallFailed(LarkbotError):
    """One ``llm.generate`` call's failure: its wire ``category``, the provider's ``status`` and
    ``retry_after`` when it answered, the error body's ``info``, and ``reason``, the label of the retry
    it causes (``status_503``, ``timeout``, ``connect``, ``response_failed``). Made by
    :func:`call_failed`, which picks the type from the category."""

    def __init__(
        self,
        category: LLMErrorCategory,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        info: ErrorInfo | None = None,
        reason: str | None = None,
    ) -> None:
        super().__init__(message)
        self.category: LLMErrorCategory = category
        self.status = status
        self.retry_after = retry_after
        self.info = info
        self.reason = reason or (f"status_{status}" if status is not None else "timeout")


class TransientFailure(CallFailed, RetryableError):
    pass


class FinalFailure(CallFailed, PermanentError):
    pass


def call_failed(
    category: LLMErrorCategory,
    message: str,
    *,
    status: int | None = None,
    retry_after: float | None = None,
    info: ErrorInfo | None = None,
    reason: str | None = None,
) -> CallFailed:
    """The failure of a call of this category, of the type that says whether it is tried again."""
    kind: type[CallFailed]
    match category:
        case "transient":
            kind = TransientFailure
        case "permanent" | "deadline" | "invalid_request" | "config" | "context_length":
            kind = FinalFailure
        case _:
            assert_never(category)
    return kind(category, message, status=status, retry_after=retry_after, info=info, reason=reason)
