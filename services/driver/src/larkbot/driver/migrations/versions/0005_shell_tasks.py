"""driver: shell tasks (one row per bash call; background tasks survive restarts as rows)

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "driver_shell_tasks",
        sa.Column("task_id", sa.String(32), primary_key=True),
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("call_key", sa.String(64), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pgid", sa.Integer(), nullable=True),
        sa.Column("command", sa.Text(), nullable=False),
        sa.Column("intention", sa.Text(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("background", sa.Boolean(), nullable=False),
        sa.Column("announced", sa.Boolean(), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("output_bytes", sa.BigInteger(), nullable=True),
        sa.Column("started_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("finished_at_ms", sa.BigInteger(), nullable=True),
        sa.UniqueConstraint("call_key", name="uq_driver_shell_tasks_call"),
    )
    op.create_index("ix_driver_shell_tasks_host", "driver_shell_tasks", ["host", "status"])


def downgrade() -> None:
    op.drop_index("ix_driver_shell_tasks_host", table_name="driver_shell_tasks")
    op.drop_table("driver_shell_tasks")
