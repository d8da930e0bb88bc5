"""``long_chat`` for ``larkbot bench``: a group that talks for weeks, through the real pipeline and driver on
the bus (the replay of :mod:`.prefixbench`), with a model whose context window is small (16k tokens).

The conversation is :func:`larkbot.driver.bench.conversation` spaced a minute apart (20,000 messages span
about two weeks); the bot answers every mention and every second burst. The model counts tokens its own way
(:class:`.prefixbench.ScriptedModel`), refuses what does not fit its window and reports its token counts,
so the driver has to learn the ratio (calibration) and compact before its requests overflow.

Figures: ``requests`` by purpose, ``over_window`` (requests the model refused: the goal is 0), ``latched``
(wake-ups that failed permanently: 0), ``answers`` (every activation must get its reply, or the replay
stops with an error), ``compactions`` and the summaries' tokens, ``trimmed`` requests, and the primary
requests' cacheable-prefix ratio. A compaction legitimately rewrites the history's head: ``breaks`` counts
the requests that failed to extend their predecessor anywhere else (the goal is 0), and
``ratio_between_compactions`` is the ratio over the requests that do not follow a compaction; ``ratio``
counts every request.
"""

from __future__ import annotations

import secrets
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY

from larkbot.canonical.llm import LLMRequest, TextPart, UserMessage
from larkbot.driver.bench import PrefixReport, conversation, prefix_report, request_bytes
from larkbot.runtime.bus import connect
from larkbot.runtime.config import NatsSettings

from .prefixbench import bench_config, replay_world

WINDOW_TOKENS = 16_000
OUTPUT_TOKENS = 1_024
MESSAGES = 20_000
QUICK_MESSAGES = 600
#: One message a minute: 20,000 messages span two weeks.
SPACING_MS = 60_000
#: The bot answers every mention and every second burst.
REPLY_EVERY = 2


def _summary_of(request: LLMRequest) -> str | None:
    first = request.messages[0]
    if not isinstance(first, UserMessage):
        return None
    part = first.parts[0]
    return part.text if isinstance(part, TextPart) and part.text.startswith("<summary>") else None


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def split_at_compactions(requests: Sequence[LLMRequest]) -> tuple[PrefixReport, PrefixReport, int]:
    """(every request, requests that do not follow a compaction, compaction boundaries)."""
    pairs = request_bytes(requests)
    everything = prefix_report(pairs)
    kept: list[PrefixReport] = []
    boundaries = 0
    start = 0
    for i in range(1, len(requests) + 1):
        if i == len(requests) or _summary_of(requests[i]) != _summary_of(requests[i - 1]):
            kept.append(prefix_report(pairs[start:i]))
            if i < len(requests):
                boundaries += 1
            start = i
    between = PrefixReport(
        0,
        sum(r.requests for r in kept),
        sum(r.request_bytes for r in kept),
        sum(r.shared_bytes for r in kept),
        sum(r.breaks for r in kept),
    )
    return everything, between, boundaries


async def measure(nats_url: str, quick: bool) -> dict[str, Any]:
    messages = QUICK_MESSAGES if quick else MESSAGES
    started = time.perf_counter()
    latched_before = _sample("larkbot_driver_wake_failures_total", outcome="permanent")
    trimmed_before = _sample("larkbot_driver_requests_trimmed_total")
    chat_id = f"oc_long_{secrets.token_hex(4)}"
    endpoint = {
        "format": "openai-chat",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "small-window",
        "context_window_tokens": WINDOW_TOKENS,
        "default_max_output_tokens": OUTPUT_TOKENS,
    }
    llm = {"endpoints": {"primary": endpoint, "probe": endpoint}}
    bus = await connect(NatsSettings(), "long-chat-bench", url=nats_url, give_up_after_s=30)
    try:
        with tempfile.TemporaryDirectory(prefix="larkbot-long-chat-") as tmp:
            root = Path(tmp)
            config = bench_config(chat_id, root, llm=llm)
            async with replay_world(bus, nats_url, chat_id, root, config) as replay:
                replay.model.window_tokens = WINDOW_TOKENS
                replay.model.max_output_tokens = OUTPUT_TOKENS
                answers = reads = 0
                for burst in conversation(messages, spacing_ms=SPACING_MS, reply_every=REPLY_EVERY):
                    await replay.burst(burst)
                    answers += 1 if burst.activation else 0
                    reads += 1 if burst.read_old is not None else 0
                assert replay.driver.repo is not None
                summaries = await replay.driver.repo.summaries(PLATFORM_VALUE, chat_id)
                requests = replay.llm.requests
                primaries = replay.llm.by_purpose("primary")
                over_window = replay.model.over_window
                mention_at_end = replay.platform.sent[-1] if replay.platform.sent else None
    finally:
        await bus.close()
    everything, between, boundaries = split_at_compactions(primaries)
    largest = max((replay.model.tokens(r) for r in requests), default=0)
    return {
        "long_chat": {
            "messages": messages,
            "window_tokens": WINDOW_TOKENS,
            "requests": {
                purpose: sum(1 for r in requests if r.purpose == purpose)
                for purpose in ("probe", "primary", "compaction")
            },
            "largest_request_tokens": largest,
            "over_window": over_window,
            "latched": int(
                _sample("larkbot_driver_wake_failures_total", outcome="permanent") - latched_before
            ),
            "trimmed": int(_sample("larkbot_driver_requests_trimmed_total") - trimmed_before),
            "answers": answers,
            # Primary steps beyond one per answer (a read_old_messages step before the send).
            "primary_extra_steps": reads,
            "last_answer": mention_at_end is not None,
            "compactions": len(summaries),
            "summary_tokens": {
                "total": sum(s.usage.output_tokens for s in summaries),
                "max_est": max((len(s.text) // 2 for s in summaries), default=0),
            },
            "ratio": round(everything.ratio, 4),
            "ratio_between_compactions": round(between.ratio, 4),
            "compaction_boundaries": boundaries,
            "breaks": between.breaks,
            "seconds": round(time.perf_counter() - started, 1),
        }
    }


PLATFORM_VALUE = "feishu"
