"""Every metric of the pipeline, defined once."""

from __future__ import annotations

from prometheus_client import Counter

EVENTS = Counter(
    "larkbot_pipeline_events_total",
    "Canonical events consumed from EVENTS, by kind and outcome (committed, duplicate)",
    ["kind", "outcome"],
)
