"""What real providers and OpenAI-compatible servers send, through the codecs (issue 13).

Every body comes from ``fixtures/provider_bodies.json`` (recorded replies, usage figures and error bodies,
each with its source). One section per class of problem: tool calls without ids, reasoning dialects,
usage accounting, the Responses API, Anthropic replay, error classes, model capabilities.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from larkbot.canonical.llm import (
    AssistantMessage,
    LLMRequest,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolChoice,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
    WireFormat,
)
from larkbot.llm_gateway.core import anthropic, openai_chat, responses, usage
from larkbot.llm_gateway.core.capabilities import refused_capability
from larkbot.llm_gateway.core.common import (
    Accepts,
    EncodeOptions,
    dumps,
    prepare_messages,
)
from larkbot.llm_gateway.core.error_bodies import context_length_body
from larkbot.llm_gateway.core.errors import (
    classify,
    context_numbers,
    error_info,
    provider_message,
    retry_after_s,
)
from larkbot.llm_gateway.core.formats import CODECS
from larkbot.llm_gateway.errors import CallFailed
from larkbot.runtime.config import LlmEndpoint, family_accepts

FIXTURES: dict[str, Any] = json.loads(
    (Path(__file__).parent / "fixtures" / "provider_bodies.json").read_text(encoding="utf-8")
)
SAME = "openai-chat:127.0.0.1:11434/qwen3:8b"
OTHER = "openai-chat:api.deepseek.com/deepseek-reasoner"
TOOLS = (
    ToolSpec.of("react", "React", {"type": "object"}),
    ToolSpec.of("weather", "Weather", {"type": "object"}),
    ToolSpec.of("end_turn", "Stay silent", {"type": "object"}),
)


def reply(name: str) -> dict[str, Any]:
    body: dict[str, Any] = copy.deepcopy(FIXTURES["replies"][name]["body"])
    return body


def user(text: str) -> UserMessage:
    return UserMessage(parts=(TextPart(text=text),))


def request_of(messages: tuple[Message, ...], **kwargs: Any) -> LLMRequest:
    return LLMRequest(
        request_id="r1",
        purpose="primary",
        endpoint="main",
        system="You are Lark.",
        messages=messages,
        tools=kwargs.pop("tools", TOOLS),
        tool_choice=kwargs.pop("tool_choice", ToolChoice()),
        deadline_ms=1,
        **kwargs,
    )


def encode(
    fmt: WireFormat,
    messages: tuple[Message, ...],
    *,
    identity: str,
    replay_turns: int = 3,
    replay: bool = True,
    accepts: Accepts | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    request = request_of(messages, **kwargs)
    prepared, _ = prepare_messages(
        request, fmt=fmt, identity=identity, max_images=8, replay_turns=replay_turns, replay=replay
    )
    opts = EncodeOptions("m", identity, {}, accepts=accepts or Accepts())
    body: dict[str, Any] = json.loads(dumps(CODECS[fmt].encode_request(request, prepared, opts)))
    return body


def assistant_wire(body: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = next(m for m in body["messages"] if m["role"] == "assistant")
    return found


# --- 1. Tool calls without ids -----------------------------------------------------------------------


def test_a_tool_call_without_id_gets_a_deterministic_id() -> None:
    first = openai_chat.decode_response(reply("gemini_empty_tool_id"), SAME)
    again = openai_chat.decode_response(reply("gemini_empty_tool_id"), SAME)
    call = first.message.parts[0]
    assert isinstance(call, ToolCallPart)
    assert call.id.startswith("call_")
    assert len(call.id) == 29
    assert (call.name, call.arguments_json) == (
        "identify_record_by_name",
        '{"recordName":"acme account","objectApiName":"Account"}',
    )
    assert first == again  # the same reply always yields the same id
    other_reply = reply("gemini_empty_tool_id") | {"id": "another-response"}
    other = openai_chat.decode_response(other_reply, SAME).message.parts[0]
    assert isinstance(other, ToolCallPart)
    assert other.id != call.id  # two replies never share one
    assert first.stop_reason == "tool_use"

    def replayed() -> bytes:
        messages = (
            user("find acme"),
            first.message,
            ToolResultMessage(tool_call_id=call.id, parts=(TextPart(text="found"),)),
        )
        return dumps(encode("openai-chat", messages, identity=SAME))

    assert replayed() == replayed()
    body = json.loads(replayed())
    assert body["messages"][2]["tool_calls"][0]["id"] == call.id
    assert body["messages"][3] == {"role": "tool", "tool_call_id": call.id, "content": "found"}


def test_a_function_call_without_call_id_gets_one_on_responses_too() -> None:
    body = reply("responses_phases")
    body["output"][2]["call_id"] = ""
    decoded = responses.decode_response(body, "responses:api.openai.com/gpt-5.3-codex")
    calls = [p for p in decoded.message.parts if isinstance(p, ToolCallPart)]
    assert calls[0].id.startswith("call_")
    assert responses.decode_response(copy.deepcopy(body), "responses:x/y").message.parts[2] == calls[0]


def test_gemini_thought_signatures_go_back_on_their_tool_call_to_the_same_model_only() -> None:
    decoded = openai_chat.decode_response(reply("gemini3_thought_signature"), SAME)
    call = decoded.message.parts[0]
    assert isinstance(call, ToolCallPart)
    chain = (
        user("weather?"),
        decoded.message,
        ToolResultMessage(tool_call_id=call.id, parts=(TextPart(text="sun"),)),
    )
    wire_call = assistant_wire(encode("openai-chat", chain, identity=SAME))["tool_calls"][0]
    assert wire_call["extra_content"] == {"google": {"thought_signature": "CiQBcsjafE7ZmRgCvt0Y2Yp0"}}
    other_call = assistant_wire(encode("openai-chat", chain, identity=OTHER))["tool_calls"][0]
    assert set(other_call) == {"id", "type", "function"}


# --- 2. Reasoning dialects of openai-chat ---------------------------------------------------------------

DIALECTS = [
    ("ollama_reasoning", "reasoning", "The user wants a short reason. Multiplexing, header compression."),
    ("groq_reasoning", "reasoning", "Need to call nothing; answer briefly."),
    (
        "openrouter_reasoning_details",
        "reasoning",
        "The user is asking for weather information for Florence, Italy.",
    ),
    ("deepseek_reasoning_content", "reasoning_content", "Compare 9.11 and 9.8: 0.11 < 0.8."),
    ("vllm_reasoning", "reasoning", 'We need to answer: "What is the Henry Jackson Society?"'),
]


@pytest.mark.parametrize(("name", "field", "text"), DIALECTS, ids=[d[0] for d in DIALECTS])
def test_every_reasoning_dialect_is_reasoning(name: str, field: str, text: str) -> None:
    decoded = openai_chat.decode_response(reply(name), SAME)
    thought = decoded.message.parts[0]
    assert thought == ReasoningPart(text=text, format="openai-chat", model_identity=SAME)
    extra = json.loads(decoded.message.provider_extra or "{}")
    # Recognised fields are never "unknown": they cannot leak to another model as provider extras.
    assert not {"reasoning", "reasoning_content"} & set(extra.get("message", {}))


@pytest.mark.parametrize(("name", "field", "text"), DIALECTS, ids=[d[0] for d in DIALECTS])
def test_reasoning_goes_back_in_its_own_field_to_the_same_model_only(
    name: str, field: str, text: str
) -> None:
    decoded = openai_chat.decode_response(reply(name), SAME)
    chain = (user("q"), decoded.message, user("next"))
    same = assistant_wire(encode("openai-chat", chain, identity=SAME))
    assert same[field] == text
    assert not {"reasoning", "reasoning_content"} - {field} & set(same)
    other = assistant_wire(encode("openai-chat", chain, identity=OTHER))
    assert set(other) == {"role", "content"} | ({"tool_calls"} if "tool_calls" in same else set())
    if name == "openrouter_reasoning_details":
        assert same["reasoning_details"][0]["signature"] == "EpQECkYIBxgCKkDf2d7Q"
        assert "reasoning_details" not in other


def test_reasoning_and_provider_fields_follow_the_newest_turns_rule() -> None:
    old = openai_chat.decode_response(reply("openrouter_reasoning_details"), SAME).message
    call = old.parts[1]
    assert isinstance(call, ToolCallPart)
    recent = openai_chat.decode_response(reply("ollama_reasoning"), SAME).message
    messages = (
        user("weather?"),
        old,
        ToolResultMessage(tool_call_id=call.id, parts=(TextPart(text="sun"),)),
        user("and http/2?"),
        recent,
        user("thanks"),
    )
    body = encode("openai-chat", messages, identity=SAME, replay_turns=1)
    first, second = (m for m in body["messages"] if m["role"] == "assistant")
    assert not {"reasoning", "reasoning_details"} & set(first)  # beyond the newest turn
    assert second["reasoning"].startswith("The user wants")
    assert encode("openai-chat", messages, identity=SAME, replay_turns=1) == body


def test_an_endpoint_refusing_replay_gets_neither_reasoning_nor_provider_fields() -> None:
    decoded = openai_chat.decode_response(reply("openrouter_reasoning_details"), SAME)
    call = decoded.message.parts[1]
    assert isinstance(call, ToolCallPart)
    chain = (user("q"), decoded.message, ToolResultMessage(tool_call_id=call.id, parts=(TextPart(text="x"),)))
    wire = assistant_wire(encode("openai-chat", chain, identity=SAME, replay=False))
    assert set(wire) == {"role", "content", "tool_calls"}


def test_provider_extras_stored_flat_before_the_layout_still_replay() -> None:
    legacy = AssistantMessage(
        parts=(TextPart(text="hi"),),
        model_identity=SAME,
        provider_extra='{"audio":{"id":"aud_1"}}',
        provider_extra_format="openai-chat",
    )
    wire = assistant_wire(encode("openai-chat", (user("q"), legacy, user("n")), identity=SAME))
    assert wire == {"role": "assistant", "content": "hi", "audio": {"id": "aud_1"}}


# --- 3. Usage accounting ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "reader", "expected"),
    [
        (
            "openrouter",
            usage.from_openai_chat,
            Usage(input_tokens=194, output_tokens=2, cache_write_tokens=100, reasoning_tokens=0),
        ),
        (
            "openai_cache_write",
            usage.from_openai_chat,
            Usage(input_tokens=9657, output_tokens=78, cache_write_tokens=9654, reasoning_tokens=37),
        ),
        (
            "openai_responses_cache_write",
            usage.from_responses,
            Usage(input_tokens=9658, output_tokens=42, cache_write_tokens=9655, reasoning_tokens=25),
        ),
        # total = prompt + completion + reasoning: reasoning is added to the output.
        (
            "xai",
            usage.from_openai_chat,
            Usage(
                input_tokens=10120, output_tokens=1499 + 2809, cache_read_tokens=128, reasoning_tokens=2809
            ),
        ),
        ("xai_mini", usage.from_openai_chat, Usage(input_tokens=12, output_tokens=387, reasoning_tokens=386)),
        (
            "gemini_compat",
            usage.from_openai_chat,
            Usage(input_tokens=21, output_tokens=60, reasoning_tokens=60),
        ),
        # Issue 12: no reasoning field, only the total shows the thinking: the difference is output.
        (
            "gemini_compat_hidden_thinking",
            usage.from_openai_chat,
            Usage(input_tokens=20, output_tokens=424 + 572, reasoning_tokens=572),
        ),
        (
            "anthropic_thinking",
            usage.from_anthropic,
            Usage(input_tokens=5, output_tokens=11, reasoning_tokens=7),
        ),
    ],
)
def test_recorded_usage_figures_normalize(name: str, reader: Any, expected: Usage) -> None:
    raw = FIXTURES["usage"][name]["usage"]
    found = reader(raw)
    assert found == expected
    total = raw.get("total_tokens")
    if total is not None:  # the normalized figures add up to what the provider billed
        assert found.input_tokens + found.output_tokens == total


def test_deepseek_reasoning_stays_inside_its_completion_count() -> None:
    decoded = openai_chat.decode_response(reply("deepseek_reasoning_content"), SAME)
    assert decoded.usage == Usage(input_tokens=15, output_tokens=220, reasoning_tokens=200)


@pytest.mark.parametrize("style", ["openai", "xai", "gemini"])
def test_the_fake_speaks_each_usage_style_and_it_reads_back(style: Any) -> None:
    figures = Usage(
        input_tokens=3000,
        output_tokens=500,
        cache_read_tokens=1000,
        cache_write_tokens=800,
        reasoning_tokens=300,
    )
    assert usage.from_openai_chat(usage.to_openai_chat(figures, style)) == figures
    assert usage.from_responses(usage.to_responses(figures)) == figures
    claude = Usage(
        input_tokens=3000,
        output_tokens=500,
        cache_read_tokens=1000,
        cache_write_tokens=800,
        reasoning_tokens=300,
    )
    assert usage.from_anthropic(usage.to_anthropic(claude)) == claude


# --- 4. Responses API --------------------------------------------------------------------------------------

RESPONSES_ID = "responses:127.0.0.1:8000/openai/gpt-oss-120b"


def test_reasoning_text_content_is_the_reasoning_and_goes_back_as_content() -> None:
    decoded = responses.decode_response(reply("responses_reasoning_text"), RESPONSES_ID)
    thought, answer = decoded.message.parts
    assert thought == ReasoningPart(
        text="I decided to reply using Taylor Swift lyrics.",
        item_id="rs_3d7c1f0e9a8b4c2d",
        format="responses",
        model_identity=RESPONSES_ID,
    )
    assert answer == TextPart(text="It's a love story.")
    assert decoded.usage == Usage(input_tokens=81, output_tokens=40, reasoning_tokens=28)
    body = encode(
        "responses", (user("Its a love story?"), decoded.message, user("more")), identity=RESPONSES_ID
    )
    assert body["input"][1] == {
        "type": "reasoning",
        "id": "rs_3d7c1f0e9a8b4c2d",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": "I decided to reply using Taylor Swift lyrics."}],
    }
    other = encode(
        "responses", (user("q"), decoded.message, user("more")), identity="responses:api.openai.com/gpt-5"
    )
    assert [i["type"] for i in other["input"]] == ["message", "message", "message"]


def test_message_phases_survive_replay_and_never_merge() -> None:
    identity = "responses:api.openai.com/gpt-5.3-codex"
    decoded = responses.decode_response(reply("responses_phases"), identity)
    assert [p.kind for p in decoded.message.parts] == ["reasoning", "text", "tool_call", "text"]
    call = decoded.message.parts[2]
    assert isinstance(call, ToolCallPart)
    chain = (
        user("what is in m1?"),
        decoded.message,
        ToolResultMessage(tool_call_id=call.id, parts=(TextPart(text="a cat"),)),
    )
    items = encode("responses", chain, identity=identity)["input"]
    messages = [i for i in items if i["type"] == "message" and i["role"] == "assistant"]
    assert [(m["content"][0]["text"], m.get("phase")) for m in messages] == [
        ("Checking the chat history first.", "commentary"),
        ("It is a cat.", "final_answer"),
    ]
    assert [i["type"] for i in items] == [
        "message",
        "reasoning",
        "message",
        "function_call",
        "message",
        "function_call_output",
    ]
    # Another model gets the text, still as two messages, without the phases.
    others = encode("responses", chain, identity="responses:api.openai.com/gpt-5")["input"]
    assert [m.get("phase") for m in others if m["type"] == "message" and m["role"] == "assistant"] == [
        None,
        None,
    ]


@pytest.mark.parametrize(
    ("error", "category"),
    [
        (
            {"code": "server_error", "message": "The server had an error while processing your request."},
            "transient",
        ),
        ({"code": "rate_limit_exceeded", "message": "Rate limit reached."}, "transient"),
        ({"code": "invalid_prompt", "message": "Invalid prompt: flagged."}, "invalid_request"),
        ({"code": "image_too_large", "message": "Image too large."}, "invalid_request"),
        (
            {"code": "context_length_exceeded", "message": "Your input exceeds the context window."},
            "context_length",
        ),
        ({"code": "something_new", "message": "?"}, "permanent"),
    ],
)
def test_a_failed_response_is_a_failure_of_its_kind(error: dict[str, str], category: str) -> None:
    body = responses_object("failed", error=error)
    failure = CODECS["responses"].failed(body)
    assert isinstance(failure, CallFailed)
    assert failure.category == category
    assert error["code"] in str(failure)
    with pytest.raises(CallFailed):
        responses.decode_response(body, RESPONSES_ID)
    assert CODECS["responses"].failed(reply("responses_phases")) is None


@pytest.mark.parametrize(
    ("reason", "stop"),
    [("max_output_tokens", "max_tokens"), ("content_filter", "refusal"), ("other", "other")],
)
def test_an_incomplete_response_maps_its_reason(reason: str, stop: str) -> None:
    body = responses_object("incomplete", incomplete_details={"reason": reason})
    assert responses.decode_response(body, RESPONSES_ID).stop_reason == stop


def responses_object(status: str, **fields: Any) -> dict[str, Any]:
    """A Responses API object as openai-python's ``Response`` shapes it, with ``status`` and its field."""
    return {
        "id": "resp_failed_1",
        "object": "response",
        "created_at": 1762400000,
        "model": "gpt-5",
        "status": status,
        "error": None,
        "incomplete_details": None,
        "output": [],
        "usage": None,
        **fields,
    }


# --- 5. Anthropic replay -----------------------------------------------------------------------------------

CLAUDE = "anthropic-messages:api.anthropic.com/claude-sonnet-4-6"


def test_whitespace_only_text_is_dropped_on_both_sides() -> None:
    decoded = anthropic.decode_response(reply("anthropic_whitespace_text"), CLAUDE)
    assert [p.kind for p in decoded.message.parts] == ["reasoning", "tool_call"]
    call = decoded.message.parts[1]
    assert isinstance(call, ToolCallPart)
    stored = decoded.message.model_copy(
        update={"parts": (decoded.message.parts[0], TextPart(text=" \n\t"), call)}
    )  # e.g. replayed from an older record, or another format's whitespace
    chain = (
        UserMessage(parts=(TextPart(text="hi"), TextPart(text="\n"))),
        stored,
        ToolResultMessage(tool_call_id=call.id, parts=(TextPart(text="  "),)),
        user("next"),
    )
    body = encode("anthropic-messages", chain, identity=CLAUDE)
    texts = [b["text"] for m in body["messages"] for b in m["content"] if b["type"] == "text"]
    assert texts == ["hi", "next"]
    assert [b["type"] for b in body["messages"][1]["content"]] == ["thinking", "tool_use"]
    assert "content" not in body["messages"][2]["content"][0]  # the whitespace-only result is empty


def test_pause_turn_continues_with_the_paused_content_and_merges() -> None:
    paused = reply("anthropic_pause_turn")
    wire = encode("anthropic-messages", (user("what is a lark?"),), identity=CLAUDE)
    follow = anthropic.continuation(wire, paused)
    assert follow is not None
    assert follow["messages"][:-1] == wire["messages"]
    assert follow["messages"][-1] == {"role": "assistant", "content": paused["content"]}
    assert anthropic.continuation(wire, reply("anthropic_pause_continued")) is None
    merged = anthropic.merge(paused, reply("anthropic_pause_continued"))
    decoded = anthropic.decode_response(merged, CLAUDE)
    assert decoded.stop_reason == "end_turn"
    assert [p.kind for p in decoded.message.parts] == ["text", "text"]
    assert decoded.usage == Usage(input_tokens=410 + 530 + 4000, output_tokens=85, cache_read_tokens=4000)
    blocks = json.loads(decoded.message.provider_extra or "{}")["blocks"]
    assert [b["block"]["type"] for b in blocks] == ["server_tool_use", "web_search_tool_result"]
    # Still paused when the continuations ran out: "other", never a silent end of turn.
    assert anthropic.decode_response(paused, CLAUDE).stop_reason == "other"


@pytest.mark.parametrize("fmt", ["openai-chat", "anthropic-messages", "responses"])
def test_forced_tool_choice_and_temperature_only_where_accepted(fmt: WireFormat) -> None:
    messages = (user("hi"),)
    refusing = Accepts(temperature=False, forced_tool_choice=False)
    for choice in (ToolChoice(mode="any"), ToolChoice(mode="tool", name="end_turn")):
        body = encode(fmt, messages, identity="x", accepts=refusing, tool_choice=choice, temperature=0.4)
        assert body["tool_choice"] == ({"type": "auto"} if fmt == "anthropic-messages" else "auto")
        assert "temperature" not in body
    kept = encode(fmt, messages, identity="x", tool_choice=ToolChoice(mode="any"), temperature=0.4)
    assert kept["temperature"] == 0.4
    assert kept["tool_choice"] == ({"type": "any"} if fmt == "anthropic-messages" else "required")
    none = encode(fmt, messages, identity="x", accepts=refusing, tool_choice=ToolChoice(mode="none"))
    assert none["tool_choice"] == ({"type": "none"} if fmt == "anthropic-messages" else "none")


# --- 6. Error classes by meaning ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", FIXTURES["errors"], ids=[e["name"] for e in FIXTURES["errors"]])
def test_recorded_errors_are_classified_by_meaning(case: dict[str, Any]) -> None:
    body = json.dumps(case["body"]).encode()
    assert classify(case["status"], error_info(body), case["headers"]) == case["category"]
    assert provider_message(body)  # every dialect yields the provider's own words


@pytest.mark.parametrize("fmt", ["openai-chat", "anthropic-messages", "responses"])
@pytest.mark.parametrize("dialect", ["openai", "deepseek", "vllm", "tpm"])
def test_the_fakes_context_length_bodies_classify_as_context_length(fmt: WireFormat, dialect: Any) -> None:
    status, body = context_length_body(fmt, 70000, 65536, dialect)
    assert classify(status, error_info(json.dumps(body).encode()), {}) == "context_length"


#: What each recorded context refusal states: (window, input) in the model's tokens.
CONTEXT_NUMBERS = {
    "openai context_length_exceeded (chathub-dev/chathub#126)": (4097, 4294),
    "anthropic prompt is too long (anthropics/claude-code#12186)": (200000, 208310),
    "anthropic input + max_tokens over the limit (continuedev/continue#6080)": (200000, 199759),
    "deepseek, code only invalid_request_error (NoFxAiOS/nofx#1278)": (131072, 133980),
    "vllm flat object:error body (THUDM/LongBench#104)": (131072, 351430),
    "openrouter endpoint context (continuedev/continue#10690)": (163840, 238917),
    "responses api context window (dyad-sh/dyad#1672)": (None, None),
    "openai 429 request too large for TPM (TheR1D/shell_gpt#653)": (30000, 31538),
    "xai maximum prompt length (cline/cline#3120)": (131072, 136973),
    "gemini list-wrapped token count (google-gemini/gemini-cli#4692)": (1048576, 2845475),
    "ollama input exceeds context (nano-step/nano-brain#208)": (None, None),
    "groq 413 request too large for TPM (figures: agent0ai/agent-zero#347)": (6000, 7591),
}


def test_recorded_context_refusals_yield_the_window_and_input_they_state() -> None:
    cases = [e for e in FIXTURES["errors"] if e["category"] == "context_length"]
    assert {e["name"] for e in cases} == set(CONTEXT_NUMBERS)
    for case in cases:
        message = error_info(json.dumps(case["body"]).encode()).message
        assert context_numbers(message) == CONTEXT_NUMBERS[case["name"]], case["name"]
    for fmt, dialect in (
        ("openai-chat", "openai"),
        ("openai-chat", "vllm"),
        ("anthropic-messages", "openai"),
    ):
        _status, body = context_length_body(fmt, 70000, 65536, dialect)  # type: ignore[arg-type]
        assert context_numbers(error_info(json.dumps(body).encode()).message) == (65536, 70000)
    assert context_numbers("provider answered HTTP 400: bad request") == (None, None)


def test_retry_after_honours_every_hint() -> None:
    now = 1_749_556_800.0  # 2025-06-10T12:00:00Z
    assert retry_after_s({"retry-after-ms": "250", "retry-after": "9"}, now, 429) == 0.25
    assert retry_after_s({"Retry-After": "3"}, now, 429) == 3.0
    anthropic_headers = {
        "anthropic-ratelimit-requests-remaining": "49",
        "anthropic-ratelimit-requests-reset": "2025-06-10T12:00:01Z",
        "anthropic-ratelimit-input-tokens-remaining": "0",
        "anthropic-ratelimit-input-tokens-reset": "2025-06-10T12:00:30Z",
        "anthropic-ratelimit-output-tokens-remaining": "0",
        "anthropic-ratelimit-output-tokens-reset": "2025-06-10T12:00:12Z",
    }
    assert retry_after_s(anthropic_headers, now, 429) == 30.0  # the latest exhausted limit
    assert retry_after_s(anthropic_headers, now, 500) is None  # resets explain 429s only
    openai_headers = {
        "x-ratelimit-remaining-requests": "59",
        "x-ratelimit-reset-requests": "1s",
        "x-ratelimit-remaining-tokens": "0",
        "x-ratelimit-reset-tokens": "6m0s",
    }
    assert retry_after_s(openai_headers, now, 429) == 360.0
    assert (
        retry_after_s({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "20ms"}, now, 429)
        == 0.02
    )
    assert (
        retry_after_s({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "soon"}, now, 429)
        is None
    )
    assert retry_after_s({}, now, 429) is None


# --- 7. Model capabilities ---------------------------------------------------------------------------------


@pytest.mark.parametrize("case", FIXTURES["refusals"], ids=[r["name"] for r in FIXTURES["refusals"]])
def test_a_refused_parameter_is_named_and_turned_off(case: dict[str, Any]) -> None:
    info = error_info(json.dumps(case["body"]).encode())
    found = refused_capability(case["format"], info, case["sent"], Accepts())
    assert found is not None
    what, adjusted = found
    assert what == case["refused"]
    assert adjusted != Accepts()
    # Not in the body: nothing to take out, no resend.
    absent = {k: v for k, v in case["sent"].items() if k not in ("max_tokens", "temperature", "tool_choice")}
    absent["messages"] = []
    assert refused_capability(case["format"], info, absent, Accepts()) is None


def test_a_context_error_is_never_taken_for_a_refused_parameter() -> None:
    for case in FIXTURES["errors"]:
        if case["category"] == "context_length":
            info = error_info(json.dumps(case["body"]).encode())
            sent = {"max_tokens": 100, "temperature": 0.5, "tool_choice": "required", "messages": []}
            assert refused_capability("openai-chat", info, sent, Accepts()) is None, case["name"]


@pytest.mark.parametrize(
    ("fmt", "model", "base_url", "extra", "expected"),
    [
        (
            "openai-chat",
            "gpt-5-mini",
            "https://api.openai.com/v1",
            {},
            ("max_completion_tokens", False, True, True),
        ),
        ("openai-chat", "o3", "https://api.openai.com/v1", {}, ("max_completion_tokens", False, True, True)),
        (
            "responses",
            "gpt-5.3-codex",
            "https://api.openai.com/v1",
            {},
            ("max_completion_tokens", False, True, True),
        ),
        (
            "openai-chat",
            "openai/o4-mini",
            "https://openrouter.ai/api/v1",
            {},
            ("max_completion_tokens", False, True, True),
        ),
        ("openai-chat", "gpt-4.1-mini", "https://api.openai.com/v1", {}, ("max_tokens", True, True, True)),
        ("openai-chat", "qwen3:8b", "http://127.0.0.1:11434/v1", {}, ("max_tokens", True, True, True)),
        (
            "openai-chat",
            "deepseek-reasoner",
            "https://api.deepseek.com",
            {},
            ("max_tokens", False, False, True),
        ),
        (
            "openai-chat",
            "openai/gpt-oss-120b",
            "https://api.groq.com/openai/v1",
            {},
            ("max_tokens", True, True, False),
        ),
        (
            "anthropic-messages",
            "claude-sonnet-4-5",
            "https://api.anthropic.com/v1",
            {},
            ("max_tokens", True, True, True),
        ),
        (
            "anthropic-messages",
            "claude-opus-4-6",
            "https://api.anthropic.com/v1",
            {"thinking": {"type": "adaptive"}},
            ("max_tokens", False, False, True),
        ),
        (
            "anthropic-messages",
            "claude-sonnet-4-5",
            "https://api.anthropic.com/v1",
            {"thinking": {"type": "enabled", "budget_tokens": 2048}},
            ("max_tokens", False, False, True),
        ),
    ],
)
def test_family_defaults(
    fmt: str, model: str, base_url: str, extra: dict[str, Any], expected: tuple[str, bool, bool, bool]
) -> None:
    found = family_accepts(fmt, model, base_url, extra)
    assert (
        found["max_tokens_field"],
        found["temperature"],
        found["forced_tool_choice"],
        found["replay_reasoning"],
    ) == expected


def test_configuration_overrides_the_family() -> None:
    endpoint = LlmEndpoint(
        format="openai-chat",
        base_url="https://api.openai.com/v1",
        model="gpt-5",
        accepts={"max_tokens_field": "max_tokens", "replay_reasoning": False},  # type: ignore[arg-type]
    )
    resolved = endpoint.resolved_accepts()
    assert (resolved.max_tokens_field, resolved.temperature, resolved.replay_reasoning) == (
        "max_tokens",
        False,
        False,
    )


def test_the_codec_sends_only_what_the_model_accepts() -> None:
    messages = (user("hi"),)
    reasoning = Accepts(max_tokens_field="max_completion_tokens", temperature=False)
    body = encode(
        "openai-chat", messages, identity="x", accepts=reasoning, max_output_tokens=800, temperature=0.2
    )
    assert body["max_completion_tokens"] == 800
    assert "max_tokens" not in body
    assert "temperature" not in body
    plain = encode("openai-chat", messages, identity="x", max_output_tokens=800, temperature=0.2)
    assert (plain["max_tokens"], plain["temperature"]) == (800, 0.2)
    assert "max_completion_tokens" not in plain
