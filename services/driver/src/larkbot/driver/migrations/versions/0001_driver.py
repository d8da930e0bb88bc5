"""driver: turn responses, probe responses, per-chat watermarks

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "driver_turn_responses",
        sa.Column("id", _Id, primary_key=True, autoincrement=True),
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("chain_id", sa.String(64), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("wake_id", sa.String(64), nullable=False),
        sa.Column("requested_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("entries", sa.Text(), nullable=False),
        sa.Column("model_identity", sa.String(128), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_read_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_write_tokens", sa.BigInteger(), nullable=False),
        sa.Column("reasoning_tokens", sa.BigInteger(), nullable=True),
        sa.Column("requires_follow_up", sa.Boolean(), nullable=False),
        sa.Column("shell_tools_exposed", sa.Boolean(), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("work_calls", sa.Integer(), nullable=False),
        sa.Column("participation_attempts", sa.Integer(), nullable=False),
        sa.Column("sent", sa.Boolean(), nullable=False),
        sa.Column("reacted", sa.Boolean(), nullable=False),
        sa.UniqueConstraint("platform", "chat_id", "chain_id", "step", name="uq_driver_turn_step"),
    )
    op.create_index("ix_driver_turns_chat", "driver_turn_responses", ["platform", "chat_id", "id"])
    op.create_table(
        "driver_probe_responses",
        sa.Column("id", _Id, primary_key=True, autoincrement=True),
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("wake_id", sa.String(64), nullable=False),
        sa.Column("requested_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("decision", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("activated", sa.Boolean(), nullable=False),
        sa.Column("failed_closed", sa.Boolean(), nullable=False),
        sa.Column("model_identity", sa.String(128), nullable=True),
        sa.Column("input_tokens", sa.BigInteger(), nullable=True),
        sa.Column("output_tokens", sa.BigInteger(), nullable=True),
        sa.Column("cache_read_tokens", sa.BigInteger(), nullable=True),
        sa.Column("cache_write_tokens", sa.BigInteger(), nullable=True),
        sa.Column("window_start", sa.String(128), nullable=True),
        sa.Column("omitted", sa.Integer(), nullable=False),
    )
    op.create_index("ix_driver_probes_chat", "driver_probe_responses", ["platform", "chat_id", "id"])
    op.create_table(
        "driver_chats",
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("processed_until_ms", sa.BigInteger(), nullable=False),
        sa.Column("last_action_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("platform", "chat_id", name="pk_driver_chats"),
    )


def downgrade() -> None:
    op.drop_table("driver_chats")
    op.drop_table("driver_probe_responses")
    op.drop_table("driver_turn_responses")
