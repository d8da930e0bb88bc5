"""The provider-independent LLM IR and the ``llm.generate`` request/reply (SPEC §5).

Decisions:

- The system prompt is a field of :class:`LLMRequest`, not a message: every wire format treats it
  specially, and keeping it apart keeps the cached prefix's first bytes obviously stable.
- Free-form JSON travels as canonical JSON **text** (compact separators, key order as produced, no NaN;
  :func:`canonical_json`), never as a dict: models stay frozen and hashable, and bytes stay identical
  across a round trip, which prompt caching depends on. This covers ``ToolSpec.parameters_json`` (a JSON
  Schema object), ``ToolCallPart.arguments_json`` (the model's raw text, kept verbatim even when it is not
  valid JSON so replay is byte-exact; the driver rejects it as a tool error) and
  ``AssistantMessage.provider_extra`` (format-specific fields the provider needs back verbatim).
- Reasoning is kept with the wire ``format`` and ``model_identity`` it came from; the gateway replays it
  only to the same model (and only for the newest turns), and drops it otherwise. ``provider_extra``
  follows the same rule, judged by the message's ``model_identity``: a provider's own fields never reach
  another model.
- Images are object-store keys (``blob_key``), never inline bytes; the gateway fetches and encodes them.
- ``Usage.input_tokens`` is total billable input *including* cache reads and writes.
- Decode an ``llm.generate`` reply with :data:`LLM_REPLY_ADAPTER`; an :class:`LLMError` is a normal reply,
  not an exception, so the caller can apply the transient-retry policy (SPEC §4.4).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, field_validator, model_validator

from ._base import EpochMs, Id, NonEmptyStr, NonNegativeInt, WireModel

__all__ = [
    "LLM_REPLY_ADAPTER",
    "AssistantMessage",
    "AssistantPart",
    "ImageDetail",
    "ImagePart",
    "LLMError",
    "LLMErrorCategory",
    "LLMReply",
    "LLMRequest",
    "LLMResponse",
    "Message",
    "Purpose",
    "ReasoningPart",
    "StopReason",
    "TextPart",
    "ToolCallPart",
    "ToolChoice",
    "ToolResultMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "UserPart",
    "WireFormat",
    "canonical_json",
]

#: The wire formats the gateway speaks.
WireFormat = Literal["openai-chat", "anthropic-messages", "responses"]
ImageDetail = Literal["low", "high", "auto"]


def canonical_json(value: Any) -> str:
    """The one JSON spelling used inside IR fields: compact, UTF-8 text, key order preserved."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _require_json(value: str, *, what: str, object_only: bool) -> str:
    try:
        parsed = json.loads(value)
    except ValueError:
        raise ValueError(f"{what} must be JSON text") from None
    if object_only and not isinstance(parsed, dict):
        raise ValueError(f"{what} must be a JSON object")
    return value


class TextPart(WireModel):
    kind: Literal["text"] = "text"
    text: str


class ImagePart(WireModel):
    """An image by object-store key. Also used by rendered-context segments (thumbnails)."""

    kind: Literal["image"] = "image"
    blob_key: Id
    mime: NonEmptyStr
    detail: ImageDetail = "auto"


class ToolCallPart(WireModel):
    """A tool call as the model made it; ``id`` is provider-native (sanitized only on the wire)."""

    kind: Literal["tool_call"] = "tool_call"
    id: Id
    name: Id
    arguments_json: str


class ReasoningPart(WireModel):
    """Model reasoning: readable ``text`` (or summary), Anthropic's ``signature``, an ``opaque`` payload
    (Anthropic redacted thinking, Responses ``encrypted_content``) and the Responses item ``item_id``."""

    kind: Literal["reasoning"] = "reasoning"
    text: str | None = None
    signature: str | None = None
    opaque: str | None = None
    item_id: str | None = None
    format: WireFormat
    model_identity: Id


UserPart = Annotated[TextPart | ImagePart, Field(discriminator="kind")]
AssistantPart = Annotated[TextPart | ToolCallPart | ReasoningPart, Field(discriminator="kind")]


class UserMessage(WireModel):
    kind: Literal["user"] = "user"
    parts: Annotated[tuple[UserPart, ...], Field(min_length=1)]


class AssistantMessage(WireModel):
    """``provider_extra`` is canonical JSON of what a wire format needs back verbatim (unknown fields and
    blocks, signatures, message phases), tagged with that format in ``provider_extra_format``. Its layout
    belongs to the gateway's codec of that format; it is replayed only to the same ``model_identity``."""

    kind: Literal["assistant"] = "assistant"
    parts: tuple[AssistantPart, ...]
    model_identity: Id | None = None
    provider_extra: str | None = None
    provider_extra_format: WireFormat | None = None

    @model_validator(mode="after")
    def _extra_is_tagged(self) -> AssistantMessage:
        if self.provider_extra is not None:
            _require_json(self.provider_extra, what="provider_extra", object_only=True)
        if (self.provider_extra is None) != (self.provider_extra_format is None):
            raise ValueError("provider_extra and provider_extra_format go together")
        return self


class ToolResultMessage(WireModel):
    """The result of one tool call. ``requires_follow_up`` says the loop must give the model another step
    to see it (a ``send_message`` result normally does not)."""

    kind: Literal["tool_result"] = "tool_result"
    tool_call_id: Id
    parts: tuple[UserPart, ...]
    is_error: bool = False
    requires_follow_up: bool = False


Message = Annotated[UserMessage | AssistantMessage | ToolResultMessage, Field(discriminator="kind")]


class ToolSpec(WireModel):
    """A tool offered to the model; ``parameters_json`` is a JSON Schema object as canonical JSON text."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
    description: str
    parameters_json: str

    @field_validator("parameters_json")
    @classmethod
    def _schema_is_object(cls, value: str) -> str:
        return _require_json(value, what="parameters_json", object_only=True)

    @classmethod
    def of(cls, name: str, description: str, parameters: dict[str, Any]) -> ToolSpec:
        return cls(name=name, description=description, parameters_json=canonical_json(parameters))

    def parameters(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.parameters_json)
        return parsed


class ToolChoice(WireModel):
    """``auto``: model decides; ``any``: must call some tool; ``none``: no tool; ``tool``: must call
    ``name``."""

    mode: Literal["auto", "any", "none", "tool"] = "auto"
    name: Id | None = None

    @model_validator(mode="after")
    def _name_iff_tool(self) -> ToolChoice:
        if (self.mode == "tool") != (self.name is not None):
            raise ValueError("name is required for mode 'tool' and only for it")
        return self


#: What a model call is for. ``transcription`` calls travel as :class:`.transcription.TranscriptionRequest`
#: on ``llm.transcribe``; the others as :class:`LLMRequest` on ``llm.generate``.
Purpose = Literal["probe", "primary", "compaction", "vision", "memory", "transcription"]


class LLMRequest(WireModel):
    """One model call. ``endpoint`` names a configured endpoint (provider, model, format); ``deadline_ms``
    is absolute epoch time after which the caller no longer waits; ``chat_key`` tags logs and metrics."""

    request_id: Id
    purpose: Purpose
    endpoint: Id
    system: str
    messages: Annotated[tuple[Message, ...], Field(min_length=1)]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice = ToolChoice()
    max_output_tokens: Annotated[int, Field(ge=1)] | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    prompt_cache_key: str | None = None
    deadline_ms: EpochMs
    chat_key: str | None = None

    @model_validator(mode="after")
    def _tools_consistent(self) -> LLMRequest:
        names = [tool.name for tool in self.tools]
        if len(set(names)) != len(names):
            raise ValueError("tool names must be unique")
        if self.tool_choice.mode in ("any", "tool") and not self.tools:
            raise ValueError("tool_choice requires tools")
        if self.tool_choice.name is not None and self.tool_choice.name not in names:
            raise ValueError("tool_choice names a tool that is not offered")
        return self


class Usage(WireModel):
    """Normalized token usage; cache reads and writes are parts of ``input_tokens``."""

    input_tokens: NonNegativeInt
    output_tokens: NonNegativeInt
    cache_read_tokens: NonNegativeInt = 0
    cache_write_tokens: NonNegativeInt = 0
    reasoning_tokens: NonNegativeInt | None = None

    @model_validator(mode="after")
    def _cache_within_input(self) -> Usage:
        if self.cache_read_tokens + self.cache_write_tokens > self.input_tokens:
            raise ValueError("cache tokens are part of input_tokens and cannot exceed it")
        return self


StopReason = Literal["end_turn", "tool_use", "max_tokens", "refusal", "other"]


class LLMResponse(WireModel):
    kind: Literal["response"] = "response"
    request_id: Id
    model_identity: Id
    message: AssistantMessage
    stop_reason: StopReason
    usage: Usage
    provider_latency_ms: NonNegativeInt
    gateway_latency_ms: NonNegativeInt | None = None
    #: The endpoints that failed before this one answered, in order (``llm.fallbacks``): empty when the
    #: endpoint the request named answered. A fallback is another model: the prompt cache starts over.
    fallback_from: tuple[Id, ...] = ()
    #: The endpoint that answered (``None``: the request's own, as replies before fallbacks said).
    endpoint: Id | None = None


#: What an :class:`LLMError` says about the call (its docstring says what each means): a closed set, so a
#: dispatch over it ends in ``assert_never``.
LLMErrorCategory = Literal[
    "transient", "permanent", "deadline", "invalid_request", "config", "context_length"
]


class LLMError(WireModel):
    """A failed call. ``category``, decided by what the provider said, not by the status alone:

    - ``transient``: timeouts, connection errors, 408/409/425/429/5xx — retry the same input later.
    - ``deadline``: the request's deadline passed.
    - ``context_length``: the request is too long for the model (its context window, or a per-request
      token limit such as a 429 "Request too large … TPM"); the same input never succeeds, a shorter one
      may — compact or trim, then call again.
    - ``invalid_request`` / ``permanent``: do not retry the same input.
    - ``config``: the endpoint needs an operator (unknown endpoint, key, model not found, no quota or
      credit).

    ``message`` is redacted; ``retry_after_s`` is the provider's hint, when it gave one. A
    ``context_length`` refusal carries the numbers the provider stated, when it stated them:
    ``window_tokens`` (the model's limit) and ``input_tokens`` (its count of the refused input), both in
    the model's own tokens — what lets the caller learn the real window."""

    kind: Literal["error"] = "error"
    request_id: Id
    category: LLMErrorCategory
    message: str
    status: int | None = None
    retry_after_s: Annotated[float, Field(ge=0)] | None = None
    window_tokens: Annotated[int, Field(gt=0)] | None = None
    input_tokens: Annotated[int, Field(gt=0)] | None = None
    #: The endpoint that gave this answer when it is not the request's own (the last of its fallbacks).
    endpoint: Id | None = None


LLMReply = Annotated[LLMResponse | LLMError, Field(discriminator="kind")]
LLM_REPLY_ADAPTER: TypeAdapter[LLMReply] = TypeAdapter(LLMReply)
