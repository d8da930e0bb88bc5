"""Metrics every service exports through the runtime (names ``larkbot_<area>_<what>_<unit>``).

One process per container, so the default registry is the process's registry. Labels never carry chat or
user ids: only component, consumer, outcome and reason classes with a small fixed set of values.

No label is named like a target label a scraper sets (``job``, ``instance``, and the Prometheus
Operator's ``service``, ``endpoint``, ``pod``, ``namespace``, ``container``): the Operator would rename ours
``exported_<name>``. The running service is ``component``; a request/reply endpoint is ``handler``.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

__all__ = [
    "BOOTSTRAP_KEPT",
    "BUS_CONNECTED",
    "BUS_RECONNECTS",
    "BUS_SERVER",
    "CONSUMER_ACK_PENDING",
    "CONSUMER_PENDING",
    "DATABASE_WAITING",
    "DEAD_LETTERS",
    "HANDLE_SECONDS",
    "MESSAGES",
    "PARTITION_TAKEOVER_FAILURES",
    "REQUESTS",
    "REQUEST_SECONDS",
    "SERVICE_INFO",
    "SERVICE_READY",
    "SERVICE_START_TIME",
    "SUBSCRIPTION_MESSAGES",
    "WATCH_UPDATES",
    "set_bus_server",
]

SERVICE_INFO = Gauge(
    "larkbot_service_info", "Constant 1, labelled with the running service", ["component", "version"]
)
SERVICE_READY = Gauge("larkbot_service_ready", "1 when /readyz answers ready", ["component"])
SERVICE_START_TIME = Gauge(
    "larkbot_service_start_time_seconds", "Unix time the service started", ["component"]
)

BUS_CONNECTED = Gauge("larkbot_bus_connected", "1 while the NATS connection is up", ["component"])
BUS_SERVER = Gauge(
    "larkbot_bus_server_info",
    "1 for the NATS server (host:port) the service is connected to now; absent while disconnected",
    ["component", "server"],
)
BOOTSTRAP_KEPT = Counter(
    "larkbot_bootstrap_kept_total",
    "Settings of a stream or bucket the bootstrap kept as an operator set them, against the configuration "
    "(more replicas, a tighter limit, another discard policy)",
    ["asset", "setting"],
)
BUS_RECONNECTS = Counter(
    "larkbot_bus_reconnects_total", "NATS reconnections after a disconnect", ["component"]
)

MESSAGES = Counter(
    "larkbot_bus_messages_total",
    "Messages handled by a consumer, by outcome (ack, nak, term)",
    ["consumer", "outcome"],
)
HANDLE_SECONDS = Histogram(
    "larkbot_bus_handle_seconds",
    "Time to handle one consumed message",
    ["consumer"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
DEAD_LETTERS = Counter(
    "larkbot_bus_dead_letters_total",
    "Messages terminated and recorded in the dead-letter stream, by reason class",
    ["consumer", "reason"],
)
CONSUMER_PENDING = Gauge(
    "larkbot_bus_consumer_pending_messages",
    "Messages in the stream not yet delivered to the consumer (lag)",
    ["consumer"],
)
CONSUMER_ACK_PENDING = Gauge(
    "larkbot_bus_consumer_ack_pending_messages",
    "Messages delivered to the consumer and not yet acknowledged",
    ["consumer"],
)
REQUESTS = Counter(
    "larkbot_bus_requests_total",
    "Request/reply requests served, by outcome (ok, bad_request, retryable, error)",
    ["handler", "outcome"],
)
REQUEST_SECONDS = Histogram(
    "larkbot_bus_request_seconds",
    "Time to serve one request/reply request",
    ["handler"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
SUBSCRIPTION_MESSAGES = Counter(
    "larkbot_bus_subscription_messages_total",
    "Core NATS messages handled by an ephemeral subscription, by outcome (ok, undecodable, error)",
    ["subscription", "outcome"],
)
WATCH_UPDATES = Counter(
    "larkbot_bus_watch_updates_total",
    "KV bucket updates handled by a watch, by outcome (ok, undecodable, error)",
    ["bucket", "outcome"],
)

PARTITION_TAKEOVER_FAILURES = Counter(
    "larkbot_partition_takeover_failures_total",
    "Partition take-overs that failed (the owner's acquire raised): the lease is given back and the "
    "take-over tried again after a backoff; by lease group (driver, pipeline)",
    ["group"],
)

DATABASE_WAITING = Gauge(
    "larkbot_database_transactions_waiting",
    "Transactions waiting for their turn: as many run at once as the pool keeps connections, the others "
    "wait here (no timeout) instead of in the pool's queue (runtime.db.transaction)",
)


def set_bus_server(service: str, server: str) -> None:
    """Show ``server`` as the one ``service`` is connected to (``""``: none), dropping the previous one."""
    for labels in [m for m in _bus_servers if m[0] == service and m[1] != server]:
        BUS_SERVER.remove(*labels)
        _bus_servers.discard(labels)
    if server:
        BUS_SERVER.labels(service, server).set(1)
        _bus_servers.add((service, server))


_bus_servers: set[tuple[str, str]] = set()
