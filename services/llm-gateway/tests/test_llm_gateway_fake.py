"""The fake provider on its own: it rejects what the real providers reject, and its scripts."""

from __future__ import annotations

import json

import httpx
import pytest

from larkbot.llm_gateway.fake import FakeProvider, Sequence, echo, estimate_tokens, load_script


async def test_fake_rejects_what_anthropic_rejects_in_anthropic_shape() -> None:
    async with FakeProvider(echo) as fake, httpx.AsyncClient() as client:
        body = {
            "model": "m",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
        }
        headers = {"anthropic-version": "2023-06-01"}
        alternation = await client.post(f"{fake.url}/messages", json=body, headers=headers)
        no_version = await client.post(
            f"{fake.url}/messages", json={**body, "messages": body["messages"][:1]}
        )
        ok = await client.post(
            f"{fake.url}/messages", json={**body, "messages": body["messages"][:1]}, headers=headers
        )
    assert alternation.status_code == 400
    assert alternation.json()["error"]["type"] == "invalid_request_error"
    assert "alternate" in alternation.json()["error"]["message"]
    assert no_version.status_code == 400
    assert ok.status_code == 200
    assert ok.headers["x-larkbot-fake"] == "1"
    assert ok.json()["content"] == [{"type": "text", "text": "echo: a"}]
    assert len(fake.calls) == 1


async def test_echo_obeys_forced_tool_choice_and_sequences_run_out() -> None:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [
            {"type": "function", "function": {"name": "send_message", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "end_turn", "parameters": {"type": "object"}}},
        ],
        "tool_choice": "required",
    }
    async with FakeProvider(echo) as fake, httpx.AsyncClient() as client:
        forced = await client.post(f"{fake.url}/chat/completions", json=body)
    calls = forced.json()["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["end_turn"]
    assert forced.json()["choices"][0]["finish_reason"] == "tool_calls"
    async with FakeProvider(Sequence([])) as fake, httpx.AsyncClient() as client:
        exhausted = await client.post(f"{fake.url}/responses", json={"model": "m", "input": "hi"})
    assert exhausted.status_code == 500
    assert exhausted.json()["error"]["message"] == "fake script exhausted"


def test_load_script() -> None:
    assert load_script("echo") is echo
    assert load_script("larkbot.llm_gateway.fake:echo") is echo
    with pytest.raises(ValueError, match="module:function"):
        load_script("nonsense")


ANTHROPIC = {"anthropic-version": "2023-06-01"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": " \n"}]}]},
            "messages: text content blocks must contain non-whitespace text",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": ""}]}]},
            "messages: text content blocks must be non-empty",
        ),
        (
            {
                "messages": [{"role": "user", "content": "hi"}],
                "thinking": {"type": "enabled", "budget_tokens": 1024},
                "tools": [{"name": "t", "input_schema": {"type": "object"}}],
                "tool_choice": {"type": "any"},
            },
            "Thinking may not be enabled when tool_choice forces tool use.",
        ),
        (
            {
                "messages": [{"role": "user", "content": "hi"}],
                "thinking": {"type": "adaptive"},
                "temperature": 0.5,
            },
            "`temperature` may only be set to 1 when thinking is enabled.",
        ),
    ],
)
async def test_fake_refuses_what_anthropic_refuses_word_for_word(
    body: dict[str, object], message: str
) -> None:
    async with FakeProvider(echo) as fake, httpx.AsyncClient() as client:
        answer = await client.post(
            f"{fake.url}/messages", json={"model": "m", "max_tokens": 10, **body}, headers=ANTHROPIC
        )
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(message)
    assert fake.calls == []


@pytest.mark.parametrize(
    ("extra", "param", "code"),
    [
        ({"max_tokens": 100}, "max_tokens", "unsupported_parameter"),
        ({"temperature": 0.2}, "temperature", "unsupported_value"),
    ],
)
async def test_fake_refuses_what_openai_reasoning_models_refuse(
    extra: dict[str, object], param: str, code: str
) -> None:
    body = {"model": "gpt-5-mini", "messages": [{"role": "user", "content": "hi"}], **extra}
    async with FakeProvider(echo) as fake, httpx.AsyncClient() as client:
        refused = await client.post(f"{fake.url}/chat/completions", json=body)
        accepted = await client.post(f"{fake.url}/chat/completions", json={**body, "model": "gpt-4.1-mini"})
    assert refused.status_code == 400
    assert (refused.json()["error"]["param"], refused.json()["error"]["code"]) == (param, code)
    assert accepted.status_code == 200


async def test_fake_context_window_answers_each_format_with_its_own_error() -> None:
    async with FakeProvider(Sequence([]), context_window=10) as fake, httpx.AsyncClient() as client:
        chat = await client.post(
            f"{fake.url}/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "x" * 200}]},
        )
        claude = await client.post(
            f"{fake.url}/messages",
            json={"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x" * 200}]},
            headers=ANTHROPIC,
        )
        responses = await client.post(f"{fake.url}/responses", json={"model": "m", "input": "x" * 200})
    assert chat.status_code == claude.status_code == responses.status_code == 400
    assert chat.json()["error"]["code"] == "context_length_exceeded"
    assert chat.json()["error"]["message"].startswith("This model's maximum context length is 10 tokens.")
    tokens = estimate_tokens(fake.calls[1].raw)
    assert claude.json()["error"]["message"] == f"prompt is too long: {tokens} tokens > 10 maximum"
    assert responses.json()["error"]["code"] == "context_length_exceeded"
    assert len(fake.calls) == 3  # recorded, but the script (empty here) was never consulted


# --- Issue 15: cached tokens in each format's own usage fields -------------------------------------------

LONG = "The system prompt of a long conversation, the same on every call. " * 80  # ~5,400 bytes


def bodies(fmt: str, turn: int) -> dict[str, object]:
    """One conversation's request at ``turn``: the long system prompt, then one message per turn so far."""
    said = [{"role": "user", "content": f"message {n}"} for n in range(turn + 1)]
    for n in range(len(said) - 1, 0, -1):
        said.insert(n, {"role": "assistant", "content": f"answer {n}"})
    if fmt == "openai-chat":
        return {"model": "m", "messages": [{"role": "system", "content": LONG}, *said]}
    if fmt == "responses":
        return {"model": "m", "instructions": LONG, "input": said}
    # Anthropic: breakpoints on the system prompt and on the second-to-last message, as the gateway sets them.
    ephemeral = {"type": "ephemeral"}
    blocks = [
        {"role": m["role"], "content": [{"type": "text", "text": m["content"], "cache_control": ephemeral}]}
        if n == len(said) - 2
        else m
        for n, m in enumerate(said)
    ]
    system = [{"type": "text", "text": LONG, "cache_control": ephemeral}]
    return {"model": "m", "max_tokens": 100, "system": system, "messages": blocks}


@pytest.mark.parametrize(
    ("fmt", "path", "read", "write"),
    [
        ("openai-chat", "/chat/completions", ("prompt_tokens_details", "cached_tokens"), None),
        ("responses", "/responses", ("input_tokens_details", "cached_tokens"), None),
        ("anthropic-messages", "/messages", ("cache_read_input_tokens",), ("cache_creation_input_tokens",)),
    ],
)
async def test_the_fake_reports_cached_tokens_in_each_formats_own_fields(
    fmt: str, path: str, read: tuple[str, ...], write: tuple[str, ...] | None
) -> None:
    def field(usage: dict[str, object], names: tuple[str, ...]) -> object:
        value: object = usage
        for name in names:
            assert isinstance(value, dict), (usage, names)
            value = value[name]
        return value

    async with FakeProvider(echo) as fake, httpx.AsyncClient() as client:
        usages = []
        for turn in range(2):
            raw = json.dumps(bodies(fmt, turn)).encode()
            reply = await client.post(f"{fake.url}{path}", content=raw, headers=ANTHROPIC)
            assert reply.status_code == 200, reply.text
            usages.append(reply.json()["usage"])
    first, second = usages
    assert field(first, read) == 0
    cached = field(second, read)
    assert isinstance(cached, int)
    assert cached >= len(LONG) // 4 // 128 * 128
    if write is not None:  # Anthropic: the first call writes what the second reads
        assert field(first, write) == cached
        # What follows the last breakpoint is neither written nor read: the rest of the estimate.
        assert first["input_tokens"] == estimate_tokens(json.dumps(bodies(fmt, 0)).encode()) - cached
        assert first["input_tokens"] > 0
    else:
        assert cached % 128 == 0
