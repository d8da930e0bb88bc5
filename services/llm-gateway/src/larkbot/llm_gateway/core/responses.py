"""The ``responses`` wire format (``POST {base_url}/responses``), stateless.

Decisions:

- ``store: false`` and ``include: ["reasoning.encrypted_content"]``: the gateway keeps no provider-side
  state, so reasoning is replayed from what the reply carried. A reasoning item has a summary
  (``summary_text``), and OpenAI adds ``encrypted_content`` (``opaque``); open-weight models served by
  vLLM, DeepSeek and others send the reasoning itself as ``content: [{"type": "reasoning_text"}]`` and no
  encrypted content. The part's ``text`` is that full reasoning when present, else the summary. A
  reasoning part replays only with its ``item_id`` and either its ``opaque`` payload or its
  ``reasoning_text``.
- An assistant message becomes input items in its part order: each text part one assistant ``message``
  item — a ``commentary`` message and the ``final_answer`` never merge — with its ``phase`` when the reply
  gave one; each tool call a ``function_call`` item. Item ids and statuses of the reply are not kept (they
  are not needed without server state).
- ``status: failed`` raises a :class:`~larkbot.llm_gateway.errors.CallFailed` of the category its
  ``error.code`` means;
  ``status: incomplete`` decodes with the stop reason of ``incomplete_details.reason``
  (``max_output_tokens`` → ``max_tokens``, ``content_filter`` → ``refusal``, else ``other``).
- Tool results carrying images send ``output`` as a list of ``input_text`` / ``input_image`` parts (this
  format accepts images in function output); text-only results send a string.
- A ``function_call`` without a ``call_id`` gets a deterministic one (:func:`synthesize_tool_id`).
- ``provider_extra`` layout: ``{"items": [{"at": <output index>, "item": {unknown output item}}],
  "phases": [{"at": <part index>, "phase": "commentary" | "final_answer"}], "reasoning":
  [{"at": <part index>, "summary": [...]}]}`` — the last marks a part whose text is ``reasoning_text``
  and keeps its summary verbatim. Each key only when needed.

Size (~420 lines, over the ~300 of a module, on purpose): one wire format in both directions — the
gateway's (encode a request, decode a reply) and the fake provider's (decode a request, encode a reply)
— share the readers and writers of the same shapes, so that a reader checks a field's encoding against
its decoding in one place and the round-trip tests pin one module.
"""

from __future__ import annotations

from typing import Any, assert_never

from larkbot.canonical.llm import (
    AssistantMessage,
    AssistantPart,
    ImagePart,
    LLMErrorCategory,
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

from ..errors import CallFailed, WireError, call_failed
from . import usage as usage_codec
from .common import (
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

FORMAT: WireFormat = "responses"
PATH = "/responses"
_ASSISTANT_ITEMS = frozenset({"reasoning", "function_call"})
_INCOMPLETE: dict[str, StopReason] = {"max_output_tokens": "max_tokens", "content_filter": "refusal"}
_PHASES = frozenset({"commentary", "final_answer"})
#: ``error.code`` of a failed response → category; image and prompt codes reject this input.
_FAILED: dict[str, LLMErrorCategory] = {
    "server_error": "transient",
    "rate_limit_exceeded": "transient",
    "vector_store_timeout": "transient",
    "context_length_exceeded": "context_length",
    "invalid_prompt": "invalid_request",
}


def encode_request(request: LLMRequest, messages: tuple[Message, ...], opts: EncodeOptions) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for message in messages:
        match message:
            case UserMessage():
                items.append({"type": "message", "role": "user", "content": _user_parts(message.parts, opts)})
            case AssistantMessage():
                items.extend(_assistant_items(message, refusal=False))
            case ToolResultMessage():
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": message.tool_call_id,
                        "output": _output(message, opts),
                    }
                )
            case _:
                assert_never(message)
    body: dict[str, Any] = {"model": opts.model}
    if request.system:
        body["instructions"] = request.system
    body["input"] = items
    if request.tools:
        body["tools"] = [_tool(t) for t in request.tools]
        body["tool_choice"] = _tool_choice(request.tool_choice, opts.accepts.forced_tool_choice)
    if request.max_output_tokens is not None:
        body["max_output_tokens"] = request.max_output_tokens
    if request.temperature is not None and opts.accepts.temperature:
        body["temperature"] = request.temperature
    if opts.prompt_cache_key is not None:
        body["prompt_cache_key"] = opts.prompt_cache_key
    body["store"] = False
    body["include"] = ["reasoning.encrypted_content"]
    return body


def _user_parts(parts: tuple[UserPart, ...], opts: EncodeOptions) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        match part:
            case TextPart():
                out.append({"type": "input_text", "text": part.text})
            case ImagePart():
                url = lookup_image(opts.images, part).data_url()
                out.append({"type": "input_image", "image_url": url, "detail": part.detail})
            case _:
                assert_never(part)
    return out


def _output(message: ToolResultMessage, opts: EncodeOptions) -> str | list[dict[str, Any]]:
    if all(isinstance(p, TextPart) for p in message.parts) and len(message.parts) <= 1:
        return message.parts[0].text if message.parts else ""  # type: ignore[union-attr]
    return _user_parts(message.parts, opts)


def _assistant_items(message: AssistantMessage, *, refusal: bool) -> list[dict[str, Any]]:
    extra = load_extra(message, FORMAT)
    phases = {int(e["at"]): e["phase"] for e in json_list(extra.get("phases"), "provider_extra.phases")}
    content_of = {
        int(e["at"]): e["summary"] for e in json_list(extra.get("reasoning"), "provider_extra.reasoning")
    }
    out: list[dict[str, Any]] = []
    for index, part in enumerate(message.parts):
        match part:
            case TextPart():
                if part.text:
                    kind = "refusal" if refusal else "output_text"
                    item: dict[str, Any] = {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": kind, kind if refusal else "text": part.text}],
                    }
                    if index in phases:
                        item["phase"] = phases[index]
                    out.append(item)
            case ToolCallPart():
                out.append(
                    {
                        "type": "function_call",
                        "call_id": part.id,
                        "name": part.name,
                        "arguments": part.arguments_json,
                    }
                )
            case ReasoningPart():
                if part.item_id is not None and (part.opaque is not None or index in content_of):
                    out.append(_reasoning_item(part, content_of.get(index)))
            case _:
                assert_never(part)
    for kept in json_list(extra.get("items"), "provider_extra.items"):
        out.insert(min(int(kept["at"]), len(out)), kept["item"])
    return out


def _reasoning_item(part: ReasoningPart, summary: list[Any] | None) -> dict[str, Any]:
    """``summary`` is set when the text is the ``reasoning_text`` content (then kept verbatim)."""
    item: dict[str, Any] = {"type": "reasoning", "id": part.item_id}
    if summary is None:
        item["summary"] = [{"type": "summary_text", "text": part.text}] if part.text is not None else []
    else:
        item["summary"] = summary
        item["content"] = [{"type": "reasoning_text", "text": part.text or ""}]
    if part.opaque is not None:
        item["encrypted_content"] = part.opaque
    return item


def _tool(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters(),
    }


def _tool_choice(choice: ToolChoice, forced_accepted: bool) -> Any:
    if choice.mode in ("any", "tool") and not forced_accepted:
        return "auto"
    if choice.mode == "tool":
        return {"type": "function", "name": choice.name}
    return {"auto": "auto", "any": "required", "none": "none"}[choice.mode]


def decode_response(body: dict[str, Any], identity: str) -> Decoded:
    if body.get("status") == "failed":
        raise failure_of(body)
    message, refused = _read_assistant(json_list(body.get("output"), "output"), identity, str(body.get("id")))
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


def failure_of(body: dict[str, Any]) -> CallFailed:
    """A ``status: failed`` response as a failure of the category its ``error.code`` means."""
    error = body.get("error")
    error = error if isinstance(error, dict) else {}
    code = str(error.get("code") or "")
    category = _FAILED.get(code, "invalid_request" if "image" in code else "permanent")
    message = str(error.get("message") or "no error message")[:300]
    return call_failed(
        category, f"response failed ({code or 'no code'}): {message}", reason="response_failed"
    )


def _read_assistant(output: list[Any], identity: str, seed: str = "") -> tuple[AssistantMessage, bool]:
    parts: list[AssistantPart] = []
    unknown: list[dict[str, Any]] = []
    phases: list[dict[str, Any]] = []
    reasoning: list[dict[str, Any]] = []
    refused = False
    for index, raw in enumerate(output):
        item = json_object(raw, "output item")
        kind = item.get("type")
        if kind == "reasoning":
            summary_items = json_list(item.get("summary"), "summary")
            summary = [str(s.get("text", "")) for s in summary_items if isinstance(s, dict)]
            content = [
                str(c.get("text", ""))
                for c in json_list(item.get("content"), "reasoning.content")
                if isinstance(c, dict) and c.get("type") == "reasoning_text"
            ]
            if content:
                reasoning.append({"at": len(parts), "summary": summary_items})
            text = "\n\n".join(content) if content else "\n\n".join(summary) if summary else None
            opaque = item.get("encrypted_content")
            parts.append(
                ReasoningPart(
                    text=text,
                    opaque=str(opaque) if opaque is not None else None,
                    item_id=str(item["id"]) if item.get("id") is not None else None,
                    format=FORMAT,
                    model_identity=identity,
                )
            )
        elif kind == "message":
            phase = item.get("phase")
            for raw_part in json_list(item.get("content"), "message.content"):
                piece = json_object(raw_part, "content part")
                if piece.get("type") == "output_text" and piece.get("text"):
                    text = str(piece["text"])
                elif piece.get("type") == "refusal" and piece.get("refusal"):
                    refused = True
                    text = str(piece["refusal"])
                else:
                    continue
                if phase in _PHASES:
                    phases.append({"at": len(parts), "phase": phase})
                parts.append(TextPart(text=text))
        elif kind == "function_call":
            name = str(item["name"])
            arguments = arguments_text(item.get("arguments"))
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                call_id = synthesize_tool_id(f"{seed}\x00{canonical_json(item)}", index, name, arguments)
            parts.append(ToolCallPart(id=call_id, name=name, arguments_json=arguments))
        else:
            unknown.append({"at": index, "item": item})
    extra: dict[str, Any] = {}
    if unknown:
        extra["items"] = unknown
    if phases:
        extra["phases"] = phases
    if reasoning:
        extra["reasoning"] = reasoning
    message = AssistantMessage(
        parts=tuple(parts),
        provider_extra=canonical_json(extra) if extra else None,
        provider_extra_format=FORMAT if extra else None,
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
