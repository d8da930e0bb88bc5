"""The fake provider on its own: it rejects what the real providers reject, and its scripts."""

from __future__ import annotations

import httpx
import pytest

from larkbot.llm_gateway.fake import FakeProvider, Sequence, echo, load_script


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
