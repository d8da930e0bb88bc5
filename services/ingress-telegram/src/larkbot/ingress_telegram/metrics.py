"""Every metric of ingress-telegram, defined once (no chat or user ids as labels)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

ACTIONS = Counter(
    "larkbot_telegram_actions_total",
    "Action requests served, by action kind and outcome",
    ["kind", "outcome"],
)
UPDATES = Counter(
    "larkbot_telegram_updates_total",
    "Bot API updates handled: published (by event kind), dropped (by reason), dead_lettered (by reason)",
    ["outcome", "detail"],
)
PUBLISH_RETRIES = Counter(
    "larkbot_telegram_publish_retries_total",
    "Inbound writes (events, chat migrations, dead-letter records) retried because the bus did not answer",
)
DUPLICATES = Counter(
    "larkbot_telegram_duplicate_events_total",
    "Events JetStream recognised as duplicates by their Nats-Msg-Id (a repeated update)",
)
LAST_UPDATE = Gauge("larkbot_telegram_last_update_timestamp_seconds", "Unix time the last update was handled")
POLLING_FAILING = Gauge(
    "larkbot_telegram_polling_failing",
    "1 while getUpdates fails (aiogram retries it with backoff; nothing new arrives meanwhile), else 0",
)
SEND_WAIT = Histogram(
    "larkbot_telegram_send_wait_seconds",
    "Time a message waited for its pacing slot (per-chat, per-group and global limits, retry_after)",
    buckets=(0, 0.01, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120),
)
RATE_LIMITED = Counter(
    "larkbot_telegram_rate_limited_total", "429 answers from the Bot API, by method", ["method"]
)
SEND_RETRIES = Counter(
    "larkbot_telegram_send_retries_total",
    "Send attempts repeated under the same ledger record, by reason (rate_limited: a 429; transient: a "
    "5xx answer or a connection that never opened)",
    ["reason"],
)
for _reason in ("rate_limited", "transient"):
    SEND_RETRIES.labels(_reason)
LEDGER_RETRIES = Counter(
    "larkbot_telegram_ledger_retries_total",
    "Sent-ledger reads and writes asked again because the bucket did not answer (an election, a reconnect)",
)
LEDGER_UNRECORDED = Counter(
    "larkbot_telegram_ledger_unrecorded_total",
    "Sends whose outcome the sent-ledger never took (it did not answer until past the deadline): the "
    "record stays pending, so a repeat is never sent again",
)
SELF_EVENTS = Counter(
    "larkbot_telegram_self_events_total",
    "Synthetic self-sent events after confirmed sends, by outcome (published, failed)",
    ["outcome"],
)
WEBHOOK_REQUESTS = Counter(
    "larkbot_telegram_webhook_requests_total",
    "Webhook deliveries, by outcome (ok, forbidden, unavailable)",
    ["outcome"],
)
MODERATION_BANS = Counter(
    "larkbot_telegram_moderation_bans_total",
    "Members banned for ban_spammer, by outcome (banned, refused_permission, failed)",
    ["outcome"],
)
MODERATION_DELETIONS = Counter(
    "larkbot_telegram_moderation_deletions_total",
    "Messages of a banned member deleted for ban_spammer, by outcome (deleted, failed, skipped)",
    ["outcome"],
)
