"""Classifying provider failures (pure): by what the provider said, then by status; how long to wait.

Order of decision (:func:`classify`):

1. Meaning, whatever the status. ``context_length``: the request is too long for the model — OpenAI's
   and Groq's ``context_length_exceeded``, "maximum context length" (OpenAI, DeepSeek, vLLM, OpenRouter),
   Anthropic's "prompt is too long" and "exceed context limit", the Responses API's "exceeds the context
   window", xAI's "maximum prompt length", Gemini's "exceeds the maximum number of tokens", Ollama's
   "exceeds the context length", a 429/413 "Request too large … tokens per min" (the request alone is
   over the TPM limit, waiting never helps) and HTTP 413. ``config``: no quota or credit
   (``insufficient_quota``, billing errors, HTTP 402, Anthropic's "credit balance is too low") and a model
   the endpoint does not have (``model_not_found`` — HTTP 400 on the Responses API —, DeepSeek's "Model
   Not Exist").
2. ``x-should-retry`` (OpenAI, Anthropic): ``true`` makes any failure transient; ``false`` makes a
   transient status permanent.
3. Status: 408/409/425/429 and 5xx are ``transient``; 401/403/404 ``config``; 400/422 ``invalid_request``;
   anything else ``permanent``.

Waiting (:func:`retry_after_s`): ``retry-after-ms``, then ``retry-after`` (seconds or an HTTP date), then
on a 429 the reset time of the exhausted limits — Anthropic's ``anthropic-ratelimit-*-reset`` (RFC 3339)
and OpenAI's ``x-ratelimit-reset-*`` (durations like ``6m0s``) whose ``*-remaining`` is 0; the latest
of them, since all must have reset.

The numbers of a ``context_length`` refusal (:func:`context_numbers`): the window and the input's size in
the model's tokens, where the provider's wording states them (OpenAI, DeepSeek, vLLM, Anthropic, Gemini,
the TPM refusal); the driver learns the model's real window from them.

Provider error bodies are summarized, never forwarded whole, and every message is masked before it
leaves the gateway (the caller of :func:`provider_message` passes the masking function).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

from larkbot.canonical.llm import LLMErrorCategory
from larkbot.runtime.backoff import Failure

from ..errors import CallFailed, TransientFailure

#: The wire's error categories (``LLMError.category``).
Category = LLMErrorCategory
TRANSIENT_STATUSES = frozenset({408, 409, 425, 429})
_MAX_MESSAGE = 300
_CONTEXT_CODES = frozenset({"context_length_exceeded"})
_CONTEXT_PHRASES = (
    "maximum context length",
    "context length exceeded",
    "exceeds the context length",
    "exceeds the context window",
    "exceed context limit",
    "prompt is too long",
    "maximum prompt length",
    "exceeds the maximum number of tokens",
)
_TOO_LARGE = re.compile(r"request too large.*tokens per min", re.IGNORECASE | re.DOTALL)
_QUOTA_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached", "billing_not_active"})
_QUOTA_PHRASES = ("exceeded your current quota", "credit balance is too low", "insufficient balance")
_MODEL_CODES = frozenset({"model_not_found"})
_MODEL_PHRASES = ("model not exist", "model_not_found")
_ANTHROPIC_LIMITS = ("requests", "tokens", "input-tokens", "output-tokens")
_OPENAI_LIMITS = ("requests", "tokens")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


#: The window a refusal states, as providers word it (the first that matches): OpenAI, DeepSeek, vLLM,
#: OpenRouter ("maximum context length is 131072 tokens"), xAI ("maximum prompt length is 131072"),
#: Anthropic ("… tokens > 200000 maximum", "exceed context limit: 199759 + 8192 > 200000"), Gemini
#: ("maximum number of tokens allowed (1048576)"), the TPM refusals ("Limit 30000, Requested 31538").
_WINDOW_PATTERNS = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"maximum (?:context|prompt) length is (\d+)",
        r"> (\d+) maximum",
        r"exceed context limit: \d+ \+ \d+ > (\d+)",
        r"maximum number of tokens allowed \((\d+)\)",
        r"tokens per min(?:ute)? \(TPM\): Limit (\d+)",
    )
)
#: The input's size a refusal states, most specific first ("requested N" may include the completion).
_INPUT_PATTERNS = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\((\d+) in the messages",
        r"\((\d+) of text input",
        r"resulted in (\d+) tokens",
        r"prompt is too long: (\d+) tokens",
        r"exceed context limit: (\d+) \+",
        r"request contains (\d+) tokens",
        r"input token count \((\d+)\)",
        r"Requested (\d+)",
        r"requested (?:about )?(\d+) tokens",
    )
)


def context_numbers(message: str) -> tuple[int | None, int | None]:
    """``(window, input)``: the model's limit and its count of the refused input that a ``context_length``
    refusal states, in the model's tokens (``None`` where it states nothing: the Responses API, Ollama)."""

    def first(patterns: tuple[re.Pattern[str], ...]) -> int | None:
        for pattern in patterns:
            match = pattern.search(message)
            if match is not None and int(match.group(1)) > 0:
                return int(match.group(1))
        return None

    return first(_WINDOW_PATTERNS), first(_INPUT_PATTERNS)


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """The parts of an error body that carry meaning, whatever the dialect spelled them as."""

    message: str = ""
    code: str = ""
    type: str = ""
    param: str = ""

    def text(self) -> str:
        return f"{self.message} {self.code} {self.type} {self.param}".lower()


def error_info(body: bytes) -> ErrorInfo:
    """Read OpenAI's ``{"error": {...}}``, Anthropic's ``{"type": "error", "error": {...}}``, vLLM's flat
    ``{"object": "error", "message": ...}``, Gemini's list-wrapped ``[{"error": {...}}]``, xAI's and
    Ollama's ``{"error": "<text>"}``; anything else becomes a short excerpt of the body."""
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        return ErrorInfo(message=body[:_MAX_MESSAGE].decode("utf-8", "replace").strip())
    if isinstance(parsed, list) and parsed and isinstance(parsed[0], dict):
        parsed = parsed[0]
    if not isinstance(parsed, dict):
        return ErrorInfo(message=json.dumps(parsed)[:_MAX_MESSAGE])
    error = parsed.get("error")
    if isinstance(error, dict):
        return ErrorInfo(
            message=_text(error.get("message")),
            code=_text(error.get("code")) or _text(error.get("status")),
            type=_text(error.get("type")),
            param=_text(error.get("param")),
        )
    if isinstance(error, str):
        return ErrorInfo(message=error[:_MAX_MESSAGE], code=_text(parsed.get("code")))
    if isinstance(parsed.get("message"), str):
        return ErrorInfo(
            message=_text(parsed.get("message")),
            code=_text(parsed.get("code")),
            type=_text(parsed.get("type")),
            param=_text(parsed.get("param")),
        )
    return ErrorInfo(message=json.dumps(parsed)[:_MAX_MESSAGE])


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value[:_MAX_MESSAGE]
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return ""


def provider_message(body: bytes) -> str:
    """The provider's own error text, or a short excerpt of the body."""
    return error_info(body).message[:_MAX_MESSAGE]


def classify_status(status: int) -> Category:
    if status in TRANSIENT_STATUSES or 500 <= status <= 599:
        return "transient"
    if status in (401, 402, 403, 404):
        return "config"
    if status == 413:
        return "context_length"
    if status in (400, 422):
        return "invalid_request"
    return "permanent"


def classify_meaning(status: int, info: ErrorInfo) -> Category | None:
    """What the body says, when it says something the status does not (``None`` otherwise)."""
    text = info.text()
    if info.code.lower() in _CONTEXT_CODES or any(p in text for p in _CONTEXT_PHRASES):
        return "context_length"
    if _TOO_LARGE.search(info.message):
        return "context_length"
    if info.code.lower() in _QUOTA_CODES or info.type.lower() in _QUOTA_CODES:
        return "config"
    if any(p in text for p in _QUOTA_PHRASES):
        return "config"
    if info.code.lower() in _MODEL_CODES or any(p in text for p in _MODEL_PHRASES):
        return "config"
    if status == 400 and info.param == "model" and "does not exist" in text:
        return "config"
    return None


def classify(status: int, info: ErrorInfo, headers: Mapping[str, str]) -> Category:
    meaning = classify_meaning(status, info)
    if meaning is not None:
        return meaning
    by_status = classify_status(status)
    should_retry = {k.lower(): v for k, v in headers.items()}.get("x-should-retry", "").strip().lower()
    if should_retry == "true":
        return "transient"
    if should_retry == "false" and by_status == "transient":
        return "permanent"
    return by_status


def retry_after_s(headers: Mapping[str, str], now_s: float, status: int | None = None) -> float | None:
    """How long the provider asks to wait, never negative; ``None`` when it does not say."""
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if raw is not None:
        try:
            return max(0.0, float(raw))
        except ValueError:
            pass
        when = _http_date(raw)
        if when is not None:
            return max(0.0, when.timestamp() - now_s)
    if status == 429:
        return _rate_limit_reset(lowered, now_s)
    return None


def _http_date(raw: str) -> datetime | None:
    try:
        return parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None


def _rate_limit_reset(headers: Mapping[str, str], now_s: float) -> float | None:
    waits: list[float] = []
    for limit in _ANTHROPIC_LIMITS:
        if headers.get(f"anthropic-ratelimit-{limit}-remaining", "").strip() != "0":
            continue
        reset = headers.get(f"anthropic-ratelimit-{limit}-reset")
        if reset is None:
            continue
        try:
            waits.append(datetime.fromisoformat(reset.strip().replace("Z", "+00:00")).timestamp() - now_s)
        except ValueError:
            continue
    for limit in _OPENAI_LIMITS:
        if headers.get(f"x-ratelimit-remaining-{limit}", "").strip() != "0":
            continue
        seconds = _duration_s(headers.get(f"x-ratelimit-reset-{limit}", ""))
        if seconds is not None:
            waits.append(seconds)
    return max(0.0, max(waits)) if waits else None


def _duration_s(text: str) -> float | None:
    """OpenAI's reset durations: ``1s``, ``20ms``, ``6m0s``, ``1h2m3.5s``."""
    text = text.strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _DURATION_UNITS[u] for n, u in parts)


def retry_kind(failure: CallFailed) -> Failure | None:
    """How the one retry policy (``retry.llm_call``) sees a failed attempt: a transient failure (its
    type) that says when to come back is a rate limit (that wait is taken as it is), one that does not
    is backed off; a final one is raised as it is (``None``)."""
    if not isinstance(failure, TransientFailure):
        return None
    return Failure.RATE_LIMITED if failure.retry_after is not None else Failure.TRANSIENT


def retry_window_s(remaining_s: float, min_attempt_s: float) -> float:
    """The time a retry may start in: the request's remaining time less the shortest attempt worth
    starting (with less left, the transient error is returned and the caller's schedule takes over)."""
    return remaining_s - min_attempt_s
