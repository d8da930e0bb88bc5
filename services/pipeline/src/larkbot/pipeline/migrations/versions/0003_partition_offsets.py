"""partition offsets: where each partition of a stream resumes after a restart or a hand-over

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "partition_offsets",
        sa.Column("consumer", sa.String(64), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("resume_seq", sa.BigInteger(), nullable=False),
        sa.Column("updated_at_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("consumer", "partition", name="pk_partition_offsets"),
    )


def downgrade() -> None:
    op.drop_table("partition_offsets")
