"""Provider error bodies as each provider spells them (pure): what the fake provider answers, so that the
gateway's classification (``core/errors.py``) meets the wire it meets in production.

``error_body``: an error status's body per format (Anthropic's typed ``error.type``, the OpenAI shape
for the other two). ``context_length_body``: each provider's "request too long" answer, worded as the
providers word it — the words the driver's window learning reads back (``errors.context_numbers``).
"""

from __future__ import annotations

from typing import Any, Literal, assert_never

from larkbot.canonical.llm import WireFormat

_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def error_body(fmt: WireFormat, status: int, message: str) -> dict[str, Any]:
    """An error body as each provider spells it (the fake provider sends these)."""
    match fmt:
        case "anthropic-messages":
            kind = _ANTHROPIC_TYPES.get(status, "api_error")
            return {"type": "error", "error": {"type": kind, "message": message}}
        case "openai-chat" | "responses":
            kind = (
                "rate_limit_exceeded"
                if status == 429
                else "server_error"
                if status >= 500
                else "invalid_request_error"
            )
            return {"error": {"message": message, "type": kind, "param": None, "code": None}}
        case _:
            assert_never(fmt)


ContextDialect = Literal["openai", "deepseek", "vllm", "tpm"]


def context_length_body(
    fmt: WireFormat, tokens: int, limit: int, dialect: ContextDialect = "openai"
) -> tuple[int, dict[str, Any]]:
    """Status and body of each provider's "request too long" answer, worded as the providers word it.

    openai-chat dialects: ``openai`` (400 ``context_length_exceeded``), ``deepseek`` (400, the code is
    only ``invalid_request_error``), ``vllm`` (400, vLLM's flat ``object: error`` body) and ``tpm`` (429,
    OpenAI's "Request too large … tokens per min"). anthropic-messages: 400 "prompt is too long";
    responses: 400 ``context_length_exceeded`` with ``param: input``.
    """
    match fmt:
        case "anthropic-messages":
            message = f"prompt is too long: {tokens} tokens > {limit} maximum"
            return 400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
        case "responses":
            message = (
                "Your input exceeds the context window of this model. Please adjust your input and try again."
            )
            return 400, _openai_error(message, "invalid_request_error", "input", "context_length_exceeded")
        case "openai-chat":
            return _openai_context_length(tokens, limit, dialect)
        case _:
            assert_never(fmt)


def _openai_context_length(tokens: int, limit: int, dialect: ContextDialect) -> tuple[int, dict[str, Any]]:
    requested = (
        f"This model's maximum context length is {limit} tokens. However, you requested {tokens} tokens "
        f"({tokens} in the messages, 0 in the completion). Please reduce the length of the messages or "
        "completion."
    )
    match dialect:
        case "tpm":
            message = (
                f"Request too large for fake-model in organization org-fake on tokens per min (TPM): "
                f"Limit {limit}, Requested {tokens}. The input or output tokens must be reduced in order to "
                "run successfully. Visit https://platform.openai.com/account/rate-limits to learn more."
            )
            return 429, _openai_error(message, "tokens", None, "rate_limit_exceeded")
        case "deepseek":
            return 400, _openai_error(requested, "invalid_request_error", None, "invalid_request_error")
        case "vllm":
            return 400, {
                "object": "error",
                "message": requested,
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        case "openai":
            message = (
                f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
                f"{tokens} tokens. Please reduce the length of the messages."
            )
            return 400, _openai_error(message, "invalid_request_error", "messages", "context_length_exceeded")
        case _:
            assert_never(dialect)


def _openai_error(message: str, kind: str, param: str | None, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}
