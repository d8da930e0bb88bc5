"""driver: reminders (one row per set_reminder call; pending ones survive restarts as rows)

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "driver_reminders",
        sa.Column("reminder_id", sa.String(32), primary_key=True),
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("call_key", sa.String(64), nullable=False),
        sa.Column("person", sa.String(128), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("due_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("ended_at_ms", sa.BigInteger(), nullable=True),
        sa.Column("delivered_at_ms", sa.BigInteger(), nullable=True),
        sa.UniqueConstraint("call_key", name="uq_driver_reminders_call"),
    )
    op.create_index("ix_driver_reminders_due", "driver_reminders", ["status", "due_at_ms"])
    op.create_index("ix_driver_reminders_chat", "driver_reminders", ["platform", "chat_id", "status"])


def downgrade() -> None:
    op.drop_index("ix_driver_reminders_chat", table_name="driver_reminders")
    op.drop_index("ix_driver_reminders_due", table_name="driver_reminders")
    op.drop_table("driver_reminders")
