"""The ``anthropic-messages`` wire format (``POST {base_url}/messages``, ``anthropic-version`` header).

Decisions:

- Roles must alternate and tool results travel in user messages, so consecutive user-side IR messages
  (user messages and tool results) merge into one user message, in IR order; consecutive assistant
  messages merge too. Empty and whitespace-only text blocks are dropped on both sides — the API refuses
  the whole request over one ("text content blocks must contain non-whitespace text"), and replies
  contain them around adaptive thinking — and a message left empty is skipped.
- ``temperature`` and a forced ``tool_choice`` only where the model accepts them (``Accepts``): with
  thinking enabled the API refuses both, so the choice becomes ``auto`` and the model may answer without
  a tool.
- ``pause_turn`` (a server-tool loop paused) means "send it back and let it continue": the gateway does
  so (:func:`continuation`, :func:`merge`) and decodes the merged turn; only a turn still paused when
  the continuations run out decodes as ``other``.
- ``cache_control`` breakpoints: on the system prompt (covering the tools, which precede it in the cache
  order) and on the last cacheable block of the second-to-last message — the last message is the
  late-binding one that changes every call. Two of the four breakpoints the API allows.
- Tool-call ids are sanitized on the way out (:func:`sanitize_tool_id`); decoded ids are the provider's.
- ``thinking`` blocks keep their ``signature``; ``redacted_thinking`` keeps its ``data`` as ``opaque``.
  A thinking block with neither is not replayable and is not sent.
- Content blocks of unknown types are kept in ``provider_extra`` with their position and re-inserted when
  replayed to this format.
"""

from __future__ import annotations

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
    BlobKeyOf,
    Decoded,
    EncodeOptions,
    ParsedRequest,
    json_list,
    json_object,
    load_extra,
    lookup_image,
    parse_arguments,
    sanitize_tool_id,
)

FORMAT: WireFormat = "anthropic-messages"
PATH = "/messages"
API_VERSION = "2023-06-01"
_EPHEMERAL = {"type": "ephemeral"}
_KNOWN_BLOCKS = frozenset({"text", "thinking", "redacted_thinking", "tool_use"})
_STOP: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "refusal",
    "pause_turn": "other",
}
_STOP_OUT = {"end_turn": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens", "refusal": "refusal"}


def encode_request(request: LLMRequest, messages: tuple[Message, ...], opts: EncodeOptions) -> dict[str, Any]:
    wire: list[dict[str, Any]] = []
    for message in messages:
        role = "assistant" if isinstance(message, AssistantMessage) else "user"
        blocks = _blocks(message, opts)
        if not blocks:
            continue
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    if len(wire) >= 2:
        _mark_cache_breakpoint(wire[-2]["content"])
    body: dict[str, Any] = {
        "model": opts.model,
        "max_tokens": request.max_output_tokens or opts.default_max_output_tokens,
    }
    if request.system:
        body["system"] = [{"type": "text", "text": request.system, "cache_control": _EPHEMERAL}]
    body["messages"] = wire
    if request.tools:
        body["tools"] = [_tool(t) for t in request.tools]
        body["tool_choice"] = _tool_choice(request.tool_choice, opts.accepts.forced_tool_choice)
    if request.temperature is not None and opts.accepts.temperature:
        body["temperature"] = request.temperature
    return body


def _mark_cache_breakpoint(blocks: list[dict[str, Any]]) -> None:
    for index in range(len(blocks) - 1, -1, -1):
        if blocks[index]["type"] not in ("thinking", "redacted_thinking"):
            blocks[index] = {**blocks[index], "cache_control": _EPHEMERAL}
            return


def _blocks(message: Message, opts: EncodeOptions) -> list[dict[str, Any]]:
    match message:
        case UserMessage():
            return _user_blocks(message.parts, opts)
        case ToolResultMessage():
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": sanitize_tool_id(message.tool_call_id),
            }
            content = _user_blocks(message.parts, opts)
            if content:
                block["content"] = content
            if message.is_error:
                block["is_error"] = True
            return [block]
        case AssistantMessage():
            return _assistant_blocks(message)
        case _:
            assert_never(message)


def _user_blocks(parts: tuple[UserPart, ...], opts: EncodeOptions) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        match part:
            case TextPart():
                if part.text.strip():
                    out.append({"type": "text", "text": part.text})
            case ImagePart():
                image = lookup_image(opts.images, part)
                source = {"type": "base64", "media_type": image.mime, "data": image.data_b64}
                out.append({"type": "image", "source": source})
            case _:
                assert_never(part)
    return out


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in message.parts:
        match part:
            case TextPart():
                if part.text.strip():
                    out.append({"type": "text", "text": part.text})
            case ToolCallPart():
                out.append(
                    {
                        "type": "tool_use",
                        "id": sanitize_tool_id(part.id),
                        "name": part.name,
                        "input": parse_arguments(part.arguments_json),
                    }
                )
            case ReasoningPart():
                if part.signature is not None:
                    out.append({"type": "thinking", "thinking": part.text or "", "signature": part.signature})
                elif part.opaque is not None:
                    out.append({"type": "redacted_thinking", "data": part.opaque})
            case _:
                assert_never(part)
    for kept in json_list(load_extra(message, FORMAT).get("blocks"), "provider_extra.blocks"):
        out.insert(min(int(kept["at"]), len(out)), kept["block"])
    return out


def _tool(tool: ToolSpec) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters()}


def _tool_choice(choice: ToolChoice, forced_accepted: bool) -> dict[str, Any]:
    if choice.mode in ("any", "tool") and not forced_accepted:
        return {"type": "auto"}
    if choice.mode == "tool":
        return {"type": "tool", "name": choice.name}
    return {"type": choice.mode}


def decode_response(body: dict[str, Any], identity: str) -> Decoded:
    message = _read_assistant(json_list(body.get("content"), "content"), identity)
    return Decoded(
        message=message.model_copy(update={"model_identity": identity}),
        stop_reason=_STOP.get(str(body.get("stop_reason")), "other"),
        usage=usage_codec.from_anthropic(json_object(body.get("usage") or {}, "usage")),
    )


def _read_assistant(content: list[Any], identity: str) -> AssistantMessage:
    parts: list[AssistantPart] = []
    unknown: list[dict[str, Any]] = []
    for index, raw in enumerate(content):
        block = json_object(raw, "content block")
        kind = block.get("type")
        if kind == "text":
            if str(block.get("text") or "").strip():
                parts.append(TextPart(text=str(block["text"])))
        elif kind == "thinking":
            signature = block.get("signature")
            parts.append(
                ReasoningPart(
                    text=str(block.get("thinking", "")),
                    signature=str(signature) if signature is not None else None,
                    format=FORMAT,
                    model_identity=identity,
                )
            )
        elif kind == "redacted_thinking":
            parts.append(ReasoningPart(opaque=str(block.get("data")), format=FORMAT, model_identity=identity))
        elif kind == "tool_use":
            arguments = canonical_json(json_object(block.get("input", {}), "tool_use.input"))
            parts.append(ToolCallPart(id=str(block["id"]), name=str(block["name"]), arguments_json=arguments))
        else:
            unknown.append({"at": index, "block": block})
    extra = canonical_json({"blocks": unknown}) if unknown else None
    return AssistantMessage(
        parts=tuple(parts), provider_extra=extra, provider_extra_format=FORMAT if unknown else None
    )


def continuation(wire: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any] | None:
    """The request that lets a ``pause_turn`` reply continue: the same body with the paused content as
    the last assistant message, as the API documents ("provide the response back as-is"). ``None`` when
    the reply is not paused."""
    if reply.get("stop_reason") != "pause_turn":
        return None
    content = json_list(reply.get("content"), "content")
    messages = list(json_list(wire.get("messages"), "messages"))
    if messages and messages[-1].get("role") == "assistant":
        messages[-1] = {**messages[-1], "content": [*messages[-1]["content"], *content]}
    else:
        messages.append({"role": "assistant", "content": content})
    return {**wire, "messages": messages}


def merge(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """One reply for a paused turn and its continuation: content in order, the last stop reason, both
    calls' usage added."""
    usage = usage_codec.sum_anthropic(
        json_object(first.get("usage") or {}, "usage"), json_object(second.get("usage") or {}, "usage")
    )
    content = [*json_list(first.get("content"), "content"), *json_list(second.get("content"), "content")]
    return {**second, "content": content, "usage": usage}


def encode_response(
    message: AssistantMessage, stop_reason: StopReason, usage: Usage, *, model: str, response_id: str
) -> dict[str, Any]:
    """A reply as the Messages API sends it (the fake provider speaks through this); ``other`` has no
    Anthropic spelling and goes out as ``null``."""
    return {
        "id": response_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _assistant_blocks(message),
        "stop_reason": _STOP_OUT.get(stop_reason),
        "stop_sequence": None,
        "usage": usage_codec.to_anthropic(usage),
    }


def decode_request(body: dict[str, Any], blob_key_of: BlobKeyOf, identity: str = "request") -> ParsedRequest:
    """Read a request body back into IR (one IR message per wire message, tool results split out)."""
    raw_system = body.get("system", "")
    if isinstance(raw_system, str):
        system = raw_system
    else:
        system = "".join(
            str(json_object(b, "system block").get("text", "")) for b in json_list(raw_system, "s")
        )
    messages: list[Message] = []
    for raw in json_list(body.get("messages"), "messages"):
        item = json_object(raw, "message")
        content = item.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else json_list(content, "c")
        if item.get("role") == "assistant":
            messages.append(_read_assistant(_strip_cache(blocks), identity))
        elif item.get("role") == "user":
            messages.extend(_read_user_message(blocks, blob_key_of))
        else:
            raise WireError("message role must be user or assistant")
    tools = tuple(
        ToolSpec.of(t["name"], t.get("description", ""), t.get("input_schema", {}))
        for t in (json_object(x, "tool") for x in json_list(body.get("tools"), "tools"))
    )
    choice = json_object(body.get("tool_choice") or {"type": "auto"}, "tool_choice")
    mode = choice.get("type")
    return ParsedRequest(
        model=str(body.get("model")),
        system=system,
        messages=tuple(messages),
        tools=tools,
        tool_choice=ToolChoice(mode=mode, name=choice.get("name") if mode == "tool" else None),
        max_output_tokens=body.get("max_tokens"),
        temperature=body.get("temperature"),
        prompt_cache_key=None,
    )


def _strip_cache(blocks: list[Any]) -> list[Any]:
    return [
        {k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, dict) else b for b in blocks
    ]


def _read_user_message(blocks: list[Any], blob_key_of: BlobKeyOf) -> list[Message]:
    out: list[Message] = []
    pending: list[UserPart] = []
    for raw in blocks:
        block = json_object(raw, "content block")
        if block.get("type") == "tool_result":
            if pending:
                out.append(UserMessage(parts=tuple(pending)))
                pending = []
            content = block.get("content", [])
            inner = (
                [{"type": "text", "text": content}] if isinstance(content, str) else json_list(content, "c")
            )
            out.append(
                ToolResultMessage(
                    tool_call_id=str(block["tool_use_id"]),
                    parts=tuple(_read_user_block(json_object(b, "block"), blob_key_of) for b in inner),
                    is_error=bool(block.get("is_error", False)),
                )
            )
        else:
            pending.append(_read_user_block(block, blob_key_of))
    if pending:
        out.append(UserMessage(parts=tuple(pending)))
    return out


def _read_user_block(block: dict[str, Any], blob_key_of: BlobKeyOf) -> UserPart:
    if block.get("type") == "text":
        return TextPart(text=str(block.get("text", "")))
    if block.get("type") == "image":
        source = json_object(block.get("source"), "image.source")
        if source.get("type") != "base64":
            raise WireError("only base64 image sources are read")
        mime = str(source.get("media_type"))
        return ImagePart(blob_key=blob_key_of(mime, str(source.get("data"))), mime=mime)
    raise WireError(f"unknown user block type {str(block.get('type'))[:32]!r}")
