"""One turn is one trace: every service exports its spans over OTLP/HTTP to a collector, and the spans of
a member's message and the bot's reply form one connected tree, from the ingress receiving the event to
the ingress sending the reply.

    feishu receive → publish events → pipeline commit → pipeline render → publish context
      → process CONTEXT → driver wake-up → probe / primary step → request llm.generate
      → serve llm.generate → chat <model> → attempt → … → tool send_message → request actions
      → serve actions.feishu → feishu send_message
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from tests.harness.otlp import Collected, Collector, collecting
from tests.harness.world import World, world

from larkbot.runtime.bus import Bus
from larkbot.testkit.botscript import BotScript
from larkbot.testkit.payloads import feishu_text
from larkbot.testkit.stack import SERVICES, until

from .conftest import MEMBER

CHAT = "oc_e2e_traced"


@pytest.fixture(scope="module")
async def traced(
    tmp_path_factory: pytest.TempPathFactory, e2e_bus: Bus, nats_url: str
) -> AsyncIterator[tuple[World, Collector]]:
    script = BotScript()
    async with collecting() as (collector, url):
        # Exported every 100 ms instead of every 5 s, so the test waits for spans, not for a timer.
        otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_BSP_SCHEDULE_DELAY": "100"}
        async with world(
            tmp_path_factory.mktemp("traced"),
            e2e_bus,
            nats_url,
            script,
            {f"feishu:{CHAT}": {}},
            service_env={name: otel for name in SERVICES},
        ) as w:
            yield w, collector


def _chain(spans: list[Collected], leaf: Collected) -> list[str]:
    """The names from the root down to ``leaf``."""
    by_id = {s.span_id: s for s in spans}
    names = [leaf.name]
    span = leaf
    while span.parent_id:
        span = by_id[span.parent_id]
        names.append(span.name)
    return names[::-1]


def _subsequence(wanted: list[str], names: list[str]) -> bool:
    found = iter(names)
    return all(any(name == want for name in found) for want in wanted)


async def test_a_turn_is_one_connected_trace_across_the_services(traced: tuple[World, Collector]) -> None:
    w, collector = traced
    envelope = feishu_text(
        CHAT, 1, "#send toktrace tell me", sender=MEMBER, create_time_ms=time.time_ns() // 10**6
    )
    assert await w.feishu.long_connection.push(envelope) == 200
    await until(
        lambda: any(s.chat_id == CHAT for s in w.feishu.sent.values()), "the reply at the fake Feishu"
    )

    def sent() -> list[Collected]:
        return [s for s in collector.spans if s.name == "feishu send_message"]

    await until(lambda: bool(sent()), "the span of the reply's send at the collector")
    trace_id = sent()[0].trace_id

    def complete() -> bool:
        # The batches of six processes arrive in any order: wait until no span's parent is missing.
        spans = collector.trace(trace_id)
        ids = {s.span_id for s in spans}
        return bool(spans) and all(not s.parent_id or s.parent_id in ids for s in spans)

    await until(complete, "every span of the turn's trace at the collector")
    spans = collector.trace(trace_id)

    roots = [s for s in spans if not s.parent_id]
    assert [(r.service, r.name) for r in roots] == [("larkbot-ingress-feishu", "feishu receive")]
    assert {s.service for s in spans} >= {
        "larkbot-ingress-feishu",
        "larkbot-pipeline",
        "larkbot-driver",
        "larkbot-llm-gateway",
    }
    send_chain = _chain(spans, sent()[0])
    assert _subsequence(
        [
            "feishu receive",
            "publish events.feishu",
            "pipeline commit",
            "pipeline render",
            "process CONTEXT",
            "driver wake-up",
            "tool send_message",
            "request actions.feishu",
            "serve actions.feishu",
            "feishu send_message",
        ],
        send_chain,
    ), send_chain
    # The probe and the primary step each called the model through the gateway, which reports its tokens.
    model_calls = [s for s in spans if s.name.startswith("chat ") and s.service == "larkbot-llm-gateway"]
    purposes = sorted(str(s.attributes["larkbot.purpose"]) for s in model_calls)
    assert purposes == ["primary", "probe"]
    for call in model_calls:
        chain = _chain(spans, call)
        step = "probe" if call.attributes["larkbot.purpose"] == "probe" else "primary step"
        assert _subsequence(["driver wake-up", step, "request llm.generate", "serve llm.generate"], chain), (
            chain
        )
        assert isinstance(call.attributes["gen_ai.usage.input_tokens"], int)
        assert call.attributes["gen_ai.usage.input_tokens"] > 0
    wake = next(s for s in spans if s.name == "driver wake-up")
    assert wake.attributes["larkbot.chat"] == f"feishu:{CHAT}"
