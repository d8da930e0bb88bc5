"""Every metric of the driver, defined once."""

from __future__ import annotations

from prometheus_client import Counter

CONTEXT_UPDATES = Counter(
    "larkbot_driver_context_updates_total",
    "Rendered-context updates received, by outcome (applied, gap, stale)",
    ["outcome"],
)
TYPING_SIGNALS = Counter(
    "larkbot_driver_typing_signals_total", "Typing signals received, by outcome", ["outcome"]
)
