"""``long_chat`` for ``larkbot bench``: a group that talks for weeks, through the real pipeline and driver on
the bus (the replay of :mod:`.replay`), with a model whose context window is small (16k tokens).

The conversation is :func:`.prefix.conversation` spaced a minute apart (20,000 messages span
about two weeks); the bot answers every mention and every second burst. The model counts tokens its own way
(:class:`.replay.ScriptedModel`), refuses what does not fit its window and reports its token counts,
so the driver has to learn the ratio (calibration) and compact before its requests overflow.

Figures: ``requests`` by purpose, ``over_window`` (requests the model refused: the goal is 0), ``latched``
(wake-ups that failed permanently: 0), ``answers`` (every activation must get its reply, or the replay
stops with an error), ``compactions`` (and ``compactions_per_answer``) and the summaries' tokens,
``trimmed`` requests, and the primary requests' cacheable-prefix ratio. A compaction legitimately
rewrites the history's head: ``breaks`` counts the requests that failed to extend their predecessor
anywhere else (the goal is 0), and ``ratio_between_compactions`` is the ratio over the requests that do
not follow a compaction; ``ratio`` counts every request. ``provider_cached_share`` is what a provider's
prompt cache would serve of the primary requests' input, counted as OpenAI counts it: the prefix shared
with the chat's previous primary request, in the model's tokens, from 1,024 tokens on in steps of 128.

``long_chat`` runs a 16k-token model; ``long_chat_small`` (:data:`SMALL_WINDOW_TOKENS`, fewer messages)
shows what a small local model gets: there the fixed part of every request (system prompt, tools) is a
large share of the window, and compaction must still leave room for many turns.
"""

from __future__ import annotations

import collections
import secrets
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY

from larkbot.canonical.llm import LLMReply, LLMRequest, TextPart, UserMessage
from larkbot.runtime.bus import connect
from larkbot.runtime.config import NatsSettings

from .prefix import PrefixReport, common_prefix, conversation, prefix_report, request_bytes
from .progress import note
from .replay import ScriptedModel, bench_config, replay_world

WINDOW_TOKENS = 16_000
OUTPUT_TOKENS = 1_024
MESSAGES = 20_000
QUICK_MESSAGES = 600
#: The small model of ``long_chat_small``, and its conversation's length.
SMALL_WINDOW_TOKENS = 8_000
SMALL_MESSAGES = 3_000
#: OpenAI's prompt cache: prefixes from 1,024 tokens on, counted in steps of 128.
CACHE_MIN_TOKENS = 1_024
CACHE_STEP_TOKENS = 128
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


@dataclass
class Watch:
    """What the replay learns from the requests as they pass, without keeping them (a long replay
    makes thousands): counts by purpose, the largest request, and the primary requests' prefix sharing,
    split at compaction boundaries (a request whose summary differs from its predecessor's)."""

    counts: collections.Counter[str] = field(default_factory=collections.Counter)
    largest_tokens: int = 0
    everything: PrefixReport = field(default_factory=lambda: PrefixReport(0, 0, 0, 0, 0))
    between: PrefixReport = field(default_factory=lambda: PrefixReport(0, 0, 0, 0, 0))
    boundaries: int = 0
    #: Compaction requests since the last primary request: at the end of a replay, the compactions no
    #: primary request followed (the compactor runs after a wake-up, so the last one may come last).
    compactions_since_primary: int = 0
    #: The primary requests' input and what a provider's prompt cache would have served of it (tokens).
    primary_input_tokens: int = 0
    primary_cached_tokens: int = 0
    _previous: tuple[bytes, bytes, str | None] | None = None

    def see(self, request: LLMRequest, tokens: int) -> None:
        self.counts[request.purpose] += 1
        self.largest_tokens = max(self.largest_tokens, tokens)
        if request.purpose == "compaction":
            self.compactions_since_primary += 1
        if request.purpose != "primary":
            return
        self.compactions_since_primary = 0
        [(full, stable)] = request_bytes([request])
        summary = _summary_of(request)
        previous, self._previous = self._previous, (full, stable, summary)
        self.primary_input_tokens += tokens
        if previous is not None:
            self.primary_cached_tokens += cached_tokens(common_prefix(previous[0], full), tokens)
        if previous is None:
            self.everything = _add(self.everything, prefix_report([]), requests=1)
            self.between = _add(self.between, prefix_report([]), requests=1)
            return
        pair = prefix_report([(previous[0], previous[1]), (full, stable)])
        self.everything = _add(self.everything, pair, requests=1)
        if previous[2] != summary:
            self.boundaries += 1
        else:
            self.between = _add(self.between, pair, requests=1)


def cached_tokens(shared_bytes: int, input_tokens: int) -> int:
    """What an OpenAI-style prompt cache serves of a request sharing ``shared_bytes`` with the previous
    one (the model's tokens: a token per three bytes, as :class:`.replay.ScriptedModel` counts)."""
    shared = min(shared_bytes // 3, input_tokens)
    return 0 if shared < CACHE_MIN_TOKENS else shared - shared % CACHE_STEP_TOKENS


def _add(total: PrefixReport, pair: PrefixReport, *, requests: int) -> PrefixReport:
    return PrefixReport(
        0,
        total.requests + requests,
        total.request_bytes + pair.request_bytes,
        total.shared_bytes + pair.shared_bytes,
        total.breaks + pair.breaks,
    )


@dataclass
class WatchedModel(ScriptedModel):
    """The scripted model, watching every request before it answers."""

    watch: Watch = field(default_factory=Watch)

    async def __call__(self, request: LLMRequest) -> LLMReply:
        self.watch.see(request, self.tokens(request))
        return await super().__call__(request)


async def measure(nats_url: str, quick: bool) -> dict[str, Any]:
    """``long_chat`` (16k tokens) and ``long_chat_small`` (8k tokens)."""
    large = await measure_window(nats_url, QUICK_MESSAGES if quick else MESSAGES, WINDOW_TOKENS)
    small = await measure_window(nats_url, QUICK_MESSAGES if quick else SMALL_MESSAGES, SMALL_WINDOW_TOKENS)
    return {"long_chat": large, "long_chat_small": small}


async def measure_window(nats_url: str, messages: int, window_tokens: int) -> dict[str, Any]:
    started = time.perf_counter()
    latched_before = _sample("larkbot_driver_wake_failures_total", outcome="permanent")
    trimmed_before = _sample("larkbot_driver_requests_trimmed_total")
    chat_id = f"oc_long_{secrets.token_hex(4)}"
    endpoint = {
        "format": "openai-chat",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "small-window",
        "context_window_tokens": window_tokens,
        "default_max_output_tokens": OUTPUT_TOKENS,
    }
    llm = {"endpoints": {"primary": endpoint, "probe": endpoint}}
    bus = await connect(NatsSettings(), "long-chat-bench", url=nats_url, give_up_after_s=30)
    try:
        with tempfile.TemporaryDirectory(prefix="larkbot-long-chat-") as tmp:
            root = Path(tmp)
            config = bench_config(chat_id, root, llm=llm)
            async with replay_world(bus, nats_url, chat_id, root, config) as replay:
                model = WatchedModel(replay.model.probe, replay.model.primary, window_tokens, OUTPUT_TOKENS)
                watch = model.watch
                replay.model = model
                replay.llm.script = model
                replay.llm.keep = False
                answers = reads = sent = 0
                step = max(1, messages // 10)
                for burst in conversation(messages, spacing_ms=SPACING_MS, reply_every=REPLY_EVERY):
                    await replay.burst(burst)
                    answers += 1 if burst.activation else 0
                    reads += 1 if burst.read_old is not None else 0
                    done = sent + len(burst.lines)
                    if done // step > sent // step:
                        note(f"{window_tokens:,}-token window: {done:,}/{messages:,} messages")
                    sent = done
                summaries = await replay.driver.repo.summaries(PLATFORM_VALUE, chat_id)
                over_window = model.over_window
                mention_at_end = replay.platform.sent[-1] if replay.platform.sent else None
    finally:
        await bus.close()
    everything, between = watch.everything, watch.between
    input_tokens = watch.primary_input_tokens
    return {
        "messages": messages,
        "window_tokens": window_tokens,
        "requests": {purpose: watch.counts[purpose] for purpose in ("probe", "primary", "compaction")},
        "largest_request_tokens": watch.largest_tokens,
        "over_window": over_window,
        "latched": int(_sample("larkbot_driver_wake_failures_total", outcome="permanent") - latched_before),
        "trimmed": int(_sample("larkbot_driver_requests_trimmed_total") - trimmed_before),
        "answers": answers,
        # Primary steps beyond one per answer (a read_old_messages step before the send).
        "primary_extra_steps": reads,
        "last_answer": mention_at_end is not None,
        "compactions": len(summaries),
        "compactions_per_answer": round(len(summaries) / answers, 3) if answers else None,
        "summary_tokens": {
            "total": sum(s.usage.output_tokens for s in summaries),
            "max_est": max((len(s.text) // 2 for s in summaries), default=0),
        },
        "ratio": round(everything.ratio, 4),
        "ratio_between_compactions": round(between.ratio, 4),
        "compaction_boundaries": watch.boundaries,
        "compactions_after_last_primary": watch.compactions_since_primary,
        "breaks": between.breaks,
        "provider_cached_share": round(watch.primary_cached_tokens / input_tokens, 4)
        if input_tokens
        else None,
        "seconds": round(time.perf_counter() - started, 1),
    }


PLATFORM_VALUE = "feishu"
