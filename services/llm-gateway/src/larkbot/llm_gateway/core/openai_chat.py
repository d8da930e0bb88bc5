"""The ``openai-chat`` wire format (``POST {base_url}/chat/completions``): OpenAI and every compatible server.

Decisions:

- Compatibility first: the output limit is ``max_tokens`` unless the endpoint's model takes only
  ``max_completion_tokens`` (``Accepts``); ``temperature`` and a forced ``tool_choice`` only where
  accepted. A single text part is sent as a plain string (DeepSeek rejects part lists);
  ``prompt_cache_key`` only when the endpoint says it is supported.
- Reasoning comes in three dialects, all read as a :class:`ReasoningPart`: ``reasoning_content``
  (DeepSeek, vLLM before 0.11, xAI), ``reasoning`` (Ollama, Groq, OpenRouter, vLLM) and OpenRouter's
  structured ``reasoning_details`` (text, signature, encrypted data). The part holds the readable text; the
  field it came in (when not ``reasoning_content``) and ``reasoning_details`` verbatim go to
  ``provider_extra``, so the same model gets its reasoning back exactly as it sent it, and no other model
  gets it at all. Parts decode in the order reasoning, text, tool calls.
- A tool call without an id (Gemini's compatibility endpoint sends ``"id": ""``) gets a deterministic one
  (:func:`synthesize_tool_id`); arguments sent as an object (some servers) become their JSON text.
- Tool messages carry text only in this format, so images from tool results follow the run of tool
  messages in one user message, each group introduced by ``Images from tool call <id>:``; the decoder
  reads that shape back. ``is_error`` has no wire field here and is not sent.
- A refusal (``message.refusal``) decodes to its text with stop reason ``refusal``.
- ``provider_extra`` layout: ``{"message": {unknown non-empty message fields},
  "tool_calls": [{"at": <index among the calls>, "fields": {unknown call fields, e.g. Gemini's
  extra_content.google.thought_signature}}], "reasoning_field": "reasoning" | "reasoning_details"}``, each
  key only when needed. A flat object (stored before this layout) is read as message fields.

Size (~420 lines, over the ~300 of a module, on purpose): one wire format in both directions — the
gateway's (encode a request, decode a reply) and the fake provider's (decode a request, encode a reply)
— share the readers and writers of the same shapes, so that a reader checks a field's encoding against
its decoding in one place and the round-trip tests pin one module.
"""

from __future__ import annotations

import re
from typing import Any, assert_never

from larkbot.canonical.llm import (
    AssistantMessage,
    AssistantPart,
    ImagePart,
    LLMRequest,
    Message,
    ReasoningPart,
    StopReason,
    TextPart,
    ToolCallPart,
    ToolChoice,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
    UserPart,
    WireFormat,
    canonical_json,
)

from ..errors import WireError
from . import usage as usage_codec
from .common import (
    Accepts,
    BlobKeyOf,
    Decoded,
    EncodeOptions,
    ParsedRequest,
    arguments_text,
    json_list,
    json_object,
    load_extra,
    lookup_image,
    parse_data_url,
    synthesize_tool_id,
)

FORMAT: WireFormat = "openai-chat"
PATH = "/chat/completions"
_KNOWN_MESSAGE_KEYS = frozenset(
    {"role", "content", "tool_calls", "reasoning_content", "reasoning", "reasoning_details", "refusal"}
)
_KNOWN_CALL_KEYS = frozenset({"id", "type", "function", "index"})
_EXTRA_KEYS = frozenset({"message", "tool_calls", "reasoning_field"})
_REASONING_FIELDS = ("reasoning_content", "reasoning")
_TOOL_IMAGES = re.compile(r"^Images from tool call (.+):$")
_FINISH: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
_FINISH_OUT = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length", "refusal": "stop"}


def encode_request(request: LLMRequest, messages: tuple[Message, ...], opts: EncodeOptions) -> dict[str, Any]:
    wire: list[dict[str, Any]] = []
    if request.system:
        wire.append({"role": "system", "content": request.system})
    pending_images: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, ToolResultMessage) and pending_images:
            wire.append({"role": "user", "content": pending_images})
            pending_images = []
        match message:
            case UserMessage():
                wire.append({"role": "user", "content": _user_content(message.parts, opts)})
            case AssistantMessage():
                wire.append(_assistant(message))
            case ToolResultMessage():
                texts = [p for p in message.parts if isinstance(p, TextPart)]
                images = [p for p in message.parts if isinstance(p, ImagePart)]
                wire.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": _texts(texts)})
                if images:
                    pending_images.append(
                        {"type": "text", "text": f"Images from tool call {message.tool_call_id}:"}
                    )
                    pending_images.extend(_image(p, opts) for p in images)
            case _:
                assert_never(message)
    if pending_images:
        wire.append({"role": "user", "content": pending_images})
    accepts = opts.accepts
    body: dict[str, Any] = {"model": opts.model, "messages": wire}
    if request.tools:
        body["tools"] = [_tool(t) for t in request.tools]
        body["tool_choice"] = _tool_choice(request.tool_choice, accepts)
    if request.max_output_tokens is not None:
        body[accepts.max_tokens_field] = request.max_output_tokens
    if request.temperature is not None and accepts.temperature:
        body["temperature"] = request.temperature
    if opts.prompt_cache_key is not None:
        body["prompt_cache_key"] = opts.prompt_cache_key
    return body


def _texts(parts: list[TextPart]) -> str | list[dict[str, Any]]:
    if len(parts) == 1:
        return parts[0].text
    if not parts:
        return ""
    return [{"type": "text", "text": p.text} for p in parts]


def _image(part: ImagePart, opts: EncodeOptions) -> dict[str, Any]:
    url: dict[str, Any] = {"url": lookup_image(opts.images, part).data_url()}
    if part.detail != "auto":
        url["detail"] = part.detail
    return {"type": "image_url", "image_url": url}


def _user_content(parts: tuple[UserPart, ...], opts: EncodeOptions) -> str | list[dict[str, Any]]:
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    return [{"type": "text", "text": p.text} if isinstance(p, TextPart) else _image(p, opts) for p in parts]


def _assistant(message: AssistantMessage) -> dict[str, Any]:
    texts = [p for p in message.parts if isinstance(p, TextPart) and p.text]
    calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
    reasoning = [p.text for p in message.parts if isinstance(p, ReasoningPart) and p.text is not None]
    extra = _read_extra(load_extra(message, FORMAT))
    out: dict[str, Any] = {"role": "assistant"}
    out["content"] = _texts(texts) if texts or not calls else None
    field = extra["reasoning_field"] or "reasoning_content"
    if reasoning and field in _REASONING_FIELDS:
        out[field] = "\n".join(reasoning)
    if calls:
        call_extra = {int(e["at"]): e["fields"] for e in extra["tool_calls"]}
        out["tool_calls"] = [_call(c, call_extra.get(index, {})) for index, c in enumerate(calls)]
    for key, value in extra["message"].items():
        out.setdefault(key, value)
    return out


def _call(call: ToolCallPart, fields: dict[str, Any]) -> dict[str, Any]:
    out = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments_json},
    }
    for key, value in fields.items():
        out.setdefault(key, value)
    return out


def _read_extra(raw: dict[str, Any]) -> dict[str, Any]:
    """The ``provider_extra`` layout (see the module docstring); a legacy flat object is message fields."""
    if raw and not set(raw) <= _EXTRA_KEYS:
        raw = {"message": raw}
    return {
        "message": json_object(raw.get("message", {}), "provider_extra.message"),
        "tool_calls": json_list(raw.get("tool_calls"), "provider_extra.tool_calls"),
        "reasoning_field": raw.get("reasoning_field"),
    }


def _tool(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters()},
    }


def _tool_choice(choice: ToolChoice, accepts: Accepts) -> Any:
    if choice.mode in ("tool", "any") and not accepts.forced_tool_choice:
        return "auto"
    if choice.mode == "tool":
        return {"type": "function", "function": {"name": choice.name}}
    return {"auto": "auto", "any": "required", "none": "none"}[choice.mode]


def decode_response(body: dict[str, Any], identity: str) -> Decoded:
    choices = json_list(body.get("choices"), "choices")
    if not choices:
        raise WireError("reply has no choices")
    choice = json_object(choices[0], "choices[0]")
    raw = json_object(choice.get("message"), "choices[0].message")
    message, refused = _read_assistant(raw, identity, str(body.get("id")))
    stop: StopReason = "refusal" if refused else _FINISH.get(str(choice.get("finish_reason")), "other")
    return Decoded(
        message=message.model_copy(update={"model_identity": identity}),
        stop_reason=stop,
        usage=usage_codec.from_openai_chat(json_object(body.get("usage") or {}, "usage")),
    )


def _read_assistant(
    message: dict[str, Any], identity: str, reply_id: str = ""
) -> tuple[AssistantMessage, bool]:
    parts, refused, field = _reply_parts(message, identity, reply_id)
    extra: dict[str, Any] = {}
    fields = {k: v for k, v in message.items() if k not in _KNOWN_MESSAGE_KEYS and _present(v)}
    if _present(message.get("reasoning_details")):
        fields["reasoning_details"] = message["reasoning_details"]
    if fields:
        extra["message"] = fields
    calls = [
        {"at": index, "fields": kept}
        for index, call in enumerate(json_list(message.get("tool_calls"), "tool_calls"))
        if (
            kept := {
                k: v
                for k, v in json_object(call, "tool call").items()
                if k not in _KNOWN_CALL_KEYS and _present(v)
            }
        )
    ]
    if calls:
        extra["tool_calls"] = calls
    if field is not None:
        extra["reasoning_field"] = field
    return (
        AssistantMessage(
            parts=tuple(parts),
            provider_extra=canonical_json(extra) if extra else None,
            provider_extra_format=FORMAT if extra else None,
        ),
        refused,
    )


def _present(value: Any) -> bool:
    return value not in (None, "", [], {})


def _reply_parts(
    message: dict[str, Any], identity: str, reply_id: str
) -> tuple[list[AssistantPart], bool, str | None]:
    """The parts, whether it is a refusal, and the reasoning field to record (``None``: the default).

    A missing tool-call id is derived from the reply id and the whole message (the seed)."""
    parts: list[AssistantPart] = []
    text, field = _reasoning_text(message)
    if text:
        parts.append(ReasoningPart(text=text, format=FORMAT, model_identity=identity))
    content = message.get("content")
    if isinstance(content, str):
        if content:
            parts.append(TextPart(text=content))
    else:
        for item in json_list(content, "message.content"):
            item = json_object(item, "content part")
            if item.get("type") == "text" and isinstance(item.get("text"), str) and item["text"]:
                parts.append(TextPart(text=item["text"]))
    refusal = message.get("refusal")
    refused = isinstance(refusal, str) and bool(refusal)
    if refused:
        parts.append(TextPart(text=str(refusal)))
    for index, call in enumerate(json_list(message.get("tool_calls"), "tool_calls")):
        function = json_object(json_object(call, "tool call").get("function"), "tool call function")
        name = str(function["name"])
        arguments = arguments_text(function.get("arguments"))
        call_id = call.get("id")
        if isinstance(call_id, int) and not isinstance(call_id, bool):
            call_id = str(call_id)
        if not isinstance(call_id, str) or not call_id:
            call_id = synthesize_tool_id(f"{reply_id}\x00{canonical_json(message)}", index, name, arguments)
        parts.append(ToolCallPart(id=call_id, name=name, arguments_json=arguments))
    return parts, refused, field if text else None


def _reasoning_text(message: dict[str, Any]) -> tuple[str | None, str | None]:
    """The reasoning text and the field that carried it (``None`` for ``reasoning_content``)."""
    for field in _REASONING_FIELDS:
        value = message.get(field)
        if isinstance(value, str) and value:
            return value, None if field == "reasoning_content" else field
    texts: list[str] = []
    for detail in json_list(message.get("reasoning_details"), "reasoning_details"):
        if isinstance(detail, dict):
            found = detail.get("text") if detail.get("type") == "reasoning.text" else detail.get("summary")
            if isinstance(found, str) and found:
                texts.append(found)
    return ("\n\n".join(texts), "reasoning_details") if texts else (None, None)


def encode_response(
    message: AssistantMessage,
    stop_reason: StopReason,
    usage: Usage,
    *,
    model: str,
    response_id: str,
    usage_style: usage_codec.OpenAIUsageStyle = "openai",
) -> dict[str, Any]:
    """A reply as an OpenAI-compatible server sends it (the fake provider speaks through this)."""
    wire = _assistant(message)
    if stop_reason == "refusal":
        text = wire.pop("content")
        wire["content"] = None
        wire["refusal"] = text if isinstance(text, str) else ""
    choice = {
        "index": 0,
        "message": wire,
        "finish_reason": _FINISH_OUT.get(stop_reason, "insufficient_system_resource"),
    }
    return {
        "id": response_id,
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [choice],
        "usage": usage_codec.to_openai_chat(usage, usage_style),
    }


def decode_request(body: dict[str, Any], blob_key_of: BlobKeyOf, identity: str = "request") -> ParsedRequest:
    """Read a request body back into IR; reasoning parts are tagged with ``identity``."""
    system = ""
    messages: list[Message] = []
    for raw in json_list(body.get("messages"), "messages"):
        item = json_object(raw, "message")
        role = item.get("role")
        if role in ("system", "developer"):
            system = str(item.get("content") or "")
        elif role == "user":
            parts = _read_user(item.get("content"), blob_key_of)
            if not _attach_tool_images(messages, parts):
                messages.append(UserMessage(parts=tuple(parts)))
        elif role == "assistant":
            messages.append(_read_assistant(item, identity)[0])
        elif role == "tool":
            texts = _read_user(item.get("content"), blob_key_of) if item.get("content") != "" else []
            messages.append(ToolResultMessage(tool_call_id=str(item["tool_call_id"]), parts=tuple(texts)))
        else:
            raise WireError(f"unknown message role {str(role)[:32]!r}")
    tools = tuple(
        ToolSpec.of(f["name"], f.get("description", ""), f.get("parameters", {}))
        for f in (json_object(t, "tool").get("function", {}) for t in json_list(body.get("tools"), "tools"))
    )
    return ParsedRequest(
        model=str(body.get("model")),
        system=system,
        messages=tuple(messages),
        tools=tools,
        tool_choice=_read_choice(body.get("tool_choice")),
        max_output_tokens=body.get("max_tokens") or body.get("max_completion_tokens"),
        temperature=body.get("temperature"),
        prompt_cache_key=body.get("prompt_cache_key"),
    )


def _read_user(content: Any, blob_key_of: BlobKeyOf) -> list[UserPart]:
    if isinstance(content, str):
        return [TextPart(text=content)]
    parts: list[UserPart] = []
    for raw in json_list(content, "content"):
        item = json_object(raw, "content part")
        if item.get("type") == "text":
            parts.append(TextPart(text=str(item.get("text", ""))))
        elif item.get("type") == "image_url":
            image = json_object(item.get("image_url"), "image_url")
            mime, data = parse_data_url(str(image.get("url", "")))
            detail = image.get("detail", "auto")
            parts.append(ImagePart(blob_key=blob_key_of(mime, data), mime=mime, detail=detail))
        else:
            raise WireError(f"unknown content part type {str(item.get('type'))[:32]!r}")
    return parts


def _attach_tool_images(messages: list[Message], parts: list[UserPart]) -> bool:
    """Move ``Images from tool call <id>:`` groups back onto their tool results."""
    if not messages or not isinstance(messages[-1], ToolResultMessage) or not parts:
        return False
    first = parts[0]
    if not isinstance(first, TextPart) or not _TOOL_IMAGES.match(first.text):
        return False
    by_id = {m.tool_call_id: i for i, m in enumerate(messages) if isinstance(m, ToolResultMessage)}
    target: int | None = None
    for part in parts:
        match = _TOOL_IMAGES.match(part.text) if isinstance(part, TextPart) else None
        if match is not None:
            target = by_id.get(match.group(1))
            if target is None:
                raise WireError("tool images name an unknown tool call")
            continue
        if target is None:
            raise WireError("tool images without a header")
        result = messages[target]
        assert isinstance(result, ToolResultMessage)
        messages[target] = result.model_copy(update={"parts": (*result.parts, part)})
    return True


def _read_choice(raw: Any) -> ToolChoice:
    if raw is None or raw == "auto":
        return ToolChoice()
    if raw == "required":
        return ToolChoice(mode="any")
    if raw == "none":
        return ToolChoice(mode="none")
    function = json_object(json_object(raw, "tool_choice").get("function"), "tool_choice.function")
    return ToolChoice(mode="tool", name=str(function["name"]))
