"""Every metric of ingress-telegram, defined once."""

from __future__ import annotations

from prometheus_client import Counter

ACTIONS = Counter(
    "larkbot_ingress_actions_total", "Action requests served, by action kind and outcome", ["kind", "outcome"]
)
