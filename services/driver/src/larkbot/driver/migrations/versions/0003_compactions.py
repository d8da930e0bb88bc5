"""driver: compaction summaries (append-only)

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
        "driver_compactions",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True
        ),
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("cursor", sa.BigInteger(), nullable=False),
        sa.Column("turns_from_ms", sa.BigInteger(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("created_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("model_identity", sa.String(128), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_read_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_write_tokens", sa.BigInteger(), nullable=False),
        sa.Column("segments", sa.Integer(), nullable=False),
        sa.Column("turns", sa.Integer(), nullable=False),
        sa.Column("tokens_before", sa.BigInteger(), nullable=False),
        sa.Column("tokens_after", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_driver_compactions_chat", "driver_compactions", ["platform", "chat_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_driver_compactions_chat", table_name="driver_compactions")
    op.drop_table("driver_compactions")
