"""Every metric of the driver, defined once. Labels carry classes of outcomes, tools, purposes and model
ids — never chat or user ids."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from .audit.core import cachebreak
from .ratelimit.core.rates import SCOPES
from .ratelimit.core.window import REASONS

CONTEXT_UPDATES = Counter(
    "larkbot_driver_context_updates_total",
    "Rendered-context updates received, by outcome (applied, gap, stale, unconfigured, not_held)",
    ["outcome"],
)
TYPING_SIGNALS = Counter(
    "larkbot_driver_typing_signals_total", "Typing signals received, by outcome", ["outcome"]
)
WAKEUPS = Counter(
    "larkbot_driver_wakeups_total",
    "Wake-ups run, by kind (debounced, retry, resume) and path (probe, activation, continuation, braked, "
    "held)",
    ["kind", "path"],
)
RECOVERED_STEPS = Counter(
    "larkbot_driver_recovered_steps_total",
    "Pending steps left by a process that died during their tool calls, by outcome (redone, abandoned)",
    ["outcome"],
)
MANNERS_SUPPRESSIONS = Counter(
    "larkbot_driver_manners_suppressions_total",
    "Wake-ups ended before the probe by the chat's manners, by reason (share_of_voice, quiet_hours, "
    "rate_limit)",
    ["reason"],
)
for _held in ("share_of_voice", "quiet_hours", "rate_limit"):
    MANNERS_SUPPRESSIONS.labels(_held)
RATE_LIMITED = Counter(
    "larkbot_driver_rate_limited_total",
    "Rejections by the rate limits, by scope (person: a member's trigger of a wake-up; chat: a wake-up "
    "that would take one more primary turn) and reason (window: the one that filled it; cooldown)",
    ["scope", "reason"],
)
for _scope in SCOPES:
    for _limited in REASONS:
        RATE_LIMITED.labels(_scope, _limited)
PROBE_DECISIONS = Counter(
    "larkbot_driver_probe_decisions_total",
    "Probe outcomes (send_message, react_only, no_action, failed_closed, error)",
    ["outcome"],
)
SHELL_GATE = Counter(
    "larkbot_driver_shell_gate_decisions_total",
    "Shell-tool gate decisions of wake-ups that run the primary, by outcome (open, closed, reused: a "
    "continuing chain's persisted decision, disabled: shell tools off for the chat)",
    ["outcome"],
)
TURNS = Counter(
    "larkbot_driver_turns_total",
    "Primary turns by outcome (sent, reacted, silent, budget_exhausted, interrupted, failed)",
    ["outcome"],
)
TOOL_CALLS = Counter(
    "larkbot_driver_tool_calls_total",
    "Tool calls of the primary by tool and outcome (ok, error, invalid, unknown, not_executed)",
    ["tool", "outcome"],
)
TURN_SECONDS = Histogram(
    "larkbot_driver_turn_seconds",
    "Wall time of a primary turn within one wake-up (first model call to the last persisted step)",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60),
)
TOKENS = Counter(
    "larkbot_driver_llm_tokens_total",
    "Tokens reported by the gateway, by purpose and kind (input, output, cache_read, cache_write)",
    ["purpose", "kind"],
)
CACHE_HIT_RATIO = Gauge(
    "larkbot_driver_llm_cache_hit_ratio",
    "Cached share of input tokens since start, by model (cache_read / input)",
    ["model"],
)
WAKE_FAILURES = Counter(
    "larkbot_driver_wake_failures_total",
    "Failed wake-ups by class (transient_retried, transient_exhausted, permanent, database_retried: the "
    "database was unavailable; retried after a backoff, never latched)",
    ["outcome"],
)
for _failure in ("transient_retried", "transient_exhausted", "permanent", "database_retried"):
    WAKE_FAILURES.labels(_failure)
MARKS_DEFERRED = Counter(
    "larkbot_driver_marks_deferred_total",
    "Saves of a chat's marks (processed_until, last_action) the database refused for now: kept in memory "
    "and saved again after a backoff",
)
UNSTORED_RECORDS = Counter(
    "larkbot_driver_unstored_records_total",
    "Records of a wake-up's outcome the database refused for now, by record (audit: the audit record and "
    "request log; probe: a probe decision stored beside the primary); the outcome stands",
    ["record"],
)
for _record in ("audit", "probe"):
    UNSTORED_RECORDS.labels(_record)
WAKE_CRASHES = Counter(
    "larkbot_driver_wake_crashes_total",
    "Wake-ups that ended in an unexpected exception (a bug; alert on any), by exception type",
    ["exception"],
)
COMPACTIONS = Counter(
    "larkbot_driver_compactions_total",
    "Compactions by outcome (ok, failed, backing_off: a request needed one during the back-off, "
    "nothing_to_summarize, too_long: the model refused the request and taught a smaller window)",
    ["outcome"],
)
SUMMARY_TOKENS = Histogram(
    "larkbot_driver_compaction_summary_tokens",
    "Output tokens of each stored summary",
    buckets=(100, 250, 500, 1000, 2000, 4000, 8000),
)
COMPACTION_SECONDS = Histogram(
    "larkbot_driver_compaction_seconds",
    "Wall time of a successful compaction (plan, model call, store)",
    buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120),
)
CURSOR_LAG_EVENTS = Histogram(
    "larkbot_driver_cursor_lag_events",
    "Segments after the compaction cursor, observed at each compaction check",
    buckets=(10, 50, 100, 250, 500, 1000, 2500, 5000, 10000),
)
CURSOR_LAG_TOKENS = Histogram(
    "larkbot_driver_cursor_lag_est_tokens",
    "Estimated tokens of the history after the cursor (RC + TR), observed at each compaction check",
    buckets=(1000, 5000, 10000, 20000, 40000, 60000, 100000, 200000),
)
LLM_ROUTES = Counter(
    "larkbot_driver_llm_routes_total",
    "Model calls by purpose and the endpoint chosen for them, and what chose it: a rule of llm.routes "
    "(rule) or the purpose's own endpoint (default)",
    ["purpose", "endpoint", "by"],
)
PROMPT_CACHE_BREAKS = Counter(
    "larkbot_driver_prompt_cache_breaks_total",
    "Primary requests that did not extend the chat's previous one, by cause (model, tool_offer, tools, "
    "system, compaction, trimmed, reasoning, history, unexplained) and whether the design expects it; "
    "the log line 'prompt cache break' names the chat",
    ["cause", "expected"],
)
# Every cause exists from the start, so ``increase()`` sees a cause's first break.
for _cause in cachebreak.CAUSES:
    PROMPT_CACHE_BREAKS.labels(_cause, str(_cause in cachebreak.EXPECTED).lower())
REQUESTS_TRIMMED = Counter(
    "larkbot_driver_requests_trimmed_total",
    "Primary requests sent with a trimmed history (it did not fit and could not be compacted)",
)
INPUTS_CLIPPED = Counter(
    "larkbot_driver_inputs_clipped_total",
    "Primary requests whose unhandled input alone did not fit the model's window and was clipped",
)
CONTEXT_LENGTH = Counter(
    "larkbot_driver_context_length_errors_total",
    "Primary requests refused as too long, by source (provider: the model said so; preflight: the "
    "estimate exceeded the configured window and the request was not sent)",
    ["source"],
)
CHATS = Gauge("larkbot_driver_chats", "Chats this replica drives (the configured chats of its partitions)")
PARTITIONS = Gauge("larkbot_driver_partitions", "Context partitions this replica holds the lease of")
HANDOVERS = Counter(
    "larkbot_driver_partition_handovers_total",
    "Partitions taken over or handed back by this replica, by event (acquired, released)",
    ["event"],
)
TAKEOVER_SNAPSHOTS = Counter(
    "larkbot_driver_takeover_snapshots_total",
    "Snapshots fetched when taking a partition's chats over, by outcome (ok, retried)",
    ["outcome"],
)
TYPING_INDICATORS = Counter(
    "larkbot_driver_typing_indicators_total",
    "Typing indicators sent when a primary turn starts, by outcome (ok, failed, unanswered)",
    ["outcome"],
)
ACTION_REASKS = Counter(
    "larkbot_driver_action_reasks_total",
    "Platform actions asked again under the same idempotency key while their outcome was open, by reason "
    "(no_answer: the ingress did not answer; in_progress: an earlier attempt was still running)",
    ["reason"],
)
for _reason in ("no_answer", "in_progress"):
    ACTION_REASKS.labels(_reason)


_cache_totals: dict[str, tuple[int, int]] = {}


def observe_cache(model: str, input_tokens: int, cache_read_tokens: int) -> None:
    total, read = _cache_totals.get(model, (0, 0))
    total, read = total + input_tokens, read + cache_read_tokens
    _cache_totals[model] = (total, read)
    CACHE_HIT_RATIO.labels(model).set(read / total if total else 0.0)


MEMORY_OPS = Counter(
    "larkbot_driver_memory_operations_total",
    "Memory operations by kind (save, search, patch, recall) and outcome (ok, rejected, error)",
    ["kind", "outcome"],
)
MEMORY_REJECTED = Counter(
    "larkbot_driver_memory_rejected_saves_total",
    "Rejected memory_save calls by reason (not_found, myself, deleted, bot, forwarded, quoted, not_author, "
    "scope, supersedes)",
    ["reason"],
)
MEMORY_SEARCH_SECONDS = Histogram(
    "larkbot_driver_memory_search_seconds",
    "Latency of a memory search (memory_search) in the store",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1),
)
MEMORIES = Gauge(
    "larkbot_driver_memories",
    "Enabled memories in the store by scope (refreshed by the maintenance leader)",
    ["scope"],
)
MEMORY_CONSOLIDATIONS = Counter(
    "larkbot_driver_memory_consolidations_total",
    "Memory consolidations by outcome (merged, nothing, failed, backing_off)",
    ["outcome"],
)
SHELL_CALLS = Counter(
    "larkbot_driver_shell_calls_total",
    "bash calls by outcome (ok: ended within its wait, timeout_to_task: continues as a background task, "
    "refused: shell off in the chat or too many tasks running, error: could not be started)",
    ["outcome"],
)
BACKGROUND_TASKS = Counter(
    "larkbot_driver_background_tasks_total",
    "Background tasks ended, by outcome (done: exit status 0, failed: any other, killed: by kill_task, "
    "lost: the process disappeared without an exit status)",
    ["outcome"],
)
RUNNING_TASKS = Gauge("larkbot_driver_background_tasks_running", "Shell tasks running on this replica's host")
MODERATION_ACTIONS = Counter(
    "larkbot_driver_moderation_actions_total",
    "ban_spammer calls by outcome (banned, partial, refused_self, refused_maintainer, refused_established, "
    "refused_permission, failed)",
    ["outcome"],
)
REMINDERS = Counter(
    "larkbot_driver_reminders_total",
    "Reminders by event (set, delivered: its event published by this replica, cancelled, refused: a "
    "set_reminder refused for its time or the chat's limits)",
    ["event"],
)
for _event in ("set", "delivered", "cancelled", "refused"):
    REMINDERS.labels(_event)
REMINDERS_OVERDUE = Gauge(
    "larkbot_driver_reminders_overdue",
    "Reminders of the chats this replica holds that are due and not yet delivered, at its last look",
)
