"""driver: the request log (each model request as content-addressed blocks) and the messages sent

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "driver_requests",
        sa.Column("id", _Id, primary_key=True, autoincrement=True),
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("wake_id", sa.String(64), nullable=False),
        sa.Column("request_id", sa.String(128), nullable=False),
        sa.Column("purpose", sa.String(16), nullable=False),
        sa.Column("step", sa.Integer(), nullable=True),
        sa.Column("at_ms", sa.BigInteger(), nullable=False),
        sa.Column("endpoint", sa.String(128), nullable=False),
        sa.Column("estimated_tokens", sa.BigInteger(), nullable=False),
        sa.Column("called", sa.Boolean(), nullable=False),
        sa.Column("blocks", sa.Text(), nullable=False),
        sa.UniqueConstraint("request_id", name="uq_driver_requests_request"),
    )
    op.create_index("ix_driver_requests_chat", "driver_requests", ["platform", "chat_id", "purpose", "id"])
    op.create_index("ix_driver_requests_wake", "driver_requests", ["wake_id"])
    op.create_index("ix_driver_requests_at", "driver_requests", ["at_ms"])
    op.create_table(
        "driver_request_blocks",
        sa.Column("sha256", sa.String(64), primary_key=True),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("chars", sa.BigInteger(), nullable=False),
        sa.Column("last_seen_ms", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_driver_request_blocks_seen", "driver_request_blocks", ["last_seen_ms"])
    op.create_table(
        "driver_sent_messages",
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("message_id", sa.String(128), nullable=False),
        sa.Column("wake_id", sa.String(64), nullable=False),
        sa.Column("at_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("platform", "chat_id", "message_id"),
    )
    op.create_index("ix_driver_sent_messages_at", "driver_sent_messages", ["at_ms"])


def downgrade() -> None:
    op.drop_index("ix_driver_sent_messages_at", table_name="driver_sent_messages")
    op.drop_table("driver_sent_messages")
    op.drop_index("ix_driver_request_blocks_seen", table_name="driver_request_blocks")
    op.drop_table("driver_request_blocks")
    op.drop_index("ix_driver_requests_at", table_name="driver_requests")
    op.drop_index("ix_driver_requests_wake", table_name="driver_requests")
    op.drop_index("ix_driver_requests_chat", table_name="driver_requests")
    op.drop_table("driver_requests")
