"""event senders: the author of each message event, indexed, for pipeline.member

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("events") as batch:
        batch.add_column(sa.Column("sender_id", sa.String(128), nullable=True))
    # Rows stored before this revision get their author from the payload they already hold.
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "UPDATE events SET sender_id = CAST(payload AS json) -> 'sender' ->> 'id' WHERE kind = 'message'"
        )
    else:
        op.execute(
            "UPDATE events SET sender_id = json_extract(payload, '$.sender.id') WHERE kind = 'message'"
        )
    op.create_index("ix_events_sender", "events", ["platform", "chat_id", "sender_id"])


def downgrade() -> None:
    op.drop_index("ix_events_sender", "events")
    with op.batch_alter_table("events") as batch:
        batch.drop_column("sender_id")
