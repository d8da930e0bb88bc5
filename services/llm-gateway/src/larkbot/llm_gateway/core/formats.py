"""The three wire formats behind one table: path, headers, the four codec directions, and the two hooks a
reply may need before decoding — a failure reported in a 2xx body (``failed``) and a paused turn that
continues with another call (``continuation`` / ``merge``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, assert_never

from larkbot.canonical.llm import AssistantMessage, LLMRequest, Message, StopReason, Usage, WireFormat

from ..errors import CallFailed
from . import anthropic, openai_chat, responses
from .common import BlobKeyOf, Decoded, EncodeOptions, ParsedRequest
from .usage import OpenAIUsageStyle


@dataclass(frozen=True, slots=True)
class Codec:
    format: WireFormat
    path: str
    encode_request: Callable[[LLMRequest, tuple[Message, ...], EncodeOptions], dict[str, Any]]
    decode_response: Callable[[dict[str, Any], str], Decoded]
    encode_response: Callable[..., dict[str, Any]]
    decode_request: Callable[[dict[str, Any], BlobKeyOf, str], ParsedRequest]
    supports_prompt_cache_key: bool
    failed: Callable[[dict[str, Any]], CallFailed | None] = lambda _reply: None
    continuation: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any] | None] = lambda _w, _r: None
    merge: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] = lambda _first, second: second


#: Marks replies of the fake provider; the gateway accepts it only from endpoints with ``fake: true``.
FAKE_HEADER = "x-larkbot-fake"

CODECS: dict[WireFormat, Codec] = {
    "openai-chat": Codec(
        "openai-chat",
        openai_chat.PATH,
        openai_chat.encode_request,
        openai_chat.decode_response,
        openai_chat.encode_response,
        openai_chat.decode_request,
        True,
    ),
    "anthropic-messages": Codec(
        "anthropic-messages",
        anthropic.PATH,
        anthropic.encode_request,
        anthropic.decode_response,
        anthropic.encode_response,
        anthropic.decode_request,
        False,
        continuation=anthropic.continuation,
        merge=anthropic.merge,
    ),
    "responses": Codec(
        "responses",
        responses.PATH,
        responses.encode_request,
        responses.decode_response,
        responses.encode_response,
        responses.decode_request,
        True,
        failed=lambda reply: responses.failure_of(reply) if reply.get("status") == "failed" else None,
    ),
}


def codec_of(fmt: str) -> Codec:
    """The codec of a chat format; a speech-to-text endpoint has none (``gateway.chat_format`` refuses
    it before anything is encoded)."""
    codec = _BY_NAME.get(fmt)
    if codec is None:
        raise KeyError(f"{fmt} is not a chat format")
    return codec


_BY_NAME: dict[str, Codec] = {fmt: codec for fmt, codec in CODECS.items()}


def codec_for_path(path: str) -> Codec | None:
    """The codec whose endpoint path ``path`` ends with (the fake provider routes by it)."""
    for codec in CODECS.values():
        if path.endswith(codec.path):
            return codec
    return None


def request_headers(fmt: WireFormat, api_key: str | None) -> dict[str, str]:
    """Every header of a call, the credential included; callers redact before logging or dumping."""
    headers = {"content-type": "application/json", "accept": "application/json"}
    match fmt:
        case "anthropic-messages":
            headers["anthropic-version"] = anthropic.API_VERSION
            if api_key:
                headers["x-api-key"] = api_key
        case "openai-chat" | "responses":
            if api_key:
                headers["authorization"] = f"Bearer {api_key}"
        case _:
            assert_never(fmt)
    return headers


def encode_response(
    fmt: WireFormat,
    message: AssistantMessage,
    stop_reason: StopReason,
    usage: Usage,
    *,
    model: str,
    response_id: str,
    usage_style: str = "openai",
) -> dict[str, Any]:
    if fmt == "openai-chat":
        style: OpenAIUsageStyle = usage_style if usage_style in ("deepseek", "xai", "gemini") else "openai"  # type: ignore[assignment]
        return openai_chat.encode_response(
            message, stop_reason, usage, model=model, response_id=response_id, usage_style=style
        )
    return CODECS[fmt].encode_response(message, stop_reason, usage, model=model, response_id=response_id)
