"""Every metric of the pipeline, defined once. No chat or user ids as labels.

Consumer lag is per partition (``larkbot_pipeline_partition_lag_messages{partition}``, refreshed every few
seconds); partition numbers are a fixed set of 16, not ids.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

_FAST = (0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05)

EVENTS = Counter(
    "larkbot_pipeline_events_total",
    "Canonical events consumed, by kind and outcome (committed, duplicate, self_echo, conflict, archived, "
    "dropped, dead_lettered)",
    ["kind", "outcome"],
)
REDUCE_SECONDS = Histogram(
    "larkbot_pipeline_reduce_seconds",
    "Time to reduce one committed event into its chat's IC",
    ["kind"],
    buckets=_FAST,
)
RENDER_SECONDS = Histogram(
    "larkbot_pipeline_render_seconds",
    "Time to render the nodes one event appended or changed",
    ["kind"],
    buckets=_FAST,
)
COMMIT_SECONDS = Histogram(
    "larkbot_pipeline_commit_seconds",
    "Time to commit one batch of events to the database",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)
BATCH_EVENTS = Histogram(
    "larkbot_pipeline_batch_events",
    "Events per committed batch",
    buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500),
)
RESIDENT_CHATS = Gauge("larkbot_pipeline_resident_chats", "Chats projected in memory")
RESIDENT_BYTES = Gauge(
    "larkbot_pipeline_resident_bytes",
    "Estimated bytes the resident chats hold (kept under services.pipeline.resident_budget_mb)",
)
CHAT_EVICTIONS = Counter(
    "larkbot_pipeline_chat_evictions_total", "Resident chats evicted to keep within the budget"
)
CHAT_RELOAD_SECONDS = Histogram(
    "larkbot_pipeline_chat_reload_seconds",
    "Rebuilding an evicted (or never loaded) chat from the database",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
)
RC_SEGMENTS = Gauge("larkbot_pipeline_rc_segments", "Rendered segments held in memory, all resident chats")
RC_BYTES = Histogram(
    "larkbot_pipeline_rc_bytes",
    "Size of a chat's rendered context when it is (re)loaded",
    buckets=(1e3, 1e4, 5e4, 1e5, 2.5e5, 5e5, 1e6, 5e6),
)
UPDATE_BYTES = Histogram(
    "larkbot_pipeline_update_bytes",
    "Rendered XML carried by one context update",
    buckets=(100, 300, 1e3, 3e3, 1e4, 3e4, 1e5, 1e6),
)
UPDATES = Counter(
    "larkbot_pipeline_updates_total", "Context updates published, by outcome (published, failed)", ["outcome"]
)
CURSOR_MOVES = Counter("larkbot_pipeline_cursor_moves_total", "Compaction cursor moves applied")
COLD_REPLAY_SECONDS = Gauge("larkbot_pipeline_cold_replay_seconds", "Duration of the last cold start replay")
COLD_REPLAY_EVENTS = Gauge("larkbot_pipeline_cold_replay_events", "Events replayed by the last cold start")
BLOCKED_CHATS = Gauge(
    "larkbot_pipeline_blocked_chats", "Chats held by a failing media transform at their head"
)
MEDIA_WAITING = Gauge("larkbot_pipeline_media_waiting_events", "Events waiting for media transforms")
MEDIA_JOBS = Counter(
    "larkbot_pipeline_media_jobs_total",
    "Media jobs by transform and outcome (submitted, resubmitted, ok, failed, rejected)",
    ["transform", "outcome"],
)
PARTITIONS_OWNED = Gauge("larkbot_pipeline_partitions_owned", "Partitions of EVENTS this replica consumes")
PARTITION_LAG = Gauge(
    "larkbot_pipeline_partition_lag_messages",
    "Messages of an owned partition not yet committed (undelivered plus waiting in admission)",
    ["partition"],
)
PARTITION_RESTARTS = Counter(
    "larkbot_pipeline_partition_restarts_total",
    "Partitions restarted from their resume point after an unexpected failure",
)
FORWARDED = Counter(
    "larkbot_pipeline_forwarded_requests_total",
    "Requests forwarded to the replica owning the chat's partition, by operation and outcome (ok; error: "
    "the owner's error reply; no_responders / timeout: the owner did not answer; owner_silent: not sent, "
    "the owner did not answer before and still holds the lease)",
    ["op", "outcome"],
)
for _op in ("snapshot", "history", "cursor"):
    for _outcome in ("ok", "error", "no_responders", "timeout", "owner_silent"):
        FORWARDED.labels(_op, _outcome)
