"""Every metric of ingress-feishu, defined once (no chat or user ids as labels)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

ACTIONS = Counter(
    "larkbot_ingress_feishu_actions_total",
    "Action requests served, by action kind and outcome",
    ["kind", "outcome"],
)
EVENTS = Counter(
    "larkbot_ingress_feishu_events_total",
    "Feishu events received, by event type and outcome (published, duplicate, dropped_*, dead_lettered, "
    "failed)",
    ["event_type", "outcome"],
)
EVENT_SECONDS = Histogram(
    "larkbot_ingress_feishu_event_seconds",
    "From arrival of a Feishu event to its acknowledgement decision (PubAck included)",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
API_REQUESTS = Counter(
    "larkbot_ingress_feishu_api_requests_total",
    "Feishu OpenAPI calls, by route and outcome (ok, rate_limited, timeout, transport, error)",
    ["route", "outcome"],
)
API_SECONDS = Histogram("larkbot_ingress_feishu_api_seconds", "Duration of Feishu OpenAPI calls", ["route"])
RATE_LIMIT_WAIT_SECONDS = Counter(
    "larkbot_ingress_feishu_rate_limit_wait_seconds_total",
    "Time spent waiting for Feishu rate-limit resets and send pacing",
    ["reason"],
)
SEND_RETRIES = Counter(
    "larkbot_ingress_feishu_send_retries_total",
    "Send attempts repeated with the same uuid, by reason (rate_limited, transient: a 5xx answer or a "
    "request that never reached Feishu, lost: a timeout or a connection closed before the answer)",
    ["reason"],
)
for _reason in ("rate_limited", "transient", "lost"):
    SEND_RETRIES.labels(_reason)
NAME_LOOKUPS = Counter(
    "larkbot_ingress_feishu_name_lookups_total", "Contact name lookups, by outcome", ["outcome"]
)
SELF_EVENTS = Counter(
    "larkbot_ingress_feishu_self_events_total",
    "Synthetic events reporting the bot's confirmed sends and recalls, by outcome (published, failed: the "
    "bus did not take it within 30 s of retries)",
    ["outcome"],
)
for _outcome in ("published", "failed"):
    SELF_EVENTS.labels(_outcome)
CONNECTED = Gauge(
    "larkbot_ingress_feishu_connected", "1 while the long connection (or the webhook server) is up"
)
LAST_FRAME_AGE = Gauge(
    "larkbot_ingress_feishu_last_frame_timestamp_seconds",
    "Unix time of the last event or pong seen on the long connection",
)
WEBHOOK_REJECTED = Counter(
    "larkbot_ingress_feishu_webhook_rejected_total", "Webhook callbacks rejected, by reason", ["reason"]
)
MODERATION_BANS = Counter(
    "larkbot_ingress_feishu_moderation_bans_total",
    "Members removed for ban_spammer, by outcome (banned, not_member, refused_permission, failed)",
    ["outcome"],
)
MODERATION_DELETIONS = Counter(
    "larkbot_ingress_feishu_moderation_deletions_total",
    "Messages of a banned member recalled for ban_spammer, by outcome (deleted, failed, skipped)",
    ["outcome"],
)
