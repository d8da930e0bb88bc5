"""Gateway overhead benchmark: ``llm.generate`` over a real bus against the fake provider at zero latency.

``overhead`` is the gateway's own time per call (receive → reply, minus provider HTTP time): decoding,
preparation, encoding, decoding the reply, accounting. ``roundtrip`` is what a caller sees over NATS and
includes the fake's own HTTP handling, so it is an upper bound. Targets: overhead p50 ≤ 3 ms, p99 ≤ 15 ms.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from larkbot.canonical.llm import (
    LLM_REPLY_ADAPTER,
    AssistantMessage,
    LLMRequest,
    LLMResponse,
    Message,
    TextPart,
    ToolCallPart,
    ToolChoice,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from larkbot.canonical.names import SUBJECT_LLM_GENERATE, Service
from larkbot.llm_gateway.app import GatewayService
from larkbot.llm_gateway.fake import FakeProvider, Reply
from larkbot.llm_gateway.outcome import Outcome
from larkbot.runtime.bus import connect
from larkbot.runtime.config import LarkbotConfig, LlmEndpoint, LlmSettings, NatsSettings
from larkbot.runtime.natsserver import EmbeddedNats
from larkbot.runtime.service import built

TARGETS = {"overhead_p50_ms": 3.0, "overhead_p99_ms": 15.0}


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _request(index: int) -> LLMRequest:
    messages: list[Message] = []
    for turn in range(12):
        text = f'<message id="m{turn}" sender="User {turn % 3}" t="05-01 10:{turn:02d}:00">' + "word " * 60
        messages.append(UserMessage(parts=(TextPart(text=text + "</message>"),)))
        call = ToolCallPart(id=f"call_{turn}", name="send_message", arguments_json='{"text":"sure, on it"}')
        messages.append(AssistantMessage(parts=(call,)))
        messages.append(ToolResultMessage(tool_call_id=f"call_{turn}", parts=(TextPart(text="sent"),)))
    messages.append(UserMessage(parts=(TextPart(text="late binding: 2031-05-01 10:30"),)))
    tools = tuple(
        ToolSpec.of(name, f"The {name} tool", {"type": "object", "properties": {"text": {"type": "string"}}})
        for name in ("send_message", "react", "end_turn", "read_image", "memory_search")
    )
    return LLMRequest(
        request_id=f"bench-{index}",
        purpose="primary",
        endpoint="bench",
        system="You are Lark, a member of this group chat. " * 50,
        messages=tuple(messages),
        tools=tools,
        tool_choice=ToolChoice(mode="any"),
        deadline_ms=time.time_ns() // 1_000_000 + 60_000,
        chat_key="feishu:oc_bench",
    )


async def measure(n: int, nats_url: str, *, warmup: int = 20) -> dict[str, Any]:
    """Run ``n`` sequential calls (after ``warmup``) and report quantiles in milliseconds."""
    outcomes: list[Outcome] = []
    reply = Reply.tool_call("end_turn", {})
    async with FakeProvider(lambda _call: reply) as fake:
        endpoint = LlmEndpoint(format="openai-chat", base_url=fake.url, model="bench", fake=True)
        config = LarkbotConfig(llm=LlmSettings(endpoints={"bench": endpoint}))
        service = GatewayService(config, on_outcome=outcomes.append)
        async with built(Service.LLM_GATEWAY, service, config, nats_url=nats_url):
            bus = await connect(NatsSettings(), "bench", url=nats_url, give_up_after_s=30)
            try:
                roundtrips: list[float] = []
                for index in range(warmup + n):
                    request = _request(index)
                    started = time.perf_counter()
                    answer = await bus.request_as(
                        SUBJECT_LLM_GENERATE, request, LLM_REPLY_ADAPTER, timeout_s=30
                    )
                    elapsed = time.perf_counter() - started
                    if not isinstance(answer, LLMResponse):
                        raise RuntimeError(f"benchmark call failed: {answer.category}: {answer.message}")
                    if index >= warmup:
                        roundtrips.append(elapsed * 1000)
            finally:
                await bus.close()
    measured = outcomes[warmup:]
    overhead = [o.overhead_s * 1000 for o in measured]
    provider = [sum(o.provider_s) * 1000 for o in measured]
    result = {
        "name": "llm_gateway",
        "n": n,
        "overhead_p50_ms": round(_quantile(overhead, 0.5), 3),
        "overhead_p99_ms": round(_quantile(overhead, 0.99), 3),
        "roundtrip_p50_ms": round(_quantile(roundtrips, 0.5), 3),
        "roundtrip_p99_ms": round(_quantile(roundtrips, 0.99), 3),
        "provider_p50_ms": round(statistics.median(provider), 3),
        "targets": TARGETS,
    }
    result["ok"] = all(result[key] <= target for key, target in TARGETS.items())  # type: ignore[operator]
    return result


def run(n: int = 500) -> dict[str, Any]:
    """``larkbot bench`` entry: uses ``NATS_URL`` when set, else an embedded server in a temp dir."""
    url = os.environ.get("NATS_URL")
    if url:
        return asyncio.run(measure(n, url))
    with tempfile.TemporaryDirectory(prefix="larkbot-bench-") as tmp:
        server = EmbeddedNats(Path(tmp))
        started = server.start()
        try:
            return asyncio.run(measure(n, started))
        finally:
            server.stop()
