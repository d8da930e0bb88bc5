"""The driver's tables. The driver owns what it said and decided; the conversation itself belongs to the
pipeline.

The tables of every feature stay in this one module, beside the feature folders rather than inside them:
Alembic autogenerates the migrations from one ``MetaData``, and one module keeps that metadata, and so the
schema the migrations describe, complete in one place.

- ``driver_turn_responses``: one row per primary model call (IR entries as JSON, token usage including
  cache reads and writes, model id, the follow-up flag that tells whether the chain stayed open, the
  shell-gate decision, the step's counts). ``(platform, chat_id, chain_id, step)`` is unique. A
  ``pending`` row is a step written ahead of its side effects (the complete row replaces it).
- ``driver_probe_responses``: one row per probe (decision, reason, activation, fail-closed flag, usage,
  the window start and omitted count).
- ``driver_compactions``: append-only summaries, one per compaction: the cursor (an ``event_seq``) and the
  turn boundary they cover up to, the text, the compaction call's usage and model, how much was
  summarized and the history's estimate before and after.
- ``driver_chats``: per chat, the arrival time up to which external input has been handled (so a restart
  does not wake the bot for old messages) and the bot's last real action (the probe window's start).

Per-person memories (``memory.core.memory``, ``docs/memory.md``):

- ``driver_memories``: one row per saved memory, never updated (evidence and references as JSON lists).
- ``driver_memory_patches``: one row per patch, never updated (the change as JSON).
- ``driver_memory_index``: one row per memory, the projection of the memory and its patches that queries
  filter on (scope, importance, enabled) and the search terms; rewritten with each patch, in the same
  transaction. On SQLite the FTS5 table ``driver_memory_fts`` (created by the migration, outside this
  metadata; rowid = memory id) indexes ``terms`` and the memory's visibility keys; on PostgreSQL the
  generated column ``terms_tsv`` (``to_tsvector('simple', terms)``, also outside this metadata) with a
  GIN index does.
- ``driver_memory_forgets``: one row per operator forget: whose, how many memories, when; no content.
- ``driver_memory_maintenance``: per (platform, person, scope, chat), when consolidation last ran, how
  often it failed in a row and when it may run next.

Shell tools (``shell.core.shell``, docs/driver.md "Shell tools"):

- ``driver_shell_tasks``: one row per ``bash`` call: the command, where it runs (host, process group),
  its state (``running``, ``done``, ``failed``, ``killed``, ``lost``), whether it became a background task
  and whether its completion was announced. The tool call's idempotency key is unique, so a step redone
  after a crash does not run the command twice. Output and exit status live in files under the
  configured output directory; rows and files are removed ``retention_days`` after the task finished.

Reminders (``reminders.core.reminders``, docs/driver.md "Reminders"):

- ``driver_reminders``: one row per ``set_reminder`` call: the chat, whom it is for, the text, when it is
  due and its state (``pending``, ``fired`` — claimed for delivery —, ``delivered``, ``cancelled``), each
  change a conditional update. The call's idempotency key is unique, so a step redone after a crash sets
  no second reminder. Delivered and cancelled rows are removed ``reminders.retention_days`` after they
  ended.

Audit trail (``audit.core.audit``, docs/driver.md "Audit trail"):

- ``driver_wakeups``: one row per wake-up: path, probe decision, the rendered context's range and hash,
  steps, sends, tool calls (JSON object name → count), tokens, latency, models, outcome, dry-run flag.
  Linked to the turn and probe rows by ``wake_id``; rows older than ``audit.retention_days`` are deleted.
- ``driver_requests``: one row per model request a wake-up built (probe and primary steps, also those
  never sent): purpose, step, time, endpoint, the estimate, and its blocks (``audit.core.requestlog``) as a
  JSON list of ``[kind, label, sha256, chars]``. ``request_id`` is unique.
- ``driver_request_blocks``: the blocks' texts by sha256, each stored once however many requests hold
  it; ``text`` is NULL without ``audit.store_content``. ``last_seen_ms`` is the newest request known to
  hold it (refreshed at most hourly), which retention goes by.
- ``driver_sent_messages``: the platform message ids the bot sent, with the wake-up that sent them.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

_Id = BigInteger().with_variant(Integer(), "sqlite")

turn_responses = Table(
    "driver_turn_responses",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("platform", String(16), nullable=False),
    Column("chat_id", String(128), nullable=False),
    Column("chain_id", String(64), nullable=False),
    Column("step", Integer, nullable=False),
    Column("wake_id", String(64), nullable=False),
    Column("requested_at_ms", BigInteger, nullable=False),
    Column("entries", Text, nullable=False),
    Column("model_identity", String(128), nullable=False),
    Column("input_tokens", BigInteger, nullable=False),
    Column("output_tokens", BigInteger, nullable=False),
    Column("cache_read_tokens", BigInteger, nullable=False),
    Column("cache_write_tokens", BigInteger, nullable=False),
    Column("reasoning_tokens", BigInteger, nullable=True),
    Column("requires_follow_up", Boolean, nullable=False),
    Column("shell_tools_exposed", Boolean, nullable=False),
    Column("mode", String(16), nullable=False),
    Column("work_calls", Integer, nullable=False),
    Column("participation_attempts", Integer, nullable=False),
    Column("sent", Boolean, nullable=False),
    Column("reacted", Boolean, nullable=False),
    Column("pending", Boolean, nullable=False, server_default="0"),
    #: The endpoints that failed before the one that answered, comma-separated (``llm.fallbacks``).
    Column("fallback_from", String(512), nullable=True),
    UniqueConstraint("platform", "chat_id", "chain_id", "step", name="uq_driver_turn_step"),
    Index("ix_driver_turns_chat", "platform", "chat_id", "id"),
    Index("ix_driver_turns_wake", "wake_id"),
)

probe_responses = Table(
    "driver_probe_responses",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("platform", String(16), nullable=False),
    Column("chat_id", String(128), nullable=False),
    Column("wake_id", String(64), nullable=False),
    Column("requested_at_ms", BigInteger, nullable=False),
    Column("decision", String(16), nullable=False),
    Column("reason", Text, nullable=False),
    Column("activated", Boolean, nullable=False),
    Column("failed_closed", Boolean, nullable=False),
    Column("model_identity", String(128), nullable=True),
    Column("input_tokens", BigInteger, nullable=True),
    Column("output_tokens", BigInteger, nullable=True),
    Column("cache_read_tokens", BigInteger, nullable=True),
    Column("cache_write_tokens", BigInteger, nullable=True),
    Column("window_start", String(128), nullable=True),
    Column("omitted", Integer, nullable=False),
    Index("ix_driver_probes_chat", "platform", "chat_id", "id"),
    Index("ix_driver_probes_wake", "wake_id"),
)

chats = Table(
    "driver_chats",
    metadata,
    Column("platform", String(16), nullable=False),
    Column("chat_id", String(128), nullable=False),
    Column("processed_until_ms", BigInteger, nullable=False),
    Column("last_action_ms", BigInteger, nullable=False),
    PrimaryKeyConstraint("platform", "chat_id", name="pk_driver_chats"),
)

compactions = Table(
    "driver_compactions",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("platform", String(16), nullable=False),
    Column("chat_id", String(128), nullable=False),
    Column("cursor", BigInteger, nullable=False),
    Column("turns_from_ms", BigInteger, nullable=False),
    Column("summary", Text, nullable=False),
    Column("created_at_ms", BigInteger, nullable=False),
    Column("model_identity", String(128), nullable=False),
    Column("input_tokens", BigInteger, nullable=False),
    Column("output_tokens", BigInteger, nullable=False),
    Column("cache_read_tokens", BigInteger, nullable=False),
    Column("cache_write_tokens", BigInteger, nullable=False),
    Column("segments", Integer, nullable=False),
    Column("turns", Integer, nullable=False),
    Column("tokens_before", BigInteger, nullable=False),
    Column("tokens_after", BigInteger, nullable=False),
    Index("ix_driver_compactions_chat", "platform", "chat_id", "id"),
)

memories = Table(
    "driver_memories",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("platform", String(16), nullable=False),
    Column("person_id", String(128), nullable=False),
    Column("content", Text, nullable=False),
    Column("evidence", Text, nullable=False),
    Column("chat_id", String(128), nullable=False),
    Column("scope", String(16), nullable=False),
    Column("importance", String(16), nullable=False),
    Column("origin", String(16), nullable=False),
    Column("supersedes", Text, nullable=False),
    Column("related_to", Text, nullable=False),
    Column("created_at_ms", BigInteger, nullable=False),
    Column("key", String(128), nullable=True),
    Index("ix_driver_memories_person", "platform", "person_id", "id"),
    UniqueConstraint("key", name="uq_driver_memories_key"),
)

memory_patches = Table(
    "driver_memory_patches",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("memory_id", _Id, ForeignKey("driver_memories.id"), nullable=False),
    Column("change", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("actor", String(16), nullable=False),
    Column("chat_id", String(128), nullable=True),
    Column("created_at_ms", BigInteger, nullable=False),
    Column("key", String(128), nullable=True),
    Index("ix_driver_memory_patches_memory", "memory_id", "id"),
    UniqueConstraint("key", name="uq_driver_memory_patches_key"),
)

memory_index = Table(
    "driver_memory_index",
    metadata,
    Column("memory_id", _Id, ForeignKey("driver_memories.id"), primary_key=True, autoincrement=False),
    Column("platform", String(16), nullable=False),
    Column("person_id", String(128), nullable=False),
    Column("chat_id", String(128), nullable=False),
    Column("scope", String(16), nullable=False),
    Column("importance", String(16), nullable=False),
    Column("enabled", Boolean, nullable=False),
    Column("created_at_ms", BigInteger, nullable=False),
    Column("updated_at_ms", BigInteger, nullable=False),
    Column("terms", Text, nullable=False),
    Index(
        "ix_driver_memory_index_person",
        "platform",
        "person_id",
        "importance",
        "scope",
        "chat_id",
        "memory_id",
    ),
    Index("ix_driver_memory_index_chat", "platform", "scope", "chat_id"),
)

memory_forgets = Table(
    "driver_memory_forgets",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("platform", String(16), nullable=False),
    Column("person_id", String(128), nullable=False),
    Column("count", Integer, nullable=False),
    Column("actor", String(16), nullable=False),
    Column("created_at_ms", BigInteger, nullable=False),
)

memory_maintenance = Table(
    "driver_memory_maintenance",
    metadata,
    Column("platform", String(16), nullable=False),
    Column("person_id", String(128), nullable=False),
    Column("scope", String(16), nullable=False),
    Column("chat_id", String(128), nullable=False),
    Column("last_run_ms", BigInteger, nullable=False),
    Column("failures", Integer, nullable=False),
    Column("next_attempt_ms", BigInteger, nullable=False),
    Column("last_error", Text, nullable=True),
    PrimaryKeyConstraint("platform", "person_id", "scope", "chat_id", name="pk_driver_memory_maintenance"),
)

shell_tasks = Table(
    "driver_shell_tasks",
    metadata,
    Column("task_id", String(32), primary_key=True),
    Column("platform", String(16), nullable=False),
    Column("chat_id", String(128), nullable=False),
    Column("call_key", String(64), nullable=False),
    Column("host", String(255), nullable=False),
    Column("pgid", Integer, nullable=True),
    Column("command", Text, nullable=False),
    Column("intention", Text, nullable=True),
    Column("status", String(16), nullable=False),
    Column("background", Boolean, nullable=False),
    Column("announced", Boolean, nullable=False),
    Column("exit_code", Integer, nullable=True),
    Column("output_bytes", BigInteger, nullable=True),
    Column("started_at_ms", BigInteger, nullable=False),
    Column("finished_at_ms", BigInteger, nullable=True),
    UniqueConstraint("call_key", name="uq_driver_shell_tasks_call"),
    Index("ix_driver_shell_tasks_host", "host", "status"),
)

reminders = Table(
    "driver_reminders",
    metadata,
    Column("reminder_id", String(32), primary_key=True),
    Column("platform", String(16), nullable=False),
    Column("chat_id", String(128), nullable=False),
    Column("call_key", String(64), nullable=False),
    Column("person", String(128), nullable=True),
    Column("text", Text, nullable=False),
    Column("due_at_ms", BigInteger, nullable=False),
    Column("status", String(16), nullable=False),
    Column("created_at_ms", BigInteger, nullable=False),
    Column("ended_at_ms", BigInteger, nullable=True),
    Column("delivered_at_ms", BigInteger, nullable=True),
    UniqueConstraint("call_key", name="uq_driver_reminders_call"),
    Index("ix_driver_reminders_due", "status", "due_at_ms"),
    Index("ix_driver_reminders_chat", "platform", "chat_id", "status"),
)

wakeups = Table(
    "driver_wakeups",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("platform", String(16), nullable=False),
    Column("chat_id", String(128), nullable=False),
    Column("wake_id", String(64), nullable=False),
    Column("wake_kind", String(16), nullable=False),
    Column("path", String(16), nullable=True),
    Column("started_at_ms", BigInteger, nullable=False),
    Column("ended_at_ms", BigInteger, nullable=False),
    Column("context_first_seq", BigInteger, nullable=True),
    Column("context_last_seq", BigInteger, nullable=True),
    Column("context_count", Integer, nullable=False),
    Column("context_sha256", String(64), nullable=False),
    Column("probe_decision", String(16), nullable=True),
    Column("probe_reason", Text, nullable=True),
    Column("probe_model", String(128), nullable=True),
    Column("probe_input_tokens", BigInteger, nullable=False),
    Column("probe_cache_read_tokens", BigInteger, nullable=False),
    Column("probe_cache_write_tokens", BigInteger, nullable=False),
    Column("probe_output_tokens", BigInteger, nullable=False),
    Column("probe_latency_ms", BigInteger, nullable=True),
    Column("steps", Integer, nullable=False),
    Column("sends", Integer, nullable=False),
    Column("reactions", Integer, nullable=False),
    Column("tool_calls", Text, nullable=False),
    Column("input_tokens", BigInteger, nullable=False),
    Column("cache_read_tokens", BigInteger, nullable=False),
    Column("cache_write_tokens", BigInteger, nullable=False),
    Column("output_tokens", BigInteger, nullable=False),
    Column("primary_latency_ms", BigInteger, nullable=True),
    Column("primary_models", Text, nullable=False),
    Column("outcome", Text, nullable=False),
    Column("dry_run", Boolean, nullable=False),
    Column("model_called", Boolean, nullable=False),
    Column("withheld", Text, nullable=False),
    Column("content_hashed", Boolean, nullable=False),
    Index("ix_driver_wakeups_chat", "platform", "chat_id", "started_at_ms"),
    Index("ix_driver_wakeups_started", "started_at_ms"),
    Index("ix_driver_wakeups_wake", "wake_id"),
)

requests = Table(
    "driver_requests",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("platform", String(16), nullable=False),
    Column("chat_id", String(128), nullable=False),
    Column("wake_id", String(64), nullable=False),
    Column("request_id", String(128), nullable=False),
    Column("purpose", String(16), nullable=False),
    Column("step", Integer, nullable=True),
    Column("at_ms", BigInteger, nullable=False),
    Column("endpoint", String(128), nullable=False),
    Column("estimated_tokens", BigInteger, nullable=False),
    Column("called", Boolean, nullable=False),
    Column("blocks", Text, nullable=False),
    UniqueConstraint("request_id", name="uq_driver_requests_request"),
    Index("ix_driver_requests_chat", "platform", "chat_id", "purpose", "id"),
    Index("ix_driver_requests_wake", "wake_id"),
    Index("ix_driver_requests_at", "at_ms"),
)

request_blocks = Table(
    "driver_request_blocks",
    metadata,
    Column("sha256", String(64), primary_key=True),
    Column("text", Text, nullable=True),
    Column("chars", BigInteger, nullable=False),
    Column("last_seen_ms", BigInteger, nullable=False),
    Index("ix_driver_request_blocks_seen", "last_seen_ms"),
)

sent_messages = Table(
    "driver_sent_messages",
    metadata,
    Column("platform", String(16), nullable=False),
    Column("chat_id", String(128), nullable=False),
    Column("message_id", String(128), nullable=False),
    Column("wake_id", String(64), nullable=False),
    Column("at_ms", BigInteger, nullable=False),
    PrimaryKeyConstraint("platform", "chat_id", "message_id"),
    Index("ix_driver_sent_messages_at", "at_ms"),
)
