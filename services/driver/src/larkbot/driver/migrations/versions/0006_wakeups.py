"""driver: the audit trail (one row per wake-up)

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "driver_wakeups",
        sa.Column("id", _Id, primary_key=True, autoincrement=True),
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("wake_id", sa.String(64), nullable=False),
        sa.Column("wake_kind", sa.String(16), nullable=False),
        sa.Column("path", sa.String(16), nullable=True),
        sa.Column("started_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("ended_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("context_first_seq", sa.BigInteger(), nullable=True),
        sa.Column("context_last_seq", sa.BigInteger(), nullable=True),
        sa.Column("context_count", sa.Integer(), nullable=False),
        sa.Column("context_sha256", sa.String(64), nullable=False),
        sa.Column("probe_decision", sa.String(16), nullable=True),
        sa.Column("probe_reason", sa.Text(), nullable=True),
        sa.Column("probe_model", sa.String(128), nullable=True),
        sa.Column("probe_input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("probe_cache_read_tokens", sa.BigInteger(), nullable=False),
        sa.Column("probe_cache_write_tokens", sa.BigInteger(), nullable=False),
        sa.Column("probe_output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("probe_latency_ms", sa.BigInteger(), nullable=True),
        sa.Column("steps", sa.Integer(), nullable=False),
        sa.Column("sends", sa.Integer(), nullable=False),
        sa.Column("reactions", sa.Integer(), nullable=False),
        sa.Column("tool_calls", sa.Text(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_read_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_write_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("primary_latency_ms", sa.BigInteger(), nullable=True),
        sa.Column("primary_models", sa.Text(), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.Column("model_called", sa.Boolean(), nullable=False),
        sa.Column("withheld", sa.Text(), nullable=False),
        sa.Column("content_hashed", sa.Boolean(), nullable=False),
    )
    op.create_index("ix_driver_wakeups_chat", "driver_wakeups", ["platform", "chat_id", "started_at_ms"])
    op.create_index("ix_driver_wakeups_started", "driver_wakeups", ["started_at_ms"])


def downgrade() -> None:
    op.drop_index("ix_driver_wakeups_started", table_name="driver_wakeups")
    op.drop_index("ix_driver_wakeups_chat", table_name="driver_wakeups")
    op.drop_table("driver_wakeups")
