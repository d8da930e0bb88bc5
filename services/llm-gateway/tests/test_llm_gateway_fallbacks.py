"""Fallbacks (``llm.fallbacks``): when the endpoint asked fails after its own retries with an error another
endpoint may not give, the purpose's fallbacks are asked in turn; the answer says which failed before it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest
from prometheus_client import REGISTRY
from pydantic import ValidationError

from larkbot.canonical.llm import LLMError, LLMResponse, TextPart
from larkbot.llm_gateway.fake import ContextOverflow, Fail, FakeProvider, Reply, Script
from larkbot.llm_gateway.gateway import Gateway
from larkbot.runtime.config import LlmSettings

from .test_llm_gateway_contract import FAST, KEY, StaticImages, request


@asynccontextmanager
async def gateways(scripts: dict[str, Script], fallbacks: dict[str, list[str]]) -> AsyncIterator[Gateway]:
    """One fake provider per endpoint name, each answering with its script."""
    async with AsyncExitStack() as stack:
        endpoints: dict[str, Any] = {}
        for name, script in scripts.items():
            fake = await stack.enter_async_context(FakeProvider(script, api_key=KEY))
            endpoints[name] = {
                "format": "openai-chat",
                "base_url": fake.url,
                "model": f"model-{name}",
                "api_key": KEY,
                "fake": True,
            }
        settings = LlmSettings.model_validate({"endpoints": endpoints, "fallbacks": fallbacks})
        gateway = Gateway(settings, StaticImages(), policy=FAST, min_attempt_s=0.05)
        try:
            yield gateway
        finally:
            await gateway.aclose()


def _fallbacks(failed: str, fallback: str) -> float:
    labels = {"purpose": "primary", "failed": failed, "fallback": fallback}
    return REGISTRY.get_sample_value("larkbot_llm_fallbacks_total", labels) or 0.0


def _down(_call: Any) -> Fail:
    return Fail(503, "overloaded")


def _answers(text: str) -> Script:
    return lambda _call: Reply.text(text)


async def test_a_failing_endpoint_falls_back_in_turn_and_the_answer_names_what_failed() -> None:
    scripts = {
        "main": _down,
        "backup": lambda _call: Fail(402, "insufficient credit"),
        "local": _answers("hi"),
    }
    before = _fallbacks("main", "backup"), _fallbacks("backup", "local")
    async with gateways(scripts, {"primary": ["backup", "local"]}) as gateway:
        reply = await gateway.generate(request())
    assert isinstance(reply, LLMResponse), reply
    assert reply.message.parts == (TextPart(text="hi"),)
    assert (reply.fallback_from, reply.endpoint) == (("main", "backup"), "local")
    assert reply.model_identity.endswith("model-local")
    assert (_fallbacks("main", "backup"), _fallbacks("backup", "local")) == (before[0] + 1, before[1] + 1)


async def test_an_answer_of_the_endpoint_asked_names_no_fallback() -> None:
    async with gateways({"main": _answers("direct"), "backup": _answers("no")}, {"primary": ["backup"]}) as g:
        reply = await g.generate(request())
    assert isinstance(reply, LLMResponse)
    assert (reply.fallback_from, reply.endpoint) == ((), None)


@pytest.mark.parametrize(
    ("script", "category"),
    [
        (lambda _call: ContextOverflow(), "context_length"),
        (lambda _call: Fail(400, "bad"), "invalid_request"),
    ],
)
async def test_an_error_another_endpoint_would_repeat_is_returned_as_it_is(
    script: Script, category: str
) -> None:
    backup_calls: list[object] = []

    def backup(call: Any) -> Reply:
        backup_calls.append(call)
        return Reply.text("never")

    async with gateways({"main": script, "backup": backup}, {"primary": ["backup"]}) as gateway:
        reply = await gateway.generate(request())
    assert isinstance(reply, LLMError)
    assert reply.category == category
    assert backup_calls == []


async def test_when_every_fallback_fails_the_last_error_is_the_answer() -> None:
    def backup(_call: Any) -> Fail:
        return Fail(429, "rate limited")

    async with gateways({"main": _down, "backup": backup}, {"primary": ["backup"]}) as gateway:
        reply = await gateway.generate(request())
    assert isinstance(reply, LLMError)
    assert (reply.category, reply.status, reply.endpoint) == ("transient", 429, "backup")


async def test_a_purpose_without_fallbacks_does_not_fall_back() -> None:
    async with gateways({"main": _down, "backup": _answers("ok")}, {"primary": ["backup"]}) as gateway:
        probe = await gateway.generate(request().model_copy(update={"purpose": "probe"}))
        primary = await gateway.generate(request())
    assert isinstance(probe, LLMError)
    assert probe.category == "transient"
    assert isinstance(primary, LLMResponse)
    assert primary.endpoint == "backup"


def test_a_fallback_naming_no_endpoint_is_refused_by_its_key() -> None:
    endpoint = {"format": "openai-chat", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    with pytest.raises(ValidationError) as refused:
        LlmSettings.model_validate(
            {"endpoints": {"main": endpoint}, "fallbacks": {"primary": ["main", "gone"]}}
        )
    (problem,) = refused.value.errors()
    assert problem["loc"] == ("fallbacks", "primary", 1)
    with pytest.raises(ValidationError) as purpose:
        LlmSettings.model_validate({"endpoints": {"main": endpoint}, "fallbacks": {"chat": ["main"]}})
    assert purpose.value.errors()[0]["loc"][:2] == ("fallbacks", "chat")
