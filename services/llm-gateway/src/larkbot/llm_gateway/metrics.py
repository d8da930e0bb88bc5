"""Every metric of the LLM gateway, defined once.

Labels: ``model`` (the configured endpoint's model name — a small, operator-chosen set; ``unknown`` when
the request named no configured endpoint) and ``purpose`` (probe, primary, compaction, vision, memory,
transcription).
Cache hit ratio per model::

    sum by (model) (rate(larkbot_llm_cache_read_tokens_total[5m]))
      / sum by (model) (rate(larkbot_llm_input_tokens_total[5m]))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import Counter, Histogram

if TYPE_CHECKING:
    from .outcome import Outcome

_LABELS = ["model", "purpose"]
_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120)
_OVERHEAD_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 1)

FALLBACKS = Counter(
    "larkbot_llm_fallbacks_total",
    "Calls handed to the purpose's next fallback endpoint (llm.fallbacks) after the one asked failed, by "
    "purpose, the endpoint that failed and the one asked next",
    ["purpose", "failed", "fallback"],
)
REQUESTS = Counter(
    "larkbot_llm_requests_total",
    "llm.generate calls by outcome "
    "(ok, transient, permanent, deadline, invalid_request, config, context_length)",
    [*_LABELS, "outcome"],
)
REQUEST_SECONDS = Histogram(
    "larkbot_llm_request_duration_seconds",
    "Time from receiving an llm.generate call to its reply, retries included",
    _LABELS,
    buckets=_LATENCY_BUCKETS,
)
PROVIDER_SECONDS = Histogram(
    "larkbot_llm_provider_duration_seconds",
    "Time spent in provider HTTP calls, per call attempt",
    _LABELS,
    buckets=_LATENCY_BUCKETS,
)
OVERHEAD_SECONDS = Histogram(
    "larkbot_llm_gateway_overhead_seconds",
    "Time in the gateway minus provider time and retry waits (encoding, images, decoding)",
    _LABELS,
    buckets=_OVERHEAD_BUCKETS,
)
RETRIES = Counter(
    "larkbot_llm_retries_total",
    "Provider calls beyond the first, by reason: a transient failure (status_<code>, timeout, connect, "
    "response_failed), a resend without a refused parameter (unsupported_parameter), a paused turn "
    "continued (pause_turn)",
    [*_LABELS, "reason"],
)
INPUT_TOKENS = Counter(
    "larkbot_llm_input_tokens_total", "Billable input tokens, cache reads and writes included", _LABELS
)
OUTPUT_TOKENS = Counter("larkbot_llm_output_tokens_total", "Output tokens, reasoning included", _LABELS)
CACHE_READ_TOKENS = Counter(
    "larkbot_llm_cache_read_tokens_total", "Input tokens read from the cache", _LABELS
)
CACHE_WRITE_TOKENS = Counter(
    "larkbot_llm_cache_write_tokens_total", "Input tokens written to the cache (Anthropic)", _LABELS
)
REASONING_TOKENS = Counter(
    "larkbot_llm_reasoning_tokens_total", "Reasoning tokens, where the provider reports them", _LABELS
)
IMAGES_OMITTED = Counter(
    "larkbot_llm_images_omitted_total", "Images replaced by a placeholder to respect max_images", _LABELS
)


def record(outcome: Outcome) -> None:
    """Account one finished call."""
    labels = (outcome.model, outcome.purpose)
    REQUESTS.labels(*labels, outcome.outcome).inc()
    REQUEST_SECONDS.labels(*labels).observe(outcome.total_s)
    OVERHEAD_SECONDS.labels(*labels).observe(outcome.overhead_s)
    for seconds in outcome.provider_s:
        PROVIDER_SECONDS.labels(*labels).observe(seconds)
    for reason in outcome.retries:
        RETRIES.labels(*labels, reason).inc()
    if outcome.images_omitted:
        IMAGES_OMITTED.labels(*labels).inc(outcome.images_omitted)
    usage = outcome.usage
    if usage is not None:
        INPUT_TOKENS.labels(*labels).inc(usage.input_tokens)
        OUTPUT_TOKENS.labels(*labels).inc(usage.output_tokens)
        CACHE_READ_TOKENS.labels(*labels).inc(usage.cache_read_tokens)
        CACHE_WRITE_TOKENS.labels(*labels).inc(usage.cache_write_tokens)
        if usage.reasoning_tokens is not None:
            REASONING_TOKENS.labels(*labels).inc(usage.reasoning_tokens)
