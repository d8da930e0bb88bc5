"""Every metric of the LLM gateway, defined once."""

from __future__ import annotations

from prometheus_client import Counter

REQUESTS = Counter(
    "larkbot_llm_requests_total", "llm.generate requests, by purpose and outcome", ["purpose", "outcome"]
)
