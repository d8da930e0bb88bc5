"""driver: per-person memories, their patches, search index, forget log and maintenance state

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "driver_memories",
        sa.Column("id", _Id, primary_key=True, autoincrement=True),
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("person_id", sa.String(128), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("evidence", sa.Text(), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("importance", sa.String(16), nullable=False),
        sa.Column("origin", sa.String(16), nullable=False),
        sa.Column("supersedes", sa.Text(), nullable=False),
        sa.Column("related_to", sa.Text(), nullable=False),
        sa.Column("created_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("key", sa.String(128), nullable=True),
        sa.UniqueConstraint("key", name="uq_driver_memories_key"),
    )
    op.create_index("ix_driver_memories_person", "driver_memories", ["platform", "person_id", "id"])
    op.create_table(
        "driver_memory_patches",
        sa.Column("id", _Id, primary_key=True, autoincrement=True),
        sa.Column("memory_id", _Id, sa.ForeignKey("driver_memories.id"), nullable=False),
        sa.Column("change", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("actor", sa.String(16), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=True),
        sa.Column("created_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("key", sa.String(128), nullable=True),
        sa.UniqueConstraint("key", name="uq_driver_memory_patches_key"),
    )
    op.create_index("ix_driver_memory_patches_memory", "driver_memory_patches", ["memory_id", "id"])
    op.create_table(
        "driver_memory_index",
        sa.Column(
            "memory_id", _Id, sa.ForeignKey("driver_memories.id"), primary_key=True, autoincrement=False
        ),
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("person_id", sa.String(128), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("importance", sa.String(16), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("updated_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("terms", sa.Text(), nullable=False),
    )
    op.create_index(
        "ix_driver_memory_index_person",
        "driver_memory_index",
        ["platform", "person_id", "importance", "scope", "chat_id", "memory_id"],
    )
    op.create_index("ix_driver_memory_index_chat", "driver_memory_index", ["platform", "scope", "chat_id"])
    if op.get_bind().dialect.name == "sqlite":
        # The terms, and the visibility keys that let a search rank only what the chat may see
        # (core.memorytext); the store writes these rows in the transactions that write the index.
        # Diacritics stay, as with PostgreSQL's 'simple' configuration.
        op.execute(
            "CREATE VIRTUAL TABLE driver_memory_fts USING fts5("
            "terms, keys, tokenize='unicode61 remove_diacritics 0')"
        )
    else:
        # Stored, not an expression index: ranking and filtering the memories a chat may see would
        # otherwise recompute every candidate's vector (most of a search's time at 100,000 memories).
        op.execute(
            "ALTER TABLE driver_memory_index ADD COLUMN terms_tsv tsvector "
            "GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, terms)) STORED"
        )
        op.execute("CREATE INDEX ix_driver_memory_index_terms ON driver_memory_index USING gin (terms_tsv)")
    op.create_table(
        "driver_memory_forgets",
        sa.Column("id", _Id, primary_key=True, autoincrement=True),
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("person_id", sa.String(128), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("actor", sa.String(16), nullable=False),
        sa.Column("created_at_ms", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "driver_memory_maintenance",
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("person_id", sa.String(128), nullable=False),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("last_run_ms", sa.BigInteger(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("next_attempt_ms", sa.BigInteger(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint(
            "platform", "person_id", "scope", "chat_id", name="pk_driver_memory_maintenance"
        ),
    )


def downgrade() -> None:
    op.drop_table("driver_memory_maintenance")
    op.drop_table("driver_memory_forgets")
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TABLE driver_memory_fts")
    else:
        op.execute("DROP INDEX ix_driver_memory_index_terms")
    op.drop_index("ix_driver_memory_index_chat", table_name="driver_memory_index")
    op.drop_index("ix_driver_memory_index_person", table_name="driver_memory_index")
    op.drop_table("driver_memory_index")
    op.drop_index("ix_driver_memory_patches_memory", table_name="driver_memory_patches")
    op.drop_table("driver_memory_patches")
    op.drop_index("ix_driver_memories_person", table_name="driver_memories")
    op.drop_table("driver_memories")
