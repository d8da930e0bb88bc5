"""events: the source of truth, unique per (platform, chat_id, dedup_key)

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True
        ),
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("dedup_key", sa.String(512), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("message_id", sa.String(128), nullable=True),
        sa.Column("received_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("timestamp_sec", sa.Double(), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("stream_seq", sa.BigInteger(), nullable=True),
        sa.UniqueConstraint("platform", "chat_id", "dedup_key", name="uq_events_dedup"),
    )
    op.create_index("ix_events_chat_order", "events", ["platform", "chat_id", "id"])
    op.create_index("ix_events_message", "events", ["platform", "chat_id", "message_id"])


def downgrade() -> None:
    op.drop_table("events")
