"""The service end to end over the real bus: queue-group endpoint, object-store images, typed errors."""

from __future__ import annotations

import base64
import io
import time

from PIL import Image

from larkbot.canonical.codec import headers_for
from larkbot.canonical.llm import (
    LLM_REPLY_ADAPTER,
    ImagePart,
    LLMError,
    LLMRequest,
    LLMResponse,
    TextPart,
    UserMessage,
)
from larkbot.canonical.names import OBJECT_STORE_BLOBS, SUBJECT_LLM_GENERATE, Service
from larkbot.llm_gateway.app import GatewayService
from larkbot.llm_gateway.fake import FakeProvider, Reply
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LarkbotConfig, LlmEndpoint, LlmSettings
from larkbot.runtime.service import built


def png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(out, format="PNG")
    return out.getvalue()


def request(*parts: TextPart | ImagePart, endpoint: str = "main") -> LLMRequest:
    return LLMRequest(
        request_id="e2e-1",
        purpose="vision",
        endpoint=endpoint,
        system="describe",
        messages=(UserMessage(parts=parts),),
        deadline_ms=time.time_ns() // 1_000_000 + 20_000,
    )


def config_for(url: str) -> LarkbotConfig:
    endpoint = LlmEndpoint(
        format="anthropic-messages", base_url=url, model="fake-vision", fake=True, max_images=4
    )
    return LarkbotConfig(llm=LlmSettings(endpoints={"main": endpoint}))


async def test_generate_over_the_bus_with_object_store_images(bus: Bus, nats_url: str) -> None:
    store = await bus.js.object_store(OBJECT_STORE_BLOBS)
    await store.put("sha256-wide", png(2000, 1000))
    await store.put("sha256-small", png(100, 80))
    async with FakeProvider(lambda _call: Reply.text("a red rectangle")) as fake:
        config = config_for(fake.url)
        async with built(Service.LLM_GATEWAY, GatewayService(config), config, nats_url=nats_url):
            ask = request(
                TextPart(text="what is this?"),
                ImagePart(blob_key="sha256-wide", mime="image/png", detail="low"),
                ImagePart(blob_key="sha256-wide", mime="image/png", detail="high"),
                ImagePart(blob_key="sha256-small", mime="image/png", detail="high"),
            )
            reply = await bus.request_as(SUBJECT_LLM_GENERATE, ask, LLM_REPLY_ADAPTER, timeout_s=20)
            missing = request(ImagePart(blob_key="sha256-missing", mime="image/png"))
            missing_reply = await bus.request_as(
                SUBJECT_LLM_GENERATE, missing, LLM_REPLY_ADAPTER, timeout_s=20
            )
    assert isinstance(reply, LLMResponse), reply
    assert reply.message.parts == (TextPart(text="a red rectangle"),)
    assert reply.usage.input_tokens > 0
    blocks = fake.calls[0].body["messages"][0]["content"]
    sizes = [Image.open(io.BytesIO(base64.b64decode(b["source"]["data"]))).size for b in blocks[1:]]
    assert sizes == [(512, 256), (1024, 512), (100, 80)]
    assert isinstance(missing_reply, LLMError)
    assert missing_reply.category == "invalid_request"
    assert "sha256-missing" in missing_reply.message


async def test_unknown_endpoint_and_bad_payloads_get_typed_replies(bus: Bus, nats_url: str) -> None:
    config = config_for("http://127.0.0.1:9/v1")
    async with built(Service.LLM_GATEWAY, GatewayService(config), config, nats_url=nats_url):
        unknown = await bus.request_as(
            SUBJECT_LLM_GENERATE,
            request(TextPart(text="hi"), endpoint="nope"),
            LLM_REPLY_ADAPTER,
            timeout_s=20,
        )
        raw = await bus.nc.request(
            SUBJECT_LLM_GENERATE,
            b'{"request_id":"bad-1"}',
            timeout=20,
            headers=headers_for(request(TextPart(text="x"))),
        )
    assert isinstance(unknown, LLMError)
    assert unknown.category == "config"
    bad = LLM_REPLY_ADAPTER.validate_json(raw.data)
    assert isinstance(bad, LLMError)
    assert (bad.request_id, bad.category) == ("bad-1", "invalid_request")


async def test_cache_reads_reach_the_normalized_usage_over_the_bus(bus: Bus, nats_url: str) -> None:
    # Issue 15: the playground's path — two primary requests of a chat with a probe between them.
    system = "You are LarkBot, a member of this group chat. Read the conversation and act. " * 80

    def ask(request_id: str, system: str, *texts: str) -> LLMRequest:
        return LLMRequest(
            request_id=request_id,
            purpose="primary",
            endpoint="main",
            system=system,
            messages=tuple(UserMessage(parts=(TextPart(text=t),)) for t in texts),
            deadline_ms=time.time_ns() // 1_000_000 + 20_000,
        )

    async with FakeProvider() as fake:
        endpoint = LlmEndpoint(format="openai-chat", base_url=fake.url, model="fake", fake=True)
        config = LarkbotConfig(llm=LlmSettings(endpoints={"main": endpoint}))
        async with built(Service.LLM_GATEWAY, GatewayService(config), config, nats_url=nats_url):
            replies = [
                await bus.request_as(SUBJECT_LLM_GENERATE, request, LLM_REPLY_ADAPTER, timeout_s=20)
                for request in (
                    ask("p-1", system, "hello"),
                    ask("probe-1", "Decide whether to act.", "hello"),
                    ask("p-2", system, "hello", "and more"),
                )
            ]
    first, probe, second = replies
    assert isinstance(first, LLMResponse), first
    assert isinstance(probe, LLMResponse), probe
    assert isinstance(second, LLMResponse), second
    assert (first.usage.cache_read_tokens, probe.usage.cache_read_tokens) == (0, 0)
    assert second.usage.cache_read_tokens >= len(system) // 4 // 128 * 128 >= 1024
