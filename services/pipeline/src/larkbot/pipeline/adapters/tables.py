"""The pipeline's tables. ``events`` is the source of truth of everything the system has seen.

``events.id`` is the order of record (SPEC §2): the order in which the pipeline committed a chat's events.
The unique key ``(platform, chat_id, dedup_key)`` makes redelivery harmless: a second insert of the same
event is a no-op, so the consumer can commit first and acknowledge second.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Double,
    Index,
    Integer,
    MetaData,
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
    UniqueConstraint("platform", "chat_id", "dedup_key", name="uq_events_dedup"),
    Index("ix_events_chat_order", "platform", "chat_id", "id"),
    Index("ix_events_message", "platform", "chat_id", "message_id"),
)
