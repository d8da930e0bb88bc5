"""A context-length refusal, in each wire format's own words, leads to compaction and a reply.

The driver (in process, with its fake pipeline and platform) talks to the real LLM gateway, which calls
the fake provider over HTTP in the format under test. The provider's window is small and the driver is
not told about it: the first primary request is refused the way that provider refuses it, the gateway
classifies the refusal as ``context_length``, and the driver compacts and asks again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from larkbot.canonical.llm import AssistantMessage, ToolCallPart
from larkbot.canonical.names import Service
from larkbot.driver.harness import CHAT_ID, World, world
from larkbot.llm_gateway.app import GatewayService
from larkbot.llm_gateway.fake import Action, FakeCall, FakeProvider, Reply, estimate_tokens
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LarkbotConfig
from larkbot.runtime.service import running

WINDOW = 2_000
SETTINGS = {
    "max_context_est_tokens": 50_000,  # never reached: only the provider's refusal compacts
    "working_window_est_tokens": 800,
    "max_segment_est_tokens": 200,
    "probe_context_est_tokens": 1000,
    "summary_max_est_tokens": 200,
    # The window is tiny on purpose; the memory tools and rules alone would take a fifth of it.
    "memory_enabled": False,
}


def script(call: FakeCall) -> Action:
    names = {tool.name for tool in call.request.tools}
    if not names:
        return Reply.text("Members 0-2 talked about message numbers; nobody asked the bot anything.")
    if "decide" in names:
        return Reply.tool_call("decide", {"should_act": "send_message", "reason": "asked directly"})
    sent = any(
        isinstance(m, AssistantMessage)
        and any(isinstance(p, ToolCallPart) and p.name == "send_message" for p in m.parts)
        for m in call.request.messages
    )
    if sent:
        return Reply.tool_call("end_turn", {}, call_id="call_end")
    return Reply.tool_call("send_message", {"text": "still with us"}, call_id="call_send")


@asynccontextmanager
async def gateway(nats_url: str, fmt: str, url: str) -> AsyncIterator[None]:
    endpoint = {"format": fmt, "base_url": url, "model": "small-window", "fake": True}
    config = LarkbotConfig.model_validate(
        {
            "llm": {"endpoints": {"primary": endpoint, "probe": endpoint}},
            "services": {"llm_gateway": {"http_host": "127.0.0.1", "http_port": 0}},
        }
    )
    async with running(Service.LLM_GATEWAY, GatewayService(config), config, nats_url=nats_url):
        yield


@pytest.mark.parametrize("fmt", ["openai-chat", "anthropic-messages", "responses"])
async def test_a_refusal_for_length_compacts_and_the_bot_answers(
    bus: Bus, nats_url: str, tmp_path: Path, fmt: str
) -> None:
    provider = FakeProvider(script, context_window=WINDOW)
    async with provider:
        db = f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"
        async with (
            gateway(nats_url, fmt, provider.url),
            world(bus, nats_url, db, fake_llm=False, **SETTINGS) as w,
        ):
            await chatter(w, 80)
            await w.say(81, 80_000, mentions_me=True, text="@Lark are you still with us?")
            await w.tick(81_000)
            assert w.platform.sent_in(CHAT_ID) == ["still with us"]
            refused = [c for c in provider.calls if estimate_tokens(c.raw) > WINDOW]
            assert len(refused) == 1  # the first primary request, refused as too long
            assert primary(refused[0])
            summaries = await w.driver.repo.summaries("feishu", CHAT_ID)  # type: ignore[union-attr]
            assert len(summaries) == 1
            answered = [c for c in provider.calls if estimate_tokens(c.raw) <= WINDOW and primary(c)]
            assert answered
            assert b"<summary>" in answered[0].raw
            assert w.chat.schedule.retry is None


def primary(call: FakeCall) -> bool:
    return "send_message" in {tool.name for tool in call.request.tools}


async def chatter(w: World, count: int) -> None:
    for n in range(1, count + 1):
        await w.say(n, (n - 1) * 1000, sender=f"ou_{n % 3}", name=f"Member{n % 3}")
