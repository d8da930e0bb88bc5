"""Classifying provider failures (pure): what is worth retrying, how long to wait, what to tell the caller.

Transient: timeouts, connection errors, HTTP 408/409/425/429 and 5xx (SPEC §4.4) — retried within the
caller's deadline, then returned as ``transient`` so the driver's own retry schedule applies. 401/403/404
mean the endpoint is misconfigured (key, model, URL): ``config``. 400/413/422 reject this input:
``invalid_request``. Everything else is ``permanent``.

Provider error bodies are summarized, never forwarded whole, and every message is masked before it
leaves the gateway (the caller of :func:`provider_message` passes the masking function).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal

from larkbot.canonical.llm import WireFormat

Category = Literal["transient", "permanent", "deadline", "invalid_request", "config"]
TRANSIENT_STATUSES = frozenset({408, 409, 425, 429})
_MAX_MESSAGE = 300
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def classify_status(status: int) -> Category:
    if status in TRANSIENT_STATUSES or 500 <= status <= 599:
        return "transient"
    if status in (401, 403, 404):
        return "config"
    if status in (400, 413, 422):
        return "invalid_request"
    return "permanent"


def retry_after_s(headers: Mapping[str, str], now_s: float) -> float | None:
    """``retry-after-ms`` (OpenAI) or ``retry-after`` in seconds or as an HTTP date; never negative."""
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when: datetime = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now_s)


def provider_message(body: bytes) -> str:
    """The provider's own error text, or a short excerpt of the body."""
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        return body[:_MAX_MESSAGE].decode("utf-8", "replace").strip()
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])[:_MAX_MESSAGE]
        if isinstance(error, str):
            return error[:_MAX_MESSAGE]
        if isinstance(parsed.get("message"), str):
            return str(parsed["message"])[:_MAX_MESSAGE]
    return json.dumps(parsed)[:_MAX_MESSAGE]


def error_body(fmt: WireFormat, status: int, message: str) -> dict[str, Any]:
    """An error body as each provider spells it (the fake provider sends these)."""
    if fmt == "anthropic-messages":
        kind = _ANTHROPIC_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    kind = (
        "rate_limit_exceeded"
        if status == 429
        else "server_error"
        if status >= 500
        else "invalid_request_error"
    )
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retries of transient failures inside one ``llm.generate`` call.

    ``min_attempt_s``: an attempt with less time than this left is not worth starting; the transient
    error is returned instead and the caller's schedule (5 s, 20 s) takes over.
    """

    max_attempts: int = 4
    base_delay_s: float = 0.25
    max_delay_s: float = 8.0
    min_attempt_s: float = 0.5

    def next_delay(self, attempt: int, retry_after: float | None, remaining_s: float) -> float | None:
        """Seconds to wait before attempt ``attempt + 1``, or ``None`` to give up now."""
        if attempt >= self.max_attempts:
            return None
        delay = (
            retry_after
            if retry_after is not None
            else min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
        )
        if delay + self.min_attempt_s > remaining_s:
            return None
        return delay
