"""The three codecs: IR → wire → IR round trips over realistic cases, and each format's own rules."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

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
    WireFormat,
    canonical_json,
)
from larkbot.llm_gateway.core import anthropic
from larkbot.llm_gateway.core.common import (
    OMITTED_IMAGE_TEXT,
    EncodedImage,
    EncodeOptions,
    dumps,
    image_refs,
    prepare_messages,
    sanitize_tool_id,
)
from larkbot.llm_gateway.core.formats import CODECS

FORMATS: tuple[WireFormat, ...] = ("openai-chat", "anthropic-messages", "responses")
IDENTITY = "id:model-a"
TOOLS = (
    ToolSpec.of(
        "send_message",
        "Send a message",
        {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    ),
    ToolSpec.of(
        "read_image", "Look at an image", {"type": "object", "properties": {"file_id": {"type": "string"}}}
    ),
    ToolSpec.of("end_turn", "Stay silent", {"type": "object", "properties": {}}),
)


def user(*parts: TextPart | ImagePart) -> UserMessage:
    return UserMessage(parts=parts)


def text(value: str) -> TextPart:
    return TextPart(text=value)


def image(key: str, detail: str = "low") -> ImagePart:
    return ImagePart(blob_key=key, mime="image/png", detail=detail)  # type: ignore[arg-type]


def call(call_id: str, name: str, args: dict[str, Any]) -> ToolCallPart:
    return ToolCallPart(id=call_id, name=name, arguments_json=canonical_json(args))


def reasoning(fmt: WireFormat, n: int = 1, identity: str = IDENTITY) -> ReasoningPart:
    if fmt == "anthropic-messages":
        return ReasoningPart(text=f"thinking {n}", signature=f"sig{n}==", format=fmt, model_identity=identity)
    if fmt == "responses":
        return ReasoningPart(
            text=f"summary {n}", opaque=f"enc{n}", item_id=f"rs_{n}", format=fmt, model_identity=identity
        )
    return ReasoningPart(text=f"reasoning {n}", format=fmt, model_identity=identity)


def images_for(messages: tuple[Message, ...]) -> dict[tuple[str, int], EncodedImage]:
    return {
        (key, side): EncodedImage("image/png", base64.b64encode(f"{key}@{side}".encode()).decode())
        for key, side in image_refs(messages)
    }


def blob_key_of(_mime: str, data: str) -> str:
    return base64.b64decode(data).decode().split("@")[0]


def request_of(messages: tuple[Message, ...], **kwargs: Any) -> LLMRequest:
    return LLMRequest(
        request_id="req-1",
        purpose="primary",
        endpoint="main",
        system="You are Lark, a member of this group.",
        messages=messages,
        tools=kwargs.pop("tools", TOOLS),
        tool_choice=kwargs.pop("tool_choice", ToolChoice(mode="any")),
        deadline_ms=1,
        **kwargs,
    )


def conversation(fmt: WireFormat, case: str) -> tuple[Message, ...]:
    """Realistic conversations; assistant parts are in each format's canonical order."""
    first = user(text('<message id="m1" sender="Ann">hello everyone</message>'))
    if case == "plain":
        return (first, AssistantMessage(parts=(text("Hi Ann!"),)), user(text("how are you?")))
    if case == "parallel_tool_calls":
        assistant = AssistantMessage(
            parts=(
                text("Let me look."),
                call("call_a1", "read_image", {"file_id": "m1"}),
                call("call_b2", "send_message", {"text": "one moment"}),
            )
        )
        return (
            first,
            assistant,
            ToolResultMessage(tool_call_id="call_a1", parts=(text("a cat on a sofa"),)),
            ToolResultMessage(tool_call_id="call_b2", parts=(text("sent"),)),
            user(text("late binding: now 2031-05-01 10:00")),
        )
    if case == "images_in_tool_results":
        return (
            user(text("look"), image("blob-1")),
            AssistantMessage(parts=(call("call_1", "read_image", {"file_id": "m1"}),)),
            ToolResultMessage(tool_call_id="call_1", parts=(text("the image:"), image("blob-2", "high"))),
            user(text("what do you see?")),
        )
    if case == "reasoning":
        return (
            first,
            AssistantMessage(parts=(reasoning(fmt, 1), call("call_r", "send_message", {"text": "hey"}))),
            ToolResultMessage(tool_call_id="call_r", parts=(text("sent"),)),
            AssistantMessage(parts=(reasoning(fmt, 2), call("call_e", "end_turn", {}))),
            ToolResultMessage(tool_call_id="call_e", parts=()),
            user(text("next")),
        )
    if case == "empty_text":
        return (first, AssistantMessage(parts=()), user(text("anyone?")))
    raise AssertionError(case)


CASES = ("plain", "parallel_tool_calls", "images_in_tool_results", "reasoning", "empty_text")


def normalized(fmt: WireFormat, messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """What each format can carry: the known, documented losses of a request round trip."""
    out: list[Message] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            if fmt != "openai-chat" and not message.parts:
                continue
            message = message.model_copy(update={"model_identity": None})
        if isinstance(message, ToolResultMessage):
            update: dict[str, Any] = {"requires_follow_up": False}
            if fmt == "openai-chat":
                update["is_error"] = False
            message = message.model_copy(update=update)
        if fmt == "anthropic-messages" and isinstance(message, (UserMessage, ToolResultMessage)):
            parts = tuple(
                p.model_copy(update={"detail": "auto"}) if isinstance(p, ImagePart) else p
                for p in message.parts
            )
            message = message.model_copy(update={"parts": parts})
            if isinstance(message, UserMessage) and out and isinstance(out[-1], UserMessage):
                out[-1] = UserMessage(parts=(*out[-1].parts, *message.parts))
                continue
        out.append(message)
    return tuple(out)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_request_round_trip(fmt: WireFormat, case: str) -> None:
    request = request_of(conversation(fmt, case))
    messages, omitted = prepare_messages(request, fmt=fmt, identity=IDENTITY, max_images=8, replay_turns=3)
    assert omitted == 0
    codec = CODECS[fmt]
    opts = EncodeOptions(model="model-a", model_identity=IDENTITY, images=images_for(messages))
    body = json.loads(dumps(codec.encode_request(request, messages, opts)))
    parsed = codec.decode_request(body, blob_key_of, IDENTITY)
    assert parsed.model == "model-a"
    assert parsed.system == request.system
    assert parsed.tools == request.tools
    assert parsed.tool_choice == request.tool_choice
    assert parsed.messages == normalized(fmt, messages)


def usage_for(fmt: WireFormat) -> Usage:
    if fmt == "anthropic-messages":
        return Usage(input_tokens=5000, output_tokens=120, cache_read_tokens=4000, cache_write_tokens=600)
    return Usage(input_tokens=5000, output_tokens=120, cache_read_tokens=4096, reasoning_tokens=64)


REPLIES: dict[str, tuple[tuple[AssistantPart, ...], StopReason]] = {
    "text": ((text("Hello!"),), "end_turn"),
    "parallel_tool_calls": (
        (call("call_1", "react", {"message_id": "m1", "emoji": "👍"}), call("call_2", "end_turn", {})),
        "tool_use",
    ),
    "refusal": ((text("I can't help with that."),), "refusal"),
    "empty_text": ((), "end_turn"),
    "max_tokens": ((text("cut"),), "max_tokens"),
    "reasoning_then_call": ((), "tool_use"),
}


@pytest.mark.parametrize("case", sorted(REPLIES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_reply_round_trip(fmt: WireFormat, case: str) -> None:
    parts, stop = REPLIES[case]
    if case == "reasoning_then_call":
        parts = (reasoning(fmt), call("call_9", "send_message", {"text": "hi 你好"}))
    message = AssistantMessage(parts=parts)
    codec = CODECS[fmt]
    wire = codec.encode_response(message, stop, usage_for(fmt), model="model-a", response_id="r1")
    decoded = codec.decode_response(json.loads(dumps(wire)), IDENTITY)
    assert decoded.message == message.model_copy(update={"model_identity": IDENTITY})
    assert decoded.stop_reason == stop
    assert decoded.usage == usage_for(fmt)


@pytest.mark.parametrize("fmt", FORMATS)
def test_identical_conversations_give_byte_identical_bodies(fmt: WireFormat) -> None:
    def body() -> bytes:
        messages = conversation(fmt, "reasoning") + conversation(fmt, "images_in_tool_results")
        request = request_of(messages, prompt_cache_key="chat-1", max_output_tokens=800, temperature=0.7)
        prepared, _ = prepare_messages(request, fmt=fmt, identity=IDENTITY, max_images=8, replay_turns=3)
        opts = EncodeOptions("model-a", IDENTITY, images_for(prepared), prompt_cache_key="chat-1")
        return dumps(CODECS[fmt].encode_request(request, prepared, opts))

    first, second = body(), body()
    assert first == second
    assert b"chat-1" in first if fmt != "anthropic-messages" else b"cache_control" in first


@pytest.mark.parametrize("fmt", FORMATS)
def test_appending_messages_never_rewrites_earlier_ones(fmt: WireFormat) -> None:
    base = conversation(fmt, "reasoning")
    longer = (*base, AssistantMessage(parts=(text("ok"),)), user(text("more")))

    def items(messages: tuple[Message, ...]) -> list[bytes]:
        request = request_of(messages)
        prepared, _ = prepare_messages(request, fmt=fmt, identity=IDENTITY, max_images=8, replay_turns=9)
        body = CODECS[fmt].encode_request(request, prepared, EncodeOptions("model-a", IDENTITY, {}))
        listed = body["input"] if fmt == "responses" else body["messages"]
        # Anthropic's moving breakpoint is the one legitimate difference; it is not part of the prompt.
        return [dumps(anthropic_unmarked(m)) for m in listed]

    short, long = items(base), items(longer)
    assert long[: len(short)] == short
    assert len(long) > len(short)


def anthropic_unmarked(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if not isinstance(content, list):
        return message
    blocks = [
        {k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, dict) else b for b in content
    ]
    return {**message, "content": blocks}


def test_anthropic_merges_user_side_messages_and_places_breakpoints() -> None:
    messages = conversation("anthropic-messages", "parallel_tool_calls")
    request = request_of(messages)
    body = anthropic.encode_request(request, messages, EncodeOptions("m", IDENTITY, {}))
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "user"]
    merged = body["messages"][2]["content"]
    assert [b["type"] for b in merged] == ["tool_result", "tool_result", "text"]
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    marked = [
        (i, j)
        for i, m in enumerate(body["messages"])
        for j, b in enumerate(m["content"])
        if "cache_control" in b
    ]
    assert marked == [(1, 2)]  # last block of the second-to-last message
    assert body["tool_choice"] == {"type": "any"}


@pytest.mark.parametrize(
    ("fmt", "mode", "expected"),
    [
        ("openai-chat", ToolChoice(mode="any"), "required"),
        (
            "openai-chat",
            ToolChoice(mode="tool", name="end_turn"),
            {"type": "function", "function": {"name": "end_turn"}},
        ),
        ("openai-chat", ToolChoice(mode="none"), "none"),
        (
            "anthropic-messages",
            ToolChoice(mode="tool", name="end_turn"),
            {"type": "tool", "name": "end_turn"},
        ),
        ("anthropic-messages", ToolChoice(), {"type": "auto"}),
        ("responses", ToolChoice(mode="any"), "required"),
        ("responses", ToolChoice(mode="tool", name="end_turn"), {"type": "function", "name": "end_turn"}),
    ],
)
def test_tool_choice_per_format(fmt: WireFormat, mode: ToolChoice, expected: Any) -> None:
    messages = (user(text("hi")),)
    body = CODECS[fmt].encode_request(
        request_of(messages, tool_choice=mode), messages, EncodeOptions("m", IDENTITY, {})
    )
    assert body["tool_choice"] == expected


def test_tool_result_images_follow_each_format() -> None:
    messages = conversation("openai-chat", "images_in_tool_results")
    request = request_of(messages)
    opts = EncodeOptions("m", IDENTITY, images_for(messages))
    chat = CODECS["openai-chat"].encode_request(request, messages, opts)["messages"]
    tool = next(m for m in chat if m["role"] == "tool")
    assert tool["content"] == "the image:"  # tool messages carry text only
    after = chat[chat.index(tool) + 1]
    assert after["role"] == "user"
    assert after["content"][0] == {"type": "text", "text": "Images from tool call call_1:"}
    assert after["content"][1]["image_url"]["detail"] == "high"
    claude = CODECS["anthropic-messages"].encode_request(request, messages, opts)["messages"]
    result = claude[2]["content"][0]
    assert result["type"] == "tool_result"
    assert [b["type"] for b in result["content"]] == ["text", "image"]
    items = CODECS["responses"].encode_request(request, messages, opts)["input"]
    output = next(i for i in items if i["type"] == "function_call_output")["output"]
    assert [p["type"] for p in output] == ["input_text", "input_image"]


def test_tool_ids_are_sanitized_deterministically_for_anthropic_only() -> None:
    odd = "call:abc/1.2"
    assert sanitize_tool_id(odd) == sanitize_tool_id(odd)
    assert sanitize_tool_id(odd) != sanitize_tool_id("call_abc/1.2")
    assert sanitize_tool_id("toolu_01ABC-x") == "toolu_01ABC-x"
    messages = (
        user(text("hi")),
        AssistantMessage(parts=(call(odd, "end_turn", {}),)),
        ToolResultMessage(tool_call_id=odd, parts=(text("done"),)),
        user(text("next")),
    )
    request = request_of(messages)
    body = anthropic.encode_request(request, messages, EncodeOptions("m", IDENTITY, {}))
    wire_id = body["messages"][1]["content"][0]["id"]
    assert wire_id == sanitize_tool_id(odd) != odd
    assert body["messages"][2]["content"][0]["tool_use_id"] == wire_id
    assert messages[1].parts[0].id == odd  # type: ignore[union-attr]  # the IR is untouched
    chat = CODECS["openai-chat"].encode_request(request, messages, EncodeOptions("m", IDENTITY, {}))
    assert chat["messages"][2]["tool_calls"][0]["id"] == odd


@pytest.mark.parametrize("fmt", FORMATS)
def test_reasoning_replays_only_to_same_model_and_newest_turns(fmt: WireFormat) -> None:
    other = "id:model-b"
    messages: tuple[Message, ...] = (
        user(text("a")),
        AssistantMessage(parts=(reasoning(fmt, 1), text("old"))),
        user(text("b")),
        AssistantMessage(parts=(reasoning(fmt, 2, identity=other), text("other model"))),
        user(text("c")),
        AssistantMessage(parts=(reasoning(fmt, 3), text("recent"))),
        user(text("d")),
        AssistantMessage(parts=(reasoning(fmt, 4), call("call_x", "read_image", {}))),
        ToolResultMessage(tool_call_id="call_x", parts=(text("seen"),)),
    )
    request = request_of(messages)
    prepared, _ = prepare_messages(request, fmt=fmt, identity=IDENTITY, max_images=8, replay_turns=2)
    kept = [
        p
        for m in prepared
        if isinstance(m, AssistantMessage)
        for p in m.parts
        if isinstance(p, ReasoningPart)
    ]
    assert [p.text for p in kept] == [reasoning(fmt, 3).text, reasoning(fmt, 4).text]
    prepared_zero, _ = prepare_messages(request, fmt=fmt, identity=IDENTITY, max_images=8, replay_turns=0)
    kept_zero = [
        p
        for m in prepared_zero
        if isinstance(m, AssistantMessage)
        for p in m.parts
        if isinstance(p, ReasoningPart)
    ]
    assert [p.text for p in kept_zero] == [reasoning(fmt, 4).text]  # the open tool chain keeps its reasoning
    other_fmt: WireFormat = "responses" if fmt != "responses" else "openai-chat"
    prepared_other, _ = prepare_messages(
        request, fmt=other_fmt, identity=IDENTITY, max_images=8, replay_turns=9
    )
    assert not any(
        isinstance(p, ReasoningPart)
        for m in prepared_other
        if isinstance(m, AssistantMessage)
        for p in m.parts
    )
    assert messages[1].parts[0] == reasoning(fmt, 1)  # type: ignore[union-attr]  # copy-on-write


@pytest.mark.parametrize(
    ("fmt", "reply", "wire_check"),
    [
        (
            "openai-chat",
            {
                "choices": [
                    {
                        "message": {
                            "role": "assistant",
                            "content": "hi",
                            "audio": {"id": "aud_1"},
                            "annotations": [],
                        },
                        "finish_reason": "stop",
                    }
                ]
            },
            lambda m: m["messages"][2]["audio"] == {"id": "aud_1"} and "annotations" not in m["messages"][2],
        ),
        (
            "anthropic-messages",
            {
                "content": [
                    {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"q": "x"}},
                    {"type": "text", "text": "found"},
                ],
                "stop_reason": "end_turn",
            },
            lambda m: m["messages"][1]["content"][0]["type"] == "server_tool_use",
        ),
        (
            "responses",
            {
                "status": "completed",
                "output": [
                    {"type": "web_search_call", "id": "ws_1", "status": "completed"},
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": "found"}],
                    },
                ],
            },
            lambda m: m["input"][1]["type"] == "web_search_call",
        ),
    ],
)
def test_unknown_provider_fields_replay_to_the_same_format_only(
    fmt: WireFormat, reply: dict[str, Any], wire_check: Any
) -> None:
    decoded = CODECS[fmt].decode_response(reply, IDENTITY)
    assert decoded.message.provider_extra_format == fmt
    messages = (user(text("q")), decoded.message, user(text("next")))
    request = request_of(messages, tools=(), tool_choice=ToolChoice())
    prepared, _ = prepare_messages(request, fmt=fmt, identity=IDENTITY, max_images=8, replay_turns=3)
    assert wire_check(CODECS[fmt].encode_request(request, prepared, EncodeOptions("m", IDENTITY, {})))
    for other in FORMATS:
        if other != fmt:
            prepared, _ = prepare_messages(
                request, fmt=other, identity=IDENTITY, max_images=8, replay_turns=3
            )
            assert prepared[1].provider_extra is None  # type: ignore[union-attr]


def test_max_images_keeps_the_newest() -> None:
    messages = (
        user(text("one"), image("b1")),
        user(image("b2"), image("b3")),
        ToolResultMessage(tool_call_id="c", parts=(image("b4"),)),
    )
    request = request_of(messages, tools=(), tool_choice=ToolChoice())
    prepared, omitted = prepare_messages(
        request, fmt="openai-chat", identity=IDENTITY, max_images=2, replay_turns=3
    )
    assert omitted == 2
    assert [k for k, _ in image_refs(prepared)] == ["b3", "b4"]
    assert prepared[0].parts[1] == text(OMITTED_IMAGE_TEXT)  # type: ignore[union-attr]
    assert (
        prepare_messages(request, fmt="openai-chat", identity=IDENTITY, max_images=0, replay_turns=3)[1] == 4
    )
