"""The pipeline's tables. ``events`` is the source of truth of everything the system has seen.

``events.id`` is the order of record (SPEC §2): the order in which the pipeline committed a chat's events.
The unique key ``(platform, chat_id, dedup_key)`` makes redelivery harmless: a second insert of the same
event is a no-op, so the consumer can commit first and acknowledge second. ``message_alias`` is the
rendered alias of a message event (``core.alias_for``), so ``pipeline.history`` resolves an alias of a
message the live context no longer holds with one indexed lookup. ``sender_id`` is the author of a
message event (``None`` for every other kind), so ``pipeline.member`` finds a member's messages the same
way.

``chat_cursors`` holds each chat's compaction cursor (an ``events.id``); ``users`` archives every sender
seen (identity plus the latest name snapshot); ``alt_texts`` caches media alt texts by content key so that
cold replay renders exactly what live processing rendered.

``partition_offsets`` records, per partition of ``EVENTS``, the lowest stream sequence not yet committed
(``resume_seq``). It is written in the same transaction as the events it accounts for, so after a crash or a
hand-over the next owner resumes exactly there: what was committed is redelivered and skipped by the unique
key, and nothing of a chat is applied before an older event of the same chat.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Double,
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

# SQLite only auto-increments an INTEGER PRIMARY KEY; PostgreSQL gets a BIGINT identity.
_Id = BigInteger().with_variant(Integer(), "sqlite")

events = Table(
    "events",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("platform", String(16), nullable=False),
    Column("chat_id", String(128), nullable=False),
    Column("dedup_key", String(512), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("message_id", String(128), nullable=True),
    Column("received_at_ms", BigInteger, nullable=False),
    Column("timestamp_sec", Double, nullable=False),
    Column("payload", Text, nullable=False),
    Column("stream_seq", BigInteger, nullable=True),
    Column("message_alias", String(16), nullable=True),
    Column("sender_id", String(128), nullable=True),
    UniqueConstraint("platform", "chat_id", "dedup_key", name="uq_events_dedup"),
    Index("ix_events_chat_order", "platform", "chat_id", "id"),
    Index("ix_events_message", "platform", "chat_id", "message_id"),
    Index("ix_events_alias", "platform", "chat_id", "message_alias"),
    Index("ix_events_sender", "platform", "chat_id", "sender_id"),
)

chat_cursors = Table(
    "chat_cursors",
    metadata,
    Column("platform", String(16), nullable=False),
    Column("chat_id", String(128), nullable=False),
    Column("cursor", BigInteger, nullable=False),
    Column("reason", String(64), nullable=False),
    Column("updated_at_ms", BigInteger, nullable=False),
    PrimaryKeyConstraint("platform", "chat_id", name="pk_chat_cursors"),
)

users = Table(
    "users",
    metadata,
    Column("platform", String(16), nullable=False),
    Column("user_id", String(128), nullable=False),
    Column("display_name", Text, nullable=False),
    Column("username", String(256), nullable=True),
    Column("is_bot", Boolean, nullable=False),
    Column("first_seen_ms", BigInteger, nullable=False),
    Column("last_seen_ms", BigInteger, nullable=False),
    PrimaryKeyConstraint("platform", "user_id", name="pk_users"),
)

alt_texts = Table(
    "alt_texts",
    metadata,
    Column("cache_key", String(256), primary_key=True),
    Column("alt_text", Text, nullable=False),
)

partition_offsets = Table(
    "partition_offsets",
    metadata,
    Column("consumer", String(64), nullable=False),
    Column("partition", Integer, nullable=False),
    Column("resume_seq", BigInteger, nullable=False),
    Column("updated_at_ms", BigInteger, nullable=False),
    PrimaryKeyConstraint("consumer", "partition", name="pk_partition_offsets"),
)
