"""The gateway against the fake provider over real HTTP: every format, every error class."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from larkbot.canonical.llm import (
    AssistantMessage,
    LLMError,
    LLMRequest,
    LLMResponse,
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
from larkbot.llm_gateway.core.common import EncodedImage
from larkbot.llm_gateway.core.usage import to_openai_chat
from larkbot.llm_gateway.fake import (
    ContextOverflow,
    Drop,
    Fail,
    FakeProvider,
    Reply,
    Script,
    Sequence,
    estimate_tokens,
)
from larkbot.llm_gateway.gateway import Gateway
from larkbot.llm_gateway.outcome import Outcome
from larkbot.runtime.config import LlmEndpoint, LlmSettings
from larkbot.runtime.retry import Backoff, RetryPolicy

FORMATS: tuple[WireFormat, ...] = ("openai-chat", "anthropic-messages", "responses")
KEY = "sk-contract-0123456789abcdef"
SALT = "salt-of-the-contract-deployment"
ATTEMPTS = 3
FAST = RetryPolicy(Backoff(initial_s=0.01, max_s=0.05), max_attempts=ATTEMPTS)
TOOLS = (
    ToolSpec.of("end_turn", "Stay silent", {"type": "object"}),
    ToolSpec.of("react", "React", {"type": "object"}),
)


class StaticImages:
    async def resolve(self, refs: list[tuple[str, int]]) -> dict[tuple[str, int], EncodedImage]:
        return {ref: EncodedImage("image/png", "iVBORw0KGgo=") for ref in refs}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def request(*, deadline_s: float = 30.0, chat_key: str | None = None, **kwargs: Any) -> LLMRequest:
    return LLMRequest(
        request_id="req-1",
        purpose="primary",
        endpoint="main",
        system="system prompt",
        messages=(UserMessage(parts=(TextPart(text="hello"),)),),
        tools=TOOLS,
        tool_choice=ToolChoice(mode="any"),
        deadline_ms=now_ms() + int(deadline_s * 1000),
        chat_key=chat_key,
        **kwargs,
    )


@asynccontextmanager
async def gateway_for(
    fmt: WireFormat, script: Script, *, base_url: str | None = None, **endpoint: Any
) -> AsyncIterator[tuple[Gateway, FakeProvider, list[Outcome]]]:
    outcomes: list[Outcome] = []
    dump_dir = endpoint.pop("dump_dir", None)
    salt = endpoint.pop("prompt_cache_key_salt", None)
    async with FakeProvider(script, api_key=KEY) as fake:
        fields: dict[str, Any] = {"format": fmt, "base_url": base_url or fake.url, "model": "fake-model"}
        fields.update({"api_key": KEY, "fake": True, **endpoint})
        settings = LlmSettings(
            endpoints={"main": LlmEndpoint(**fields)}, dump_dir=dump_dir, prompt_cache_key_salt=salt
        )
        gateway = Gateway(
            settings, StaticImages(), policy=FAST, min_attempt_s=0.05, on_outcome=outcomes.append
        )
        try:
            yield gateway, fake, outcomes
        finally:
            await gateway.aclose()


@pytest.mark.parametrize("fmt", FORMATS)
async def test_success_with_tool_calls_reasoning_and_cache_usage(fmt: WireFormat) -> None:
    identity_probe = "x"
    usage = (
        Usage(input_tokens=3000, output_tokens=50, cache_read_tokens=2000, cache_write_tokens=500)
        if fmt == "anthropic-messages"
        else Usage(input_tokens=3000, output_tokens=50, cache_read_tokens=2048, reasoning_tokens=16)
    )
    thought = {
        "openai-chat": ReasoningPart(text="hmm", format=fmt, model_identity=identity_probe),
        "anthropic-messages": ReasoningPart(
            text="hmm", signature="c2ln", format=fmt, model_identity=identity_probe
        ),
        "responses": ReasoningPart(
            text="hmm", opaque="ZW5j", item_id="rs_1", format=fmt, model_identity=identity_probe
        ),
    }[fmt]
    parts = (
        thought,
        ToolCallPart(id="call_1", name="react", arguments_json='{"emoji":"👍"}'),
        ToolCallPart(id="call_2", name="end_turn", arguments_json="{}"),
    )
    async with gateway_for(fmt, Sequence([Reply(parts=parts, usage=usage)])) as (gateway, fake, outcomes):
        reply = await gateway.generate(request())
    assert isinstance(reply, LLMResponse), reply
    assert reply.stop_reason == "tool_use"
    assert reply.usage == usage
    assert [p.kind for p in reply.message.parts] == ["reasoning", "tool_call", "tool_call"]
    reasoning_part = reply.message.parts[0]
    assert isinstance(reasoning_part, ReasoningPart)
    assert reasoning_part.model_identity == reply.model_identity == reply.message.model_identity
    assert reasoning_part.model_identity.startswith(f"{fmt}:127.0.0.1:")
    assert reply.gateway_latency_ms is not None
    assert outcomes[0].outcome == "ok"
    assert outcomes[0].usage == usage
    headers = fake.calls[0].headers
    if fmt == "anthropic-messages":
        assert headers["x-api-key"] == KEY
        assert headers["anthropic-version"] == "2023-06-01"
    else:
        assert headers["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize("fmt", FORMATS)
async def test_replayed_reasoning_reaches_the_provider(fmt: WireFormat) -> None:
    async with gateway_for(fmt, Sequence([Reply.tool_call("react", {}), Reply.text("done")])) as (
        gw,
        fake,
        _,
    ):
        first = await gw.generate(request())
        assert isinstance(first, LLMResponse)
        thought = {
            "openai-chat": ReasoningPart(text="why", format=fmt, model_identity=first.model_identity),
            "anthropic-messages": ReasoningPart(
                text="why", signature="c2ln", format=fmt, model_identity=first.model_identity
            ),
            "responses": ReasoningPart(
                text="why", opaque="ZW5j", item_id="rs_9", format=fmt, model_identity=first.model_identity
            ),
        }[fmt]
        message = first.message.model_copy(update={"parts": (thought, *first.message.parts)})
        follow = request().model_copy(
            update={
                "messages": (
                    *request().messages,
                    message,
                    ToolResultMessage(tool_call_id="call_1", parts=(TextPart(text="ok"),)),
                )
            }
        )
        second = await gw.generate(follow)
    assert isinstance(second, LLMResponse)
    replayed = fake.calls[1].request.messages[1]
    assert isinstance(replayed, AssistantMessage)
    assert isinstance(replayed.parts[0], ReasoningPart)
    assert replayed.parts[0].text == "why"


@pytest.mark.parametrize("fmt", FORMATS)
async def test_rate_limit_is_retried_honouring_retry_after(fmt: WireFormat) -> None:
    script = Sequence([Fail(429, "slow down", retry_after="0.05"), Reply.text("hi")])
    async with gateway_for(fmt, script) as (gateway, fake, outcomes):
        reply = await gateway.generate(request())
    assert isinstance(reply, LLMResponse)
    assert len(fake.calls) == 2
    assert outcomes[0].retries == ["status_429"]
    assert outcomes[0].waited_s == pytest.approx(0.05)


@pytest.mark.parametrize("fmt", FORMATS)
async def test_retry_after_beyond_the_deadline_returns_transient_at_once(fmt: WireFormat) -> None:
    async with gateway_for(fmt, Sequence([Fail(429, "later", retry_after="60")])) as (gateway, fake, _):
        reply = await gateway.generate(request(deadline_s=5))
    assert isinstance(reply, LLMError)
    assert (reply.category, reply.status, reply.retry_after_s) == ("transient", 429, 60.0)
    assert len(fake.calls) == 1


@pytest.mark.parametrize("fmt", FORMATS)
async def test_server_errors_exhaust_retries_as_transient(fmt: WireFormat) -> None:
    async with gateway_for(fmt, Sequence([Fail(503, "overloaded")] * 5)) as (gateway, fake, outcomes):
        reply = await gateway.generate(request())
    assert isinstance(reply, LLMError)
    assert reply.category == "transient"
    assert reply.status == 503
    assert "overloaded" in reply.message
    assert len(fake.calls) == ATTEMPTS
    assert outcomes[0].retries == ["status_503"] * (ATTEMPTS - 1)


@pytest.mark.parametrize(
    ("status", "category"),
    [
        (400, "invalid_request"),
        (422, "invalid_request"),
        (404, "config"),
        (402, "config"),
        (413, "context_length"),
        (418, "permanent"),
    ],
)
@pytest.mark.parametrize("fmt", FORMATS)
async def test_permanent_statuses_are_not_retried(fmt: WireFormat, status: int, category: str) -> None:
    async with gateway_for(fmt, Sequence([Fail(status, "nope"), Reply.text("unused")])) as (gateway, fake, _):
        reply = await gateway.generate(request())
    assert isinstance(reply, LLMError)
    assert (reply.category, reply.status) == (category, status)
    assert len(fake.calls) == 1


@pytest.mark.parametrize("fmt", FORMATS)
async def test_bad_credentials_are_config_errors_and_the_key_is_masked(fmt: WireFormat) -> None:
    wrong = "sk-wrong-key-abcdefghijklmnop"
    async with gateway_for(fmt, Sequence([Reply.text("unused")]), api_key=wrong) as (gateway, _, _):
        reply = await gateway.generate(request())
    assert isinstance(reply, LLMError)
    assert (reply.category, reply.status) == ("config", 401)
    assert "Incorrect API key" in reply.message
    assert wrong not in reply.message
    assert "***" in reply.message


@pytest.mark.parametrize("fmt", FORMATS)
async def test_provider_timeout_is_transient(fmt: WireFormat) -> None:
    script = Sequence([Reply(parts=(TextPart(text="slow"),), latency_s=5)] * 3)
    async with gateway_for(fmt, script, timeout_s=0.2) as (gateway, fake, _):
        reply = await gateway.generate(request(deadline_s=10))
    assert isinstance(reply, LLMError)
    assert reply.category == "transient"
    assert "timed out" in reply.message
    assert len(fake.calls) == ATTEMPTS


@pytest.mark.parametrize("fmt", FORMATS)
async def test_deadline_shortened_wait_is_a_deadline_error(fmt: WireFormat) -> None:
    script = Sequence([Reply(parts=(TextPart(text="slow"),), latency_s=5)])
    async with gateway_for(fmt, script, timeout_s=60) as (gateway, _, outcomes):
        reply = await gateway.generate(request(deadline_s=0.3))
    assert isinstance(reply, LLMError)
    assert reply.category == "deadline"
    assert outcomes[0].outcome == "deadline"


async def test_a_passed_deadline_never_calls_the_provider() -> None:
    async with gateway_for("openai-chat", Sequence([Reply.text("unused")])) as (gateway, fake, _):
        reply = await gateway.generate(request(deadline_s=-1))
    assert isinstance(reply, LLMError)
    assert reply.category == "deadline"
    assert fake.calls == []


@pytest.mark.parametrize("fmt", FORMATS)
async def test_dropped_connections_and_refused_connects_are_transient(fmt: WireFormat) -> None:
    async with gateway_for(fmt, Sequence([Drop()] * 5)) as (gateway, _fake, outcomes):
        dropped = await gateway.generate(request())
    assert isinstance(dropped, LLMError)
    assert dropped.category == "transient"
    assert outcomes[0].retries == ["connect"] * (ATTEMPTS - 1)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with gateway_for(fmt, Sequence([]), base_url=f"http://127.0.0.1:{port}/v1") as (gateway, _, _):
        refused = await gateway.generate(request())
    assert isinstance(refused, LLMError)
    assert refused.category == "transient"
    assert "unreachable" in refused.message


@pytest.mark.parametrize("fmt", FORMATS)
async def test_malformed_success_body_is_permanent(fmt: WireFormat) -> None:
    broken = Reply(extra={"choices": "nope", "content": "nope", "output": "nope"})
    async with gateway_for(fmt, Sequence([broken])) as (gateway, _, _):
        reply = await gateway.generate(request())
    assert isinstance(reply, LLMError)
    assert reply.category == "permanent"


async def test_the_fake_is_refused_unless_chosen_explicitly() -> None:
    async with gateway_for("openai-chat", Sequence([Reply.text("hi")]), fake=False) as (gateway, _, _):
        reply = await gateway.generate(request())
    assert isinstance(reply, LLMError)
    assert reply.category == "config"
    assert "fake" in reply.message


async def test_unknown_endpoint_is_a_config_error() -> None:
    async with gateway_for("openai-chat", Sequence([])) as (gateway, _, outcomes):
        reply = await gateway.generate(request().model_copy(update={"endpoint": "nope"}))
    assert isinstance(reply, LLMError)
    assert reply.category == "config"
    assert outcomes[0].model == "unknown"


@pytest.mark.parametrize("fmt", FORMATS)
async def test_identical_calls_send_byte_identical_bodies(fmt: WireFormat) -> None:
    async with gateway_for(
        fmt,
        Sequence([Reply.text("a"), Reply.text("b")]),
        supports_prompt_cache_key=True,
        prompt_cache_key_salt=SALT,
    ) as (
        gateway,
        fake,
        _,
    ):
        for _ in range(2):
            await gateway.generate(request(chat_key="feishu:oc_123"))
    assert fake.calls[0].raw == fake.calls[1].raw
    key = fake.calls[0].body.get("prompt_cache_key")
    if fmt == "anthropic-messages":
        assert key is None
    else:
        assert isinstance(key, str)
        assert key.startswith("larkbot-")
        assert "oc_123" not in key


async def test_prompt_cache_key_only_where_supported() -> None:
    async with gateway_for("openai-chat", Sequence([Reply.text("a")]), prompt_cache_key_salt=SALT) as (
        gateway,
        fake,
        _,
    ):
        await gateway.generate(request(chat_key="feishu:oc_1", prompt_cache_key="explicit"))
    assert "prompt_cache_key" not in fake.calls[0].body


# --- Issue 6: the prompt_cache_key is a keyed hash; no chat id reaches the provider ----------------------

FEISHU_CHAT, TELEGRAM_CHAT = "oc_5f1e9a2b7c3d4e8f", "-1001987654321"


def keyed(chat_key: str, purpose: Any, own_key: str | None) -> LLMRequest:
    """A request as the driver builds it: its own key per purpose, and the chat it belongs to."""
    return request(chat_key=chat_key, prompt_cache_key=own_key).model_copy(update={"purpose": purpose})


async def sent_keys(fmt: WireFormat, salt: str | None, asks: list[LLMRequest]) -> list[Any]:
    """The ``prompt_cache_key`` of each request on the wire, from a freshly started gateway."""
    script = Sequence([Reply.text("ok")] * len(asks))
    async with gateway_for(fmt, script, supports_prompt_cache_key=True, prompt_cache_key_salt=salt) as (
        gateway,
        fake,
        _,
    ):
        for ask in asks:
            assert isinstance(await gateway.generate(ask), LLMResponse)
    for call in fake.calls:  # nothing of a chat id anywhere in the body
        assert FEISHU_CHAT.encode() not in call.raw
        assert TELEGRAM_CHAT.lstrip("-").removeprefix("100").encode() not in call.raw
    return [call.body.get("prompt_cache_key") for call in fake.calls]


@pytest.mark.parametrize("fmt", ["openai-chat", "responses"])
async def test_the_prompt_cache_key_is_a_keyed_hash_per_chat_and_purpose(fmt: WireFormat) -> None:
    feishu, telegram = f"feishu:{FEISHU_CHAT}", f"telegram:{TELEGRAM_CHAT}"
    asks = [
        keyed(feishu, "primary", feishu),
        keyed(feishu, "primary", feishu),
        keyed(feishu, "probe", f"{feishu}:probe"),
        keyed(feishu, "compaction", f"{feishu}:compaction"),
        keyed(telegram, "primary", telegram),
        keyed(telegram, "probe", f"{telegram}:probe"),
        keyed(telegram, "memory", None),  # no key of its own: the chat's
    ]
    keys = await sent_keys(fmt, SALT, asks)
    primary, again, probe, compaction, tg_primary, tg_probe, tg_memory = keys
    for key in keys:
        assert isinstance(key, str)
        assert key.startswith("larkbot-")
        assert len(key) == len("larkbot-") + 32
        for leak in ("feishu", "telegram", "oc_", FEISHU_CHAT, TELEGRAM_CHAT, "probe", "compaction"):
            assert leak not in key
    assert primary == again  # stable across requests
    assert len({primary, probe, compaction, tg_primary, tg_probe, tg_memory}) == 6  # chats and purposes
    restarted = await sent_keys(fmt, SALT, [asks[0], asks[5]])
    assert restarted == [primary, tg_probe]  # a restarted gateway (or another replica) agrees
    salted = await sent_keys(fmt, "another-salt-of-this-deployment", [asks[0], asks[5]])
    assert salted[0] not in keys
    assert salted[1] not in keys


async def test_without_a_salt_no_prompt_cache_key_is_sent() -> None:
    chat = f"telegram:{TELEGRAM_CHAT}"
    keys = await sent_keys("openai-chat", None, [keyed(chat, "primary", chat), keyed(chat, "probe", None)])
    assert keys == [None, None]


async def test_request_dumps_are_redacted(tmp_path: Path) -> None:
    script = Sequence([Fail(500, f"echo {KEY}"), Reply.text("ok")])
    async with gateway_for("openai-chat", script, dump_dir=str(tmp_path)) as (gateway, _, _):
        from larkbot.canonical.llm import ImagePart

        with_image = request().model_copy(
            update={"messages": (UserMessage(parts=(ImagePart(blob_key="b1", mime="image/png"),)),)}
        )
        reply = await gateway.generate(with_image)
    assert isinstance(reply, LLMResponse)
    files, text = read_dumps(tmp_path)
    assert files == ["req-1.1.json", "req-1.2.json"]
    assert KEY not in text
    dump = json.loads(text)
    assert dump["headers"]["authorization"] == "***"
    assert dump["response"]["status"] == 500
    assert dump["request"]["messages"][1]["content"][0]["image_url"]["url"].startswith(
        "data:image/png;base64,<"
    )


def read_dumps(directory: Path) -> tuple[list[str], str]:
    return sorted(p.name for p in directory.iterdir()), (directory / "req-1.1.json").read_text()


# --- Issue 13: what real providers send, end to end over HTTP -------------------------------------------

FIXTURES: dict[str, Any] = json.loads(
    (Path(__file__).parent / "fixtures" / "provider_bodies.json").read_text(encoding="utf-8")
)


@pytest.mark.parametrize("fmt", FORMATS)
async def test_a_request_over_the_context_window_is_context_length_and_not_retried(fmt: WireFormat) -> None:
    async with gateway_for(fmt, Sequence([Reply.text("unused")] * 3)) as (gateway, fake, outcomes):
        fake.context_window = 50
        reply = await gateway.generate(request())
        fake.context_window = None
        after = await gateway.generate(request())
    assert isinstance(reply, LLMError)
    assert (reply.category, reply.status) == ("context_length", 400)
    assert outcomes[0].outcome == "context_length"
    assert outcomes[0].retries == []
    assert isinstance(after, LLMResponse)  # the script was not consumed by the refused call
    assert len(fake.calls) == 2


@pytest.mark.parametrize(
    ("dialect", "status"), [("openai", 400), ("deepseek", 400), ("vllm", 400), ("tpm", 429)]
)
async def test_every_openai_chat_context_dialect_is_context_length(dialect: Any, status: int) -> None:
    script = Sequence([ContextOverflow(dialect=dialect, limit=65536), Reply.text("unused")])
    async with gateway_for("openai-chat", script) as (gateway, fake, _):
        reply = await gateway.generate(request())
    assert isinstance(reply, LLMError)
    assert (reply.category, reply.status) == ("context_length", status)
    assert "65536" in reply.message
    # The numbers the provider stated travel with the error: the driver learns the real window.
    assert reply.window_tokens == 65536
    assert reply.input_tokens == estimate_tokens(fake.calls[0].raw)
    assert len(fake.calls) == 1


async def test_a_recorded_gemini_reply_without_tool_ids_is_a_turn() -> None:
    recorded = FIXTURES["replies"]["gemini_empty_tool_id"]["body"]
    async with gateway_for("openai-chat", Sequence([Reply(extra=recorded)])) as (gateway, _, _):
        reply = await gateway.generate(request())
    assert isinstance(reply, LLMResponse), reply
    call = reply.message.parts[0]
    assert isinstance(call, ToolCallPart)
    assert call.id.startswith("call_")
    assert reply.stop_reason == "tool_use"


async def test_a_paused_anthropic_turn_is_continued_and_returned_whole() -> None:
    paused = FIXTURES["replies"]["anthropic_pause_turn"]["body"]
    continued = FIXTURES["replies"]["anthropic_pause_continued"]["body"]
    script = Sequence([Reply(extra=paused), Reply(extra=continued)])
    async with gateway_for("anthropic-messages", script) as (gateway, fake, outcomes):
        reply = await gateway.generate(request())
    assert isinstance(reply, LLMResponse), reply
    assert reply.stop_reason == "end_turn"
    assert [p.text for p in reply.message.parts if isinstance(p, TextPart)] == [
        "Let me search for that.",
        "Larks are songbirds.",
    ]
    assert reply.usage.input_tokens == 410 + 530 + 4000
    assert outcomes[0].retries == ["pause_turn"]
    sent_back = fake.calls[1].body["messages"][-1]
    assert sent_back == {"role": "assistant", "content": paused["content"]}


async def test_a_reasoning_model_gets_only_what_it_accepts() -> None:
    ask = request(max_output_tokens=800, temperature=0.3)
    async with gateway_for("openai-chat", Sequence([Reply.text("ok")]), model="gpt-5-mini") as (gw, fake, _):
        reply = await gw.generate(ask)
    assert isinstance(reply, LLMResponse), (
        reply
    )  # the fake refuses max_tokens and temperature, as OpenAI does
    body = fake.calls[0].body
    assert body["max_completion_tokens"] == 800
    assert "max_tokens" not in body
    assert "temperature" not in body


async def test_anthropic_with_thinking_is_never_forced_nor_given_a_temperature() -> None:
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 1024}}
    script = Sequence([Reply.tool_call("end_turn", {})])
    async with gateway_for("anthropic-messages", script, extra_body=thinking) as (gw, fake, _):
        reply = await gw.generate(request(temperature=0.5))
    assert isinstance(reply, LLMResponse), reply
    body = fake.calls[0].body
    assert body["tool_choice"] == {"type": "auto"}
    assert "temperature" not in body
    assert body["thinking"] == thinking["thinking"]


async def test_a_refused_parameter_costs_no_turn_and_stays_off() -> None:
    wrong = {"max_tokens_field": "max_tokens", "temperature": True}
    script = Sequence([Reply.text("first"), Reply.text("second")])
    ask = request(max_output_tokens=800, temperature=0.3)
    async with gateway_for("openai-chat", script, model="gpt-5", accepts=wrong) as (gw, fake, outcomes):
        first = await gw.generate(ask)
        second = await gw.generate(ask)
    assert isinstance(first, LLMResponse)
    assert isinstance(second, LLMResponse)
    assert outcomes[0].retries == ["unsupported_parameter", "unsupported_parameter"]
    assert outcomes[1].retries == []
    # The fake records only what it accepts: the two refused bodies never reached a script.
    limits = [{"max_tokens", "max_completion_tokens", "temperature"} & set(c.body) for c in fake.calls]
    assert limits == [{"max_completion_tokens"}, {"max_completion_tokens"}]
    assert fake.calls[0].raw == fake.calls[1].raw


async def test_a_failed_responses_status_is_retried_when_transient() -> None:
    failed = {
        "status": "failed",
        "output": [],
        "error": {
            "code": "server_error",
            "message": "The server had an error while processing your request.",
        },
    }
    script = Sequence([Reply(extra=failed), Reply.text("ok")])
    async with gateway_for("responses", script) as (gateway, fake, outcomes):
        reply = await gateway.generate(request())
    assert isinstance(reply, LLMResponse), reply
    assert len(fake.calls) == 2
    assert outcomes[0].retries == ["response_failed"]


@pytest.mark.parametrize(
    "name",
    [
        "openai insufficient_quota is configuration (ChatGPTNextWeb/NextChat#3123)",
        "responses model_not_found on HTTP 400 (skorokithakis/sysaidmin#9)",
        "x-should-retry false on a 500 is permanent",
        "openai 429 request too large for TPM (TheR1D/shell_gpt#653)",
    ],
)
async def test_recorded_errors_with_their_headers_are_not_retried(name: str) -> None:
    case = next(e for e in FIXTURES["errors"] if e["name"] == name)
    fail = Fail(case["status"], headers=case["headers"], body=case["body"])
    async with gateway_for("openai-chat", Sequence([fail, Reply.text("unused")])) as (gateway, fake, _):
        reply = await gateway.generate(request())
    assert isinstance(reply, LLMError)
    assert (reply.category, reply.status) == (case["category"], case["status"])
    assert len(fake.calls) == 1


async def test_anthropic_rate_limit_resets_set_the_wait() -> None:
    reset = datetime.fromtimestamp(time.time() + 0.3, tz=UTC).isoformat().replace("+00:00", "Z")
    headers = {
        "anthropic-ratelimit-input-tokens-remaining": "0",
        "anthropic-ratelimit-input-tokens-reset": reset,
        "anthropic-ratelimit-requests-remaining": "10",
        "anthropic-ratelimit-requests-reset": reset,
    }
    limited = Fail(429, "Number of request tokens has exceeded your per-minute rate limit", headers=headers)
    script = Sequence([limited, Reply.text("hi")])
    async with gateway_for("anthropic-messages", script) as (gateway, fake, outcomes):
        reply = await gateway.generate(request())
    assert isinstance(reply, LLMResponse)
    assert len(fake.calls) == 2
    assert 0.1 < outcomes[0].waited_s <= 0.3


# --- Issue 12: thinking that only the total shows is output, over the wire -------------------------------


@pytest.mark.parametrize("fmt", ["openai-chat", "responses"])
async def test_thinking_counted_only_in_the_total_is_output(fmt: WireFormat) -> None:
    # Gemini's compatibility endpoint: total_tokens 109 = 35 prompt + 12 completion + 62 thinking, and no
    # reasoning field; the same gap in the Responses shape.
    hidden = {
        "openai-chat": {"prompt_tokens": 35, "completion_tokens": 12, "total_tokens": 109},
        "responses": {"input_tokens": 35, "output_tokens": 12, "total_tokens": 109},
    }[fmt]
    async with gateway_for(fmt, Sequence([Reply(parts=(TextPart(text="ok"),), extra={"usage": hidden})])) as (
        gateway,
        _,
        outcomes,
    ):
        reply = await gateway.generate(request())
    assert isinstance(reply, LLMResponse), reply
    assert reply.usage == Usage(input_tokens=35, output_tokens=74, reasoning_tokens=62)
    assert outcomes[0].usage == reply.usage  # what the metrics count


async def test_the_fakes_gemini_usage_style_reads_back_whole() -> None:
    figures = Usage(input_tokens=35, output_tokens=74, reasoning_tokens=62)
    wire = to_openai_chat(figures, "gemini")
    assert (wire["prompt_tokens"], wire["completion_tokens"], wire["total_tokens"]) == (35, 12, 109)
    assert "completion_tokens_details" not in wire
    script = Sequence([Reply.text("ok", usage=figures, usage_style="gemini")])
    async with gateway_for("openai-chat", script) as (gateway, _, _):
        reply = await gateway.generate(request())
    assert isinstance(reply, LLMResponse), reply
    assert reply.usage == figures
