"""The budgets' metrics, exported by the ingress services that spend them (no chat ids as labels: a
chat's minute budget shows only as its refusals)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

__all__ = ["LIMIT", "REFUSALS", "REMAINING", "RETRIES"]

REMAINING = Gauge(
    "larkbot_ingress_budget_remaining",
    "What a platform-wide budget (API calls per UTC day, per UTC month) has left, as this replica last saw",
    ["platform", "scope"],
)
LIMIT = Gauge(
    "larkbot_ingress_budget_limit",
    "A platform-wide budget as configured (absent: unlimited)",
    ["platform", "scope"],
)
REFUSALS = Counter(
    "larkbot_ingress_budget_refusals_total",
    "Actions refused because a budget was spent (scope minute: a chat's messages per minute)",
    ["platform", "scope"],
)
RETRIES = Counter(
    "larkbot_ingress_budget_retries_total",
    "Spends asked again because a budget bucket did not answer (an election, a restarted server)",
)
