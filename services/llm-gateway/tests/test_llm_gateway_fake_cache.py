"""Issue 15: the fake reports cache reads the way the real providers do, and the gateway's normalized
usage carries them — through the real gateway over HTTP, in every wire format."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from larkbot.canonical.llm import (
    AssistantMessage,
    LLMRequest,
    LLMResponse,
    Message,
    Purpose,
    TextPart,
    ToolSpec,
    Usage,
    UserMessage,
    WireFormat,
)
from larkbot.llm_gateway.core.common import EncodedImage
from larkbot.llm_gateway.fake import FakeProvider, echo
from larkbot.llm_gateway.fake.cache import CACHE_STEP_TOKENS, MIN_CACHED_TOKENS
from larkbot.llm_gateway.gateway import Gateway
from larkbot.runtime.config import LlmEndpoint, LlmSettings

FORMATS: tuple[WireFormat, ...] = ("openai-chat", "anthropic-messages", "responses")
OPENAI_FORMATS: tuple[WireFormat, ...] = ("openai-chat", "responses")
#: A system prompt of about 2,000 fake tokens (4 bytes each): alone above the 1,024-token minimum.
PRIMARY_SYSTEM = "You are LarkBot, a member of this group chat. Read the conversation and act. " * 100
PROBE_SYSTEM = "Decide whether LarkBot should act on the newest messages; answer with decide. " * 100
TOOLS = (ToolSpec.of("end_turn", "Stay silent", {"type": "object"}),)


class NoImages:
    async def resolve(self, refs: list[tuple[str, int]]) -> dict[tuple[str, int], EncodedImage]:
        assert not refs
        return {}


def user(text: str) -> UserMessage:
    return UserMessage(parts=(TextPart(text=text),))


def assistant(text: str) -> AssistantMessage:
    return AssistantMessage(parts=(TextPart(text=text),))


def history(turns: int) -> tuple[Message, ...]:
    """A chat's earlier turns, as the driver replays them: user and assistant messages in turn."""
    out: list[Message] = []
    for turn in range(turns):
        question = f"<message id={turn}>what about item {turn}? " + "It has details. " * 20 + "</message>"
        out += [user(question), assistant(f"item {turn} is done")]
    return tuple(out)


def ask(
    system: str, messages: tuple[Message, ...], *, purpose: Purpose = "primary", chat: str = "telegram:-1001"
) -> LLMRequest:
    """A request ending in the late-binding message that changes on every call."""
    late = user(f"<late-binding>now {len(messages)}</late-binding>")
    return LLMRequest(
        request_id=f"req-{len(messages)}",
        purpose=purpose,
        endpoint="main",
        system=system,
        messages=(*messages, late),
        tools=TOOLS,
        deadline_ms=time.time_ns() // 1_000_000 + 30_000,
        prompt_cache_key=chat if purpose == "primary" else f"{chat}:{purpose}",
        chat_key=chat,
    )


@asynccontextmanager
async def gateway_for(fmt: WireFormat, *, cache_key: bool = False) -> AsyncIterator[Gateway]:
    async with FakeProvider(echo) as fake:
        endpoint = LlmEndpoint(
            format=fmt, base_url=fake.url, model="fake-model", fake=True, supports_prompt_cache_key=cache_key
        )
        salt = "salt-of-the-cache-tests-0123" if cache_key else None
        gateway = Gateway(LlmSettings(endpoints={"main": endpoint}, prompt_cache_key_salt=salt), NoImages())
        try:
            yield gateway
        finally:
            await gateway.aclose()


async def usage_of(gateway: Gateway, request: LLMRequest) -> Usage:
    reply = await gateway.generate(request)
    assert isinstance(reply, LLMResponse), reply
    return reply.usage


def text_tokens(messages: tuple[Message, ...]) -> int:
    return sum(len(p.text) for m in messages for p in m.parts if isinstance(p, TextPart)) // 4


def assert_read_like_the_provider(fmt: WireFormat, found: Usage, at_least: int) -> None:
    """At least ``at_least`` tokens read (OpenAI: rounded down to its step), never more than the input."""
    if fmt in OPENAI_FORMATS:
        assert found.cache_read_tokens % CACHE_STEP_TOKENS == 0, found  # OpenAI's 128-token steps
        assert found.cache_write_tokens == 0
        at_least = at_least // CACHE_STEP_TOKENS * CACHE_STEP_TOKENS
    assert found.cache_read_tokens >= max(MIN_CACHED_TOKENS, at_least), found
    assert found.cache_read_tokens <= found.input_tokens


@pytest.mark.parametrize("fmt", FORMATS)
async def test_a_second_request_sharing_a_long_prefix_reads_it_from_the_cache(fmt: WireFormat) -> None:
    async with gateway_for(fmt) as gateway:
        first = await usage_of(gateway, ask(PRIMARY_SYSTEM, history(3)))
        # The probe runs between two primary requests of the chat, with its own system prompt.
        probe = await usage_of(gateway, ask(PROBE_SYSTEM, history(3), purpose="probe"))
        second = await usage_of(gateway, ask(PRIMARY_SYSTEM, history(5)))
        probe_again = await usage_of(gateway, ask(PROBE_SYSTEM, history(4), purpose="probe"))
    assert first.cache_read_tokens == 0  # a new conversation: nothing cached yet
    assert probe.cache_read_tokens == 0
    system_tokens = len(PRIMARY_SYSTEM) // 4
    # The system prompt and the turns both requests have.
    assert_read_like_the_provider(fmt, second, system_tokens + text_tokens(history(3)))
    assert_read_like_the_provider(fmt, probe_again, len(PROBE_SYSTEM) // 4)
    assert second.input_tokens > second.cache_read_tokens  # the new turns and the late message are not
    if fmt == "anthropic-messages":
        # Anthropic writes at the breakpoints (system prompt, second-to-last message) what it had not cached.
        assert first.cache_write_tokens >= system_tokens
        assert second.cache_write_tokens > 0
        assert second.cache_read_tokens >= first.cache_write_tokens  # the first request's entries are read


@pytest.mark.parametrize("fmt", FORMATS)
async def test_a_prefix_that_differs_early_or_is_short_reads_nothing(fmt: WireFormat) -> None:
    short = "You are LarkBot."
    # One chat's primary requests: one conversation in every format (its prompt_cache_key where sent).
    async with gateway_for(fmt, cache_key=True) as gateway:
        await usage_of(gateway, ask(PRIMARY_SYSTEM, history(3)))
        changed = await usage_of(gateway, ask(PRIMARY_SYSTEM.replace("LarkBot", "LarkBot 2", 1), history(3)))
        await usage_of(gateway, ask(short, history(3)))
        short_again = await usage_of(gateway, ask(short, history(4)))
    assert changed.cache_read_tokens == 0  # the prompt differs from its first words: nothing is cached
    # The same short conversation again: its shared prefix is under 1,024 tokens.
    assert short_again.input_tokens > 0
    assert short_again.cache_read_tokens == 0
    assert short_again.cache_write_tokens == 0


@pytest.mark.parametrize("fmt", OPENAI_FORMATS)
async def test_the_prompt_cache_key_keeps_each_chat_its_own_conversation(fmt: WireFormat) -> None:
    # Two chats with the same system prompt, their requests interleaved: each reads its own previous one.
    async with gateway_for(fmt, cache_key=True) as gateway:
        await usage_of(gateway, ask(PRIMARY_SYSTEM, history(3), chat="telegram:-1001"))
        await usage_of(gateway, ask(PRIMARY_SYSTEM, (user("another chat entirely"),), chat="telegram:-1002"))
        again = await usage_of(gateway, ask(PRIMARY_SYSTEM, history(5), chat="telegram:-1001"))
        whole = await usage_of(gateway, ask(PRIMARY_SYSTEM, history(5), chat="telegram:-1001"))
    # More than the system prompt both chats share: chat 1's history is read too.
    assert_read_like_the_provider(fmt, again, len(PRIMARY_SYSTEM) // 4 + text_tokens(history(3)))
    # The same request twice: all of its prompt, the late message too, short only of the rounding and the
    # body's fields around the prompt (model, tool_choice, prompt_cache_key: under 64 tokens here).
    assert whole.cache_read_tokens > again.cache_read_tokens
    assert whole.input_tokens - whole.cache_read_tokens < CACHE_STEP_TOKENS + 64
