"""chat cursors, users archive, alt-text cache, message aliases

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("events") as batch:
        batch.add_column(sa.Column("message_alias", sa.String(16), nullable=True))
    op.create_index("ix_events_alias", "events", ["platform", "chat_id", "message_alias"])
    op.create_table(
        "chat_cursors",
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("cursor", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("updated_at_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("platform", "chat_id", name="pk_chat_cursors"),
    )
    op.create_table(
        "users",
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("display_name", sa.Text(), nullable=False),
        sa.Column("username", sa.String(256), nullable=True),
        sa.Column("is_bot", sa.Boolean(), nullable=False),
        sa.Column("first_seen_ms", sa.BigInteger(), nullable=False),
        sa.Column("last_seen_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("platform", "user_id", name="pk_users"),
    )
    op.create_table(
        "alt_texts",
        sa.Column("cache_key", sa.String(256), primary_key=True),
        sa.Column("alt_text", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("alt_texts")
    op.drop_table("users")
    op.drop_table("chat_cursors")
    op.drop_index("ix_events_alias", "events")
    with op.batch_alter_table("events") as batch:
        batch.drop_column("message_alias")
