"""Writes the LarkBot Grafana dashboard: deploy/grafana/dashboards/larkbot.json (compose provisions it) and
the same JSON as a ConfigMap for the Grafana sidecar of kube-prometheus-stack
(deploy/k8s/components/monitoring/grafana-dashboard.yaml). `make dashboard` runs it; tests fail when the
committed files differ from what it writes, when a panel queries a metric the code does not define, and
when a metric family the code defines is neither on a panel nor in :data:`LEFT_OFF`.

Variables: ``datasource`` (any Prometheus), ``namespace`` and ``job`` (the service; compose has no
namespace, and ``.*`` matches a series without one). Every query selects both.

Over 400 lines because it is the dashboard itself: :data:`ROWS` is one entry per panel, in the order they
appear; the code around it is ~100 lines.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
JSON_OUT = HERE / "dashboards" / "larkbot.json"
CONFIGMAP_OUT = HERE.parent / "k8s" / "components" / "monitoring" / "grafana-dashboard.yaml"

#: Metric families deliberately not on the dashboard, and why.
LEFT_OFF: dict[str, str] = {}

DS = {"type": "prometheus", "uid": "${datasource}"}
NOT_OK = 'outcome!="ok"'
SEL = 'namespace=~"$namespace", job=~"$job"'


def sel(extra: str = "") -> str:
    return "{" + SEL + (", " + extra if extra else "") + "}"


def rate(name: str, by: str = "", extra: str = "") -> str:
    grouping = f" by ({by})" if by else ""
    return f"sum{grouping} (rate({name}{sel(extra)}[$__rate_interval]))"


def gauge(name: str, by: str = "", agg: str = "sum", extra: str = "") -> str:
    grouping = f" by ({by})" if by else ""
    return f"{agg}{grouping} ({name}{sel(extra)})"


def quantile(q: float, name: str, by: str = "") -> str:
    keys = f"{by}, le" if by else "le"
    return f"histogram_quantile({q}, sum by ({keys}) (rate({name}_bucket{sel()}[$__rate_interval])))"


def quantiles(name: str, by: str = "", qs: tuple[float, ...] = (0.5, 0.95, 0.99)) -> list[tuple[str, str]]:
    prefix = "{{" + by + "}} " if by else ""
    return [(quantile(q, name, by), f"{prefix}p{round(q * 100)}") for q in qs]


def legend(by: str) -> str:
    return " ".join("{{" + key.strip() + "}}" for key in by.split(",")) if by else "total"


def counter(name: str, by: str = "", extra: str = "") -> tuple[str, str]:
    return rate(name, by, extra), legend(by)


Panel = tuple[str, str, list[tuple[str, str]], str]


def panel(title: str, description: str, targets: list[tuple[str, str]], unit: str = "short") -> Panel:
    return (title, description, targets, unit)


ROWS: list[tuple[str, list[Panel]]] = [
    (
        "Health",
        [
            panel(
                "Services ready",
                "larkbot_service_ready: 1 while /readyz answers ready, summed over replicas.",
                [(gauge("larkbot_service_ready", "component"), "{{component}}")],
            ),
            panel(
                "NATS connection",
                "Connected replicas and reconnections per service.",
                [
                    (gauge("larkbot_bus_connected", "component"), "{{component}} connected"),
                    (rate("larkbot_bus_reconnects_total", "component"), "{{component}} reconnects/s"),
                ],
            ),
            panel(
                "NATS server in use",
                "The server each replica is connected to now (a cluster spreads them).",
                [(gauge("larkbot_bus_server_info", "server"), "{{server}}")],
            ),
            panel(
                "Versions running",
                "Replicas per service and version (larkbot_service_info).",
                [(gauge("larkbot_service_info", "component, version"), "{{component}} {{version}}")],
            ),
            panel(
                "Restarts",
                "Process starts per service over the last hour (a crash loop shows here).",
                [
                    (
                        f"sum by (component) (changes(larkbot_service_start_time_seconds{sel()}[1h]))",
                        "{{component}}",
                    )
                ],
            ),
            panel(
                "Bootstrap kept operator settings",
                "Stream or bucket settings bootstrap left as an operator "
                "set them, against the configuration.",
                [(gauge("larkbot_bootstrap_kept_total", "asset, setting", "max"), "{{asset}} {{setting}}")],
            ),
        ],
    ),
    (
        "Bus",
        [
            panel(
                "Consumed messages",
                "By consumer and outcome (ack, nak, term).",
                [counter("larkbot_bus_messages_total", "consumer, outcome")],
                "ops",
            ),
            panel(
                "Handle latency",
                "Time to handle one consumed message, p95 by consumer.",
                quantiles("larkbot_bus_handle_seconds", "consumer", (0.95,)),
                "s",
            ),
            panel(
                "Requests served",
                "Request/reply requests by handler and outcome.",
                [counter("larkbot_bus_requests_total", "handler, outcome")],
                "reqps",
            ),
            panel(
                "Request latency",
                "Time to serve one request, p95 by handler.",
                quantiles("larkbot_bus_request_seconds", "handler", (0.95,)),
                "s",
            ),
            panel(
                "Subscriptions and watches",
                "Core NATS messages and KV updates handled, by outcome.",
                [
                    counter("larkbot_bus_subscription_messages_total", "subscription, outcome"),
                    counter("larkbot_bus_watch_updates_total", "bucket, outcome"),
                ],
                "ops",
            ),
            panel(
                "Consumer lag",
                "Messages not yet delivered and delivered but not acknowledged, per consumer "
                "(every replica reports its consumer's figures: max, not sum).",
                [
                    (
                        gauge("larkbot_bus_consumer_pending_messages", "consumer", "max"),
                        "{{consumer}} pending",
                    ),
                    (
                        gauge("larkbot_bus_consumer_ack_pending_messages", "consumer", "max"),
                        "{{consumer}} ack pending",
                    ),
                ],
            ),
            panel(
                "Dead letters",
                "Messages set aside in DEADLETTER, by consumer and reason.",
                [counter("larkbot_bus_dead_letters_total", "consumer, reason")],
                "ops",
            ),
        ],
    ),
    (
        "ingress-feishu",
        [
            panel(
                "Events",
                "Feishu events by type and outcome (published, duplicate, dropped_*, dead_lettered).",
                [counter("larkbot_ingress_feishu_events_total", "event_type, outcome")],
                "ops",
            ),
            panel(
                "Event latency",
                "Arrival to acknowledgement decision (PubAck included).",
                quantiles("larkbot_ingress_feishu_event_seconds"),
                "s",
            ),
            panel(
                "Actions",
                "Action requests by kind and outcome: sends and their failures.",
                [counter("larkbot_ingress_feishu_actions_total", "kind, outcome")],
                "ops",
            ),
            panel(
                "OpenAPI calls",
                "By route and outcome (ok, rate_limited, timeout, transport, error).",
                [counter("larkbot_ingress_feishu_api_requests_total", "route, outcome")],
                "reqps",
            ),
            panel(
                "OpenAPI latency",
                "p95 by route.",
                quantiles("larkbot_ingress_feishu_api_seconds", "route", (0.95,)),
                "s",
            ),
            panel(
                "Rate limits and retries",
                "Send retries by reason and seconds spent waiting for rate limits.",
                [
                    counter("larkbot_ingress_feishu_send_retries_total", "reason"),
                    (
                        rate("larkbot_ingress_feishu_rate_limit_wait_seconds_total", "reason"),
                        "{{reason}} wait s/s",
                    ),
                ],
            ),
            panel(
                "Connection",
                "1 while the long connection (or webhook server) is up; seconds since its last frame.",
                [
                    (gauge("larkbot_ingress_feishu_connected", "instance", "max"), "{{instance}} connected"),
                    (
                        "time() - max by (instance) "
                        f"(larkbot_ingress_feishu_last_frame_timestamp_seconds{sel()})",
                        "{{instance}} s since last frame",
                    ),
                ],
            ),
            panel(
                "Self events, names, webhook",
                "Synthetic self events, contact name lookups, webhook callbacks refused.",
                [
                    counter("larkbot_ingress_feishu_self_events_total", "outcome"),
                    counter("larkbot_ingress_feishu_name_lookups_total", "outcome"),
                    counter("larkbot_ingress_feishu_webhook_rejected_total", "reason"),
                ],
                "ops",
            ),
            panel(
                "Moderation",
                "ban_spammer on Feishu: members removed, messages recalled.",
                [
                    counter("larkbot_ingress_feishu_moderation_bans_total", "outcome"),
                    counter("larkbot_ingress_feishu_moderation_deletions_total", "outcome"),
                ],
                "ops",
            ),
        ],
    ),
    (
        "ingress-telegram",
        [
            panel(
                "Updates",
                "Bot API updates: published (by kind), dropped, dead-lettered.",
                [counter("larkbot_telegram_updates_total", "outcome, detail")],
                "ops",
            ),
            panel(
                "Actions",
                "Action requests by kind and outcome: sends and their failures.",
                [counter("larkbot_telegram_actions_total", "kind, outcome")],
                "ops",
            ),
            panel(
                "Rate limits (429)",
                "429 answers by method; send attempts repeated by reason.",
                [
                    counter("larkbot_telegram_rate_limited_total", "method"),
                    counter("larkbot_telegram_send_retries_total", "reason"),
                ],
                "ops",
            ),
            panel(
                "Platform budgets",
                "Share of the app-wide budgets left (API calls per day, per month) and actions a spent "
                "budget refused, both platforms (docs/budgets.md); spends asked again because a bucket "
                "did not answer.",
                [
                    (
                        f"min by (platform, scope) (larkbot_ingress_budget_remaining{sel()}"
                        f" / larkbot_ingress_budget_limit{sel()})",
                        "{{platform}} {{scope}} left",
                    ),
                    counter("larkbot_ingress_budget_refusals_total", "platform, scope"),
                    (rate("larkbot_ingress_budget_retries_total", ""), "asked again"),
                ],
            ),
            panel(
                "Send pacing wait",
                "Time a message waited for its pacing slot.",
                quantiles("larkbot_telegram_send_wait_seconds", qs=(0.5, 0.95)),
                "s",
            ),
            panel(
                "Polling",
                "1 while getUpdates fails; seconds since the last update was handled.",
                [
                    (gauge("larkbot_telegram_polling_failing", "instance", "max"), "{{instance}} failing"),
                    (
                        f"time() - max by (instance) (larkbot_telegram_last_update_timestamp_seconds{sel()})",
                        "{{instance}} s since last update",
                    ),
                ],
            ),
            panel(
                "Inbound writes",
                "Writes to the bus retried, and updates JetStream recognised as repeats.",
                [
                    counter("larkbot_telegram_publish_retries_total"),
                    (rate("larkbot_telegram_duplicate_events_total"), "duplicates"),
                ],
                "ops",
            ),
            panel(
                "Sent-ledger",
                "Ledger calls asked again, and sends whose outcome the ledger never took.",
                [
                    (rate("larkbot_telegram_ledger_retries_total"), "retries"),
                    (rate("larkbot_telegram_ledger_unrecorded_total"), "unrecorded"),
                ],
                "ops",
            ),
            panel(
                "Self events and webhook",
                "Self-sent events after sends; webhook deliveries by outcome.",
                [
                    counter("larkbot_telegram_self_events_total", "outcome"),
                    counter("larkbot_telegram_webhook_requests_total", "outcome"),
                ],
                "ops",
            ),
            panel(
                "Moderation",
                "ban_spammer on Telegram: members banned, messages deleted.",
                [
                    counter("larkbot_telegram_moderation_bans_total", "outcome"),
                    counter("larkbot_telegram_moderation_deletions_total", "outcome"),
                ],
                "ops",
            ),
        ],
    ),
    (
        "pipeline",
        [
            panel(
                "Events",
                "Canonical events consumed, by outcome.",
                [counter("larkbot_pipeline_events_total", "outcome")],
                "ops",
            ),
            panel(
                "Commit latency",
                "Time to commit one batch.",
                quantiles("larkbot_pipeline_commit_seconds"),
                "s",
            ),
            panel(
                "Batch size",
                "Events per committed batch.",
                quantiles("larkbot_pipeline_batch_events", qs=(0.5, 0.95)),
            ),
            panel(
                "Reduce and render",
                "Time to reduce one event and to render what it changed, p95 by kind.",
                [
                    *(
                        ((e, "reduce " + n))
                        for e, n in quantiles("larkbot_pipeline_reduce_seconds", "kind", (0.95,))
                    ),
                    *(
                        ((e, "render " + n))
                        for e, n in quantiles("larkbot_pipeline_render_seconds", "kind", (0.95,))
                    ),
                ],
                "s",
            ),
            panel(
                "Context updates",
                "Updates published (pipeline) and applied, gap, stale (driver).",
                [
                    counter("larkbot_pipeline_updates_total", "outcome"),
                    counter("larkbot_driver_context_updates_total", "outcome"),
                ],
                "ops",
            ),
            panel(
                "Update size",
                "Rendered XML carried by one context update.",
                quantiles("larkbot_pipeline_update_bytes", qs=(0.5, 0.95)),
                "bytes",
            ),
            panel(
                "Partition lag",
                "Messages of an owned partition not yet committed.",
                [(gauge("larkbot_pipeline_partition_lag_messages", "partition"), "p{{partition}}")],
            ),
            panel(
                "Partitions",
                "Partitions held per pipeline replica; restarts from the resume point; take-overs that "
                "failed (tried again after a backoff).",
                [
                    (gauge("larkbot_pipeline_partitions_owned", "instance"), "{{instance}} owned"),
                    (
                        rate("larkbot_pipeline_partition_restarts_total", "instance"),
                        "{{instance}} restarts/s",
                    ),
                    (
                        rate("larkbot_partition_takeover_failures_total", "instance", 'group="pipeline"'),
                        "{{instance}} failed take-overs/s",
                    ),
                ],
            ),
            panel(
                "Resident chats",
                "Chats projected in memory and their rendered segments.",
                [
                    (gauge("larkbot_pipeline_resident_chats"), "chats"),
                    (gauge("larkbot_pipeline_rc_segments"), "segments"),
                ],
            ),
            panel(
                "Rendered context size",
                "A chat's rendered context when (re)loaded.",
                quantiles("larkbot_pipeline_rc_bytes", qs=(0.5, 0.95)),
                "bytes",
            ),
            panel(
                "Resident budget",
                "What the resident chats hold, estimated (kept under services.pipeline.resident_budget_mb).",
                [(gauge("larkbot_pipeline_resident_bytes", "instance"), "{{instance}}")],
                "bytes",
            ),
            panel(
                "Evicted chats rebuilt",
                "Rebuilding an evicted chat from the database (p50, p99), and chats evicted per second.",
                [
                    *quantiles("larkbot_pipeline_chat_reload_seconds", qs=(0.5, 0.99)),
                    (rate("larkbot_pipeline_chat_evictions_total"), "evictions/s"),
                ],
                "s",
            ),
            panel(
                "Media in the pipeline",
                "Media jobs by outcome; events waiting for media; chats blocked.",
                [
                    counter("larkbot_pipeline_media_jobs_total", "transform, outcome"),
                    (gauge("larkbot_pipeline_media_waiting_events"), "waiting events"),
                    (gauge("larkbot_pipeline_blocked_chats"), "blocked chats"),
                ],
            ),
            panel(
                "Cold start",
                "Events and seconds of the last cold-start replay, per replica.",
                [
                    (gauge("larkbot_pipeline_cold_replay_events", "instance", "max"), "{{instance}} events"),
                    (gauge("larkbot_pipeline_cold_replay_seconds", "instance", "max"), "{{instance}} s"),
                ],
            ),
            panel(
                "Cursor moves and forwarded requests",
                "Compaction cursor moves applied; requests forwarded to the replica owning a chat.",
                [
                    (rate("larkbot_pipeline_cursor_moves_total"), "cursor moves"),
                    counter("larkbot_pipeline_forwarded_requests_total", "op, outcome"),
                ],
                "ops",
            ),
        ],
    ),
    (
        "driver",
        [
            panel(
                "Wake-ups",
                "By kind and path.",
                [counter("larkbot_driver_wakeups_total", "kind, path")],
                "ops",
            ),
            panel(
                "Probe decisions",
                "send_message, react_only, no_action, failed_closed, error.",
                [counter("larkbot_driver_probe_decisions_total", "outcome")],
                "ops",
            ),
            panel(
                "Manners",
                "Wake-ups held before the probe by a chat's manners (share_of_voice, quiet_hours, "
                "rate_limit), and the rate limits' refusals by scope and reason.",
                [
                    counter("larkbot_driver_manners_suppressions_total", "reason"),
                    counter("larkbot_driver_rate_limited_total", "scope, reason"),
                ],
                "ops",
            ),
            panel(
                "Turns",
                "Primary turns by outcome.",
                [counter("larkbot_driver_turns_total", "outcome")],
                "ops",
            ),
            panel(
                "Turn latency",
                "First model call to the last persisted step.",
                quantiles("larkbot_driver_turn_seconds"),
                "s",
            ),
            panel(
                "Tool calls",
                "By tool and outcome.",
                [counter("larkbot_driver_tool_calls_total", "tool, outcome")],
                "ops",
            ),
            panel(
                "Failures and crashes",
                "Failed wake-ups by class; crashes by exception (a bug).",
                [
                    counter("larkbot_driver_wake_failures_total", "outcome"),
                    counter("larkbot_driver_wake_crashes_total", "exception"),
                ],
                "ops",
            ),
            panel(
                "Database waits",
                "Transactions waiting for their turn (as many run at once as the pool keeps connections); "
                "marks the database refused for now (saved again later); records of a wake-up it refused "
                "(the outcome stands). Wake-ups it refused are the failures' database_retried.",
                [
                    (gauge("larkbot_database_transactions_waiting", "job"), "{{job}} waiting"),
                    (rate("larkbot_driver_marks_deferred_total"), "marks deferred/s"),
                    counter("larkbot_driver_unstored_records_total", "record"),
                ],
            ),
            panel(
                "Recovery",
                "Pending steps of a dead process redone or abandoned; actions asked again.",
                [
                    counter("larkbot_driver_recovered_steps_total", "outcome"),
                    counter("larkbot_driver_action_reasks_total", "reason"),
                ],
                "ops",
            ),
            panel(
                "Tokens by purpose",
                "As the gateway reported them to the driver.",
                [counter("larkbot_driver_llm_tokens_total", "purpose, kind")],
                "short",
            ),
            panel(
                "Cache hit ratio (driver)",
                "Cached share of input tokens since start, by model.",
                [(gauge("larkbot_driver_llm_cache_hit_ratio", "model", "max"), "{{model}}")],
                "percentunit",
            ),
            panel(
                "Prompt-cache breaks",
                "Primary requests that did not extend their chat's previous one, by cause; expected ones "
                "(compaction, trimmed, reasoning, history, tool_offer) and the rest. The log line "
                "'prompt cache break' names each chat.",
                [counter("larkbot_driver_prompt_cache_breaks_total", "cause, expected")],
                "ops",
            ),
            panel(
                "Model routing",
                "Model calls by purpose and the endpoint chosen for them: by a rule of llm.routes or the "
                "purpose's own endpoint.",
                [counter("larkbot_driver_llm_routes_total", "purpose, endpoint, by")],
                "ops",
            ),
            panel(
                "Ownership",
                "Partitions and chats held per replica; hand-overs; take-over snapshots; take-overs that "
                "failed (tried again after a backoff).",
                [
                    (gauge("larkbot_driver_partitions", "instance"), "{{instance}} partitions"),
                    (gauge("larkbot_driver_chats", "instance"), "{{instance}} chats"),
                    counter("larkbot_driver_partition_handovers_total", "event"),
                    counter("larkbot_driver_takeover_snapshots_total", "outcome"),
                    (
                        rate("larkbot_partition_takeover_failures_total", "instance", 'group="driver"'),
                        "{{instance}} failed take-overs/s",
                    ),
                ],
            ),
            panel(
                "Typing",
                "Typing indicators sent; typing signals received.",
                [
                    counter("larkbot_driver_typing_indicators_total", "outcome"),
                    counter("larkbot_driver_typing_signals_total", "outcome"),
                ],
                "ops",
            ),
            panel(
                "Context fitting",
                "Requests refused as too long, sent trimmed, inputs clipped.",
                [
                    counter("larkbot_driver_context_length_errors_total", "source"),
                    (rate("larkbot_driver_requests_trimmed_total"), "trimmed"),
                    (rate("larkbot_driver_inputs_clipped_total"), "clipped"),
                ],
                "ops",
            ),
            panel(
                "Compaction",
                "Compactions by outcome and their wall time.",
                [
                    counter("larkbot_driver_compactions_total", "outcome"),
                    *quantiles("larkbot_driver_compaction_seconds", qs=(0.5, 0.95)),
                ],
            ),
            panel(
                "Compaction sizes",
                "Output tokens of each summary; history after the cursor at each check.",
                [
                    (quantile(0.5, "larkbot_driver_compaction_summary_tokens"), "summary tokens p50"),
                    (quantile(0.95, "larkbot_driver_cursor_lag_est_tokens"), "lag tokens p95"),
                    (quantile(0.95, "larkbot_driver_cursor_lag_events"), "lag segments p95"),
                ],
            ),
            panel(
                "Memory",
                "Operations by kind and outcome; refused saves; consolidations.",
                [
                    counter("larkbot_driver_memory_operations_total", "kind, outcome"),
                    counter("larkbot_driver_memory_rejected_saves_total", "reason"),
                    counter("larkbot_driver_memory_consolidations_total", "outcome"),
                ],
                "ops",
            ),
            panel(
                "Memories",
                "Enabled memories by scope; search latency.",
                [
                    (gauge("larkbot_driver_memories", "scope", "max"), "{{scope}}"),
                    *quantiles("larkbot_driver_memory_search_seconds", qs=(0.95,)),
                ],
            ),
            panel(
                "Shell",
                "bash calls, gate decisions, background tasks ended and running.",
                [
                    counter("larkbot_driver_shell_calls_total", "outcome"),
                    counter("larkbot_driver_shell_gate_decisions_total", "outcome"),
                    counter("larkbot_driver_background_tasks_total", "outcome"),
                    (gauge("larkbot_driver_background_tasks_running"), "running"),
                ],
            ),
            panel(
                "Moderation",
                "ban_spammer calls by outcome.",
                [counter("larkbot_driver_moderation_actions_total", "outcome")],
                "ops",
            ),
            panel(
                "Reminders",
                "Reminders set, delivered, cancelled and refused; due ones not yet delivered (overdue).",
                [
                    counter("larkbot_driver_reminders_total", "event"),
                    (gauge("larkbot_driver_reminders_overdue"), "overdue"),
                ],
            ),
        ],
    ),
    (
        "llm-gateway",
        [
            panel(
                "Requests",
                "llm.generate calls by model and outcome.",
                [counter("larkbot_llm_requests_total", "model, outcome")],
                "reqps",
            ),
            panel(
                "Fallbacks",
                "Calls handed to the purpose's next endpoint of llm.fallbacks, by purpose, the endpoint that "
                "failed and the one asked next. Each breaks the chat's prompt cache.",
                [counter("larkbot_llm_fallbacks_total", "purpose, failed, fallback")],
                "ops",
            ),
            panel(
                "Error share",
                "Calls not ok, by model.",
                [
                    (
                        f"{rate('larkbot_llm_requests_total', 'model', NOT_OK)} "
                        f"/ {rate('larkbot_llm_requests_total', 'model')}",
                        "{{model}}",
                    )
                ],
                "percentunit",
            ),
            panel(
                "Request latency",
                "Receipt to reply, retries included.",
                quantiles("larkbot_llm_request_duration_seconds", "model", (0.5, 0.95)),
                "s",
            ),
            panel(
                "Provider latency",
                "Per provider call attempt.",
                quantiles("larkbot_llm_provider_duration_seconds", "model", (0.5, 0.95)),
                "s",
            ),
            panel(
                "Gateway overhead",
                "Time in the gateway minus provider time and retry waits.",
                quantiles("larkbot_llm_gateway_overhead_seconds", "", (0.5, 0.99)),
                "s",
            ),
            panel(
                "Retries",
                "Provider calls beyond the first, by reason.",
                [counter("larkbot_llm_retries_total", "model, reason")],
                "ops",
            ),
            panel(
                "Tokens",
                "Input (cache reads and writes included), output, reasoning, by model.",
                [
                    (rate("larkbot_llm_input_tokens_total", "model"), "{{model}} input"),
                    (rate("larkbot_llm_output_tokens_total", "model"), "{{model}} output"),
                    (rate("larkbot_llm_reasoning_tokens_total", "model"), "{{model}} reasoning"),
                    (rate("larkbot_llm_cache_write_tokens_total", "model"), "{{model}} cache write"),
                ],
            ),
            panel(
                "Cache hit ratio",
                "Cache reads over input tokens, by model (the recording rule "
                "model:larkbot_llm_cache_hit_ratio:rate1h over an hour).",
                [
                    (
                        f"{rate('larkbot_llm_cache_read_tokens_total', 'model')} "
                        f"/ {rate('larkbot_llm_input_tokens_total', 'model')}",
                        "{{model}}",
                    )
                ],
                "percentunit",
            ),
            panel(
                "Images omitted",
                "Images replaced by a placeholder to respect max_images.",
                [counter("larkbot_llm_images_omitted_total", "model")],
                "ops",
            ),
        ],
    ),
    (
        "media",
        [
            panel(
                "Jobs",
                "Media jobs answered by transform and outcome.",
                [counter("larkbot_media_jobs_total", "transform, outcome")],
                "ops",
            ),
            panel(
                "Transform latency",
                "Take to result published, p95 by transform.",
                quantiles("larkbot_media_transform_seconds", "transform", (0.95,)),
                "s",
            ),
            panel(
                "Queue",
                "MEDIA consumer: pending, ack pending; jobs in flight over workers.",
                [
                    (
                        gauge("larkbot_bus_consumer_pending_messages", "", "max", 'consumer="media-workers"'),
                        "pending",
                    ),
                    (
                        gauge(
                            "larkbot_bus_consumer_ack_pending_messages", "", "max", 'consumer="media-workers"'
                        ),
                        "ack pending",
                    ),
                    (gauge("larkbot_media_jobs_in_flight"), "in flight"),
                ],
            ),
            panel(
                "Bytes",
                "Source media read and outputs written.",
                [
                    counter("larkbot_media_input_bytes_total", "transform"),
                    counter("larkbot_media_output_bytes_total", "kind"),
                ],
                "Bps",
            ),
            panel(
                "Downloads",
                "Downloads asked of an ingress, by platform and outcome.",
                [counter("larkbot_media_downloads_total", "platform, outcome")],
                "ops",
            ),
            panel(
                "Alt-text cache",
                "Lookups by result (hit, miss).",
                [counter("larkbot_media_alt_text_cache_lookups_total", "result")],
                "ops",
            ),
            panel(
                "Vision",
                "Vision calls by outcome and their round trip; read_image requests.",
                [
                    counter("larkbot_media_vision_calls_total", "outcome"),
                    *quantiles("larkbot_media_vision_seconds", qs=(0.95,)),
                    counter("larkbot_media_read_image_total", "detail, outcome"),
                ],
            ),
            panel(
                "Custom emoji",
                "Custom emoji asked of an ingress (getCustomEmojiStickers), by outcome.",
                [counter("larkbot_media_custom_emoji_resolutions_total", "outcome")],
                "ops",
            ),
            panel(
                "read_file",
                "Documents read for read_file, by format and outcome; extract cache lookups; p95 time.",
                [
                    counter("larkbot_media_read_file_total", "kind, outcome"),
                    counter("larkbot_media_file_extract_cache_lookups_total", "result"),
                    *quantiles("larkbot_media_read_file_seconds", qs=(0.95,)),
                ],
                "ops",
            ),
            panel(
                "Transcriptions",
                "Speech-to-text calls by outcome; seconds of audio sent, per second.",
                [
                    counter("larkbot_media_transcriptions_total", "outcome"),
                    (rate("larkbot_media_transcribed_audio_seconds_total", ""), "audio seconds"),
                ],
                "ops",
            ),
            panel(
                "Transcription latency",
                "Round trip of one llm.transcribe call and the decode to 16 kHz WAV before it, p95.",
                [
                    (quantile(0.95, "larkbot_media_transcription_seconds", ""), "llm.transcribe p95"),
                    (quantile(0.95, "larkbot_media_audio_conversion_seconds", ""), "to WAV p95"),
                ],
                "s",
            ),
            panel(
                "Transcript cache",
                "Lookups by result (hit, miss): a hit is a file transcribed before.",
                [counter("larkbot_media_transcript_cache_lookups_total", "result")],
                "ops",
            ),
        ],
    ),
]


def _variables() -> list[dict[str, Any]]:
    def query(name: str, expr: str, include_all: bool) -> dict[str, Any]:
        return {
            "name": name,
            "label": name,
            "type": "query",
            "datasource": DS,
            "definition": expr,
            "query": {"query": expr, "refId": name},
            "refresh": 2,
            "includeAll": include_all,
            "multi": include_all,
            "allValue": ".*",
            "current": {"text": "All", "value": "$__all"} if include_all else {},
            "sort": 1,
        }

    return [
        {
            "name": "datasource",
            "label": "datasource",
            "type": "datasource",
            "query": "prometheus",
            "current": {},
            "hide": 0,
        },
        query("namespace", "label_values(larkbot_service_info, namespace)", True),
        query("job", 'label_values(larkbot_service_info{namespace=~"$namespace"}, job)', True),
    ]


def build() -> dict[str, Any]:
    panels: list[dict[str, Any]] = []
    y = 0
    next_id = 1
    for row, row_panels in ROWS:
        panels.append(
            {
                "type": "row",
                "id": next_id,
                "title": row,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
                "panels": [],
            }
        )
        next_id += 1
        y += 1
        for index, (title, description, targets, unit) in enumerate(row_panels):
            panels.append(
                {
                    "type": "timeseries",
                    "id": next_id,
                    "title": title,
                    "description": description,
                    "datasource": DS,
                    "gridPos": {"h": 8, "w": 8, "x": (index % 3) * 8, "y": y + (index // 3) * 8},
                    "fieldConfig": {
                        "defaults": {"unit": unit, "min": 0, "custom": {"lineWidth": 1, "fillOpacity": 10}},
                        "overrides": [],
                    },
                    "options": {
                        "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                        "tooltip": {"mode": "multi", "sort": "desc"},
                    },
                    "targets": [
                        {"datasource": DS, "refId": chr(ord("A") + i), "expr": expr, "legendFormat": text}
                        for i, (expr, text) in enumerate(targets)
                    ],
                }
            )
            next_id += 1
        y += ((len(row_panels) + 2) // 3) * 8
    return {
        "uid": "larkbot",
        "title": "LarkBot",
        "description": "LarkBot services: health, bus, ingresses, pipeline, driver, LLM gateway, media "
        "(generated by deploy/grafana/dashboard.py; docs/operations.md).",
        "tags": ["larkbot"],
        "timezone": "browser",
        "editable": False,
        "graphTooltip": 1,
        "refresh": "30s",
        "schemaVersion": 39,
        "version": 2,
        "time": {"from": "now-6h", "to": "now"},
        "timepicker": {},
        "templating": {"list": _variables()},
        "annotations": {"list": []},
        "links": [],
        "panels": panels,
    }


def render_json() -> str:
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def render_configmap() -> str:
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "larkbot-dashboard",
            # The label kube-prometheus-stack's Grafana sidecar loads dashboards by (its default).
            "labels": {"app.kubernetes.io/part-of": "larkbot", "grafana_dashboard": "1"},
        },
        # Compact: `kubectl apply` keeps a copy in an annotation, which must stay under 256 KiB.
        "data": {"larkbot.json": json.dumps(build(), separators=(",", ":"), ensure_ascii=False)},
    }
    header = "# Generated by deploy/grafana/dashboard.py (`make dashboard`): the panels of larkbot.json.\n"
    return header + yaml.safe_dump(config_map, sort_keys=False, width=120)


if __name__ == "__main__":
    JSON_OUT.write_text(render_json(), encoding="utf-8")
    CONFIGMAP_OUT.write_text(render_configmap(), encoding="utf-8")
    sys.stdout.write(f"wrote {JSON_OUT} and {CONFIGMAP_OUT}\n")
