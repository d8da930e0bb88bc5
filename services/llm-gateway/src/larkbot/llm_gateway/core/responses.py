"""The ``responses`` wire format (``POST {base_url}/responses``), stateless.

Decisions:

- ``store: false`` and ``include: ["reasoning.encrypted_content"]``: the gateway keeps no provider-side
  state, so reasoning is replayed from its encrypted content. A reasoning part replays only with both its
  ``item_id`` and ``opaque`` payload; the summary travels as one ``summary_text`` (``text``).
- An assistant message becomes input items in its part order: consecutive text parts form one assistant
  ``message`` item, each tool call a ``function_call`` item. Item ids and statuses of the reply are not
  kept (they are not needed without server state).
- Tool results carrying images send ``output`` as a list of ``input_text`` / ``input_image`` parts (this
  format accepts images in function output); text-only results send a string.
- Output items of unknown types are kept in ``provider_extra`` with their position and re-inserted when
  replayed to this format.
"""

from __future__ import annotations

from typing import Any

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

from . import usage as usage_codec
from .common import (
    BlobKeyOf,
    Decoded,
    EncodeOptions,
    ParsedRequest,
    WireError,
    json_list,
    json_object,
    load_extra,
    lookup_image,
    parse_data_url,
)

FORMAT: WireFormat = "responses"
PATH = "/responses"
_ASSISTANT_ITEMS = frozenset({"reasoning", "function_call"})
_INCOMPLETE: dict[str, StopReason] = {"max_output_tokens": "max_tokens", "content_filter": "refusal"}


def encode_request(request: LLMRequest, messages: tuple[Message, ...], opts: EncodeOptions) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, UserMessage):
            items.append({"type": "message", "role": "user", "content": _user_parts(message.parts, opts)})
        elif isinstance(message, AssistantMessage):
            items.extend(_assistant_items(message, refusal=False))
        else:
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.tool_call_id,
                    "output": _output(message, opts),
                }
            )
    body: dict[str, Any] = {"model": opts.model}
    if request.system:
        body["instructions"] = request.system
    body["input"] = items
    if request.tools:
        body["tools"] = [_tool(t) for t in request.tools]
        body["tool_choice"] = _tool_choice(request.tool_choice)
    if request.max_output_tokens is not None:
        body["max_output_tokens"] = request.max_output_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if opts.prompt_cache_key is not None:
        body["prompt_cache_key"] = opts.prompt_cache_key
    body["store"] = False
    body["include"] = ["reasoning.encrypted_content"]
    return body


def _user_parts(parts: tuple[UserPart, ...], opts: EncodeOptions) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            out.append({"type": "input_text", "text": part.text})
        else:
            url = lookup_image(opts.images, part).data_url()
            out.append({"type": "input_image", "image_url": url, "detail": part.detail})
    return out


def _output(message: ToolResultMessage, opts: EncodeOptions) -> str | list[dict[str, Any]]:
    if all(isinstance(p, TextPart) for p in message.parts) and len(message.parts) <= 1:
        return message.parts[0].text if message.parts else ""  # type: ignore[union-attr]
    return _user_parts(message.parts, opts)


def _assistant_items(message: AssistantMessage, *, refusal: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []

    def flush() -> None:
        if texts:
            out.append({"type": "message", "role": "assistant", "content": list(texts)})
            texts.clear()

    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:
                kind = "refusal" if refusal else "output_text"
                texts.append({"type": kind, kind if refusal else "text": part.text})
            continue
        flush()
        if isinstance(part, ToolCallPart):
            out.append(
                {
                    "type": "function_call",
                    "call_id": part.id,
                    "name": part.name,
                    "arguments": part.arguments_json,
                }
            )
        elif part.item_id is not None and part.opaque is not None:
            summary = [{"type": "summary_text", "text": part.text}] if part.text is not None else []
            out.append(
                {
                    "type": "reasoning",
                    "id": part.item_id,
                    "summary": summary,
                    "encrypted_content": part.opaque,
                }
            )
    flush()
    for kept in json_list(load_extra(message, FORMAT).get("items"), "provider_extra.items"):
        out.insert(min(int(kept["at"]), len(out)), kept["item"])
    return out


def _tool(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters(),
    }


def _tool_choice(choice: ToolChoice) -> Any:
    if choice.mode == "tool":
        return {"type": "function", "name": choice.name}
    return {"auto": "auto", "any": "required", "none": "none"}[choice.mode]


def decode_response(body: dict[str, Any], identity: str) -> Decoded:
    if body.get("status") == "failed":
        raise WireError("response status is failed")
    message, refused = _read_assistant(json_list(body.get("output"), "output"), identity)
    stop: StopReason
    if body.get("status") == "incomplete":
        details = body.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        stop = _INCOMPLETE.get(str(reason), "other")
    elif refused:
        stop = "refusal"
    elif any(isinstance(p, ToolCallPart) for p in message.parts):
        stop = "tool_use"
    else:
        stop = "end_turn"
    return Decoded(
        message=message.model_copy(update={"model_identity": identity}),
        stop_reason=stop,
        usage=usage_codec.from_responses(json_object(body.get("usage") or {}, "usage")),
    )


def _read_assistant(output: list[Any], identity: str) -> tuple[AssistantMessage, bool]:
    parts: list[AssistantPart] = []
    unknown: list[dict[str, Any]] = []
    refused = False
    for index, raw in enumerate(output):
        item = json_object(raw, "output item")
        kind = item.get("type")
        if kind == "reasoning":
            summary = [str(s.get("text", "")) for s in json_list(item.get("summary"), "summary")]
            opaque = item.get("encrypted_content")
            parts.append(
                ReasoningPart(
                    text="\n\n".join(summary) if summary else None,
                    opaque=str(opaque) if opaque is not None else None,
                    item_id=str(item["id"]) if item.get("id") is not None else None,
                    format=FORMAT,
                    model_identity=identity,
                )
            )
        elif kind == "message":
            for content in json_list(item.get("content"), "message.content"):
                content = json_object(content, "content part")
                if content.get("type") == "output_text" and content.get("text"):
                    parts.append(TextPart(text=str(content["text"])))
                elif content.get("type") == "refusal" and content.get("refusal"):
                    refused = True
                    parts.append(TextPart(text=str(content["refusal"])))
        elif kind == "function_call":
            parts.append(
                ToolCallPart(
                    id=str(item["call_id"]), name=str(item["name"]), arguments_json=item["arguments"]
                )
            )
        else:
            unknown.append({"at": index, "item": item})
    extra = canonical_json({"items": unknown}) if unknown else None
    message = AssistantMessage(
        parts=tuple(parts), provider_extra=extra, provider_extra_format=FORMAT if unknown else None
    )
    return message, refused


def encode_response(
    message: AssistantMessage, stop_reason: StopReason, usage: Usage, *, model: str, response_id: str
) -> dict[str, Any]:
    """A reply as the Responses API sends it (the fake provider speaks through this)."""
    output = _assistant_items(message, refusal=stop_reason == "refusal")
    for index, item in enumerate(output):
        if item["type"] == "message":
            item["id"] = f"msg_{response_id}_{index}"
            item["status"] = "completed"
            for content in item["content"]:
                if content["type"] == "output_text":
                    content["annotations"] = []
        elif item["type"] == "function_call":
            item["id"] = f"fc_{response_id}_{index}"
            item["status"] = "completed"
    incomplete = {"max_tokens": "max_output_tokens", "other": "other"}.get(stop_reason)
    return {
        "id": response_id,
        "object": "response",
        "created_at": 0,
        "status": "incomplete" if incomplete else "completed",
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "model": model,
        "output": output,
        "usage": usage_codec.to_responses(usage),
    }


def decode_request(body: dict[str, Any], blob_key_of: BlobKeyOf, identity: str = "request") -> ParsedRequest:
    """Read a request body back into IR; consecutive assistant-side items form one assistant message."""
    system = str(body.get("instructions") or "")
    messages: list[Message] = []
    pending: list[Any] = []

    def flush() -> None:
        if pending:
            messages.append(_read_assistant(list(pending), identity)[0])
            pending.clear()

    raw_input = body.get("input")
    items = (
        [{"type": "message", "role": "user", "content": raw_input}]
        if isinstance(raw_input, str)
        else raw_input
    )
    for raw in json_list(items, "input"):
        item = json_object(raw, "input item")
        kind = item.get("type", "message")
        role = item.get("role")
        if kind in _ASSISTANT_ITEMS or (kind == "message" and role == "assistant"):
            pending.append(item)
            continue
        flush()
        if kind == "function_call_output":
            output = item.get("output")
            parts = [] if output == "" else _read_user(output, blob_key_of)
            messages.append(ToolResultMessage(tool_call_id=str(item["call_id"]), parts=tuple(parts)))
        elif kind == "message" and role in ("system", "developer"):
            system = str(item.get("content"))
        elif kind == "message" and role == "user":
            messages.append(UserMessage(parts=tuple(_read_user(item.get("content"), blob_key_of))))
        else:
            raise WireError(f"unknown input item {str(kind)[:32]!r}")
    flush()
    tools = tuple(
        ToolSpec.of(t["name"], t.get("description", ""), t.get("parameters", {}))
        for t in (json_object(x, "tool") for x in json_list(body.get("tools"), "tools"))
    )
    return ParsedRequest(
        model=str(body.get("model")),
        system=system,
        messages=tuple(messages),
        tools=tools,
        tool_choice=_read_choice(body.get("tool_choice")),
        max_output_tokens=body.get("max_output_tokens"),
        temperature=body.get("temperature"),
        prompt_cache_key=body.get("prompt_cache_key"),
    )


def _read_user(content: Any, blob_key_of: BlobKeyOf) -> list[UserPart]:
    if isinstance(content, str):
        return [TextPart(text=content)]
    parts: list[UserPart] = []
    for raw in json_list(content, "content"):
        item = json_object(raw, "content part")
        if item.get("type") == "input_text":
            parts.append(TextPart(text=str(item.get("text", ""))))
        elif item.get("type") == "input_image":
            mime, data = parse_data_url(str(item.get("image_url", "")))
            parts.append(
                ImagePart(blob_key=blob_key_of(mime, data), mime=mime, detail=item.get("detail", "auto"))
            )
        else:
            raise WireError(f"unknown content part type {str(item.get('type'))[:32]!r}")
    return parts


def _read_choice(raw: Any) -> ToolChoice:
    if raw is None or raw == "auto":
        return ToolChoice()
    if raw == "required":
        return ToolChoice(mode="any")
    if raw == "none":
        return ToolChoice(mode="none")
    return ToolChoice(mode="tool", name=str(json_object(raw, "tool_choice")["name"]))
