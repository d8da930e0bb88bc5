"""driver: write-ahead (pending) turn responses

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
    with op.batch_alter_table("driver_turn_responses") as batch:
        batch.add_column(sa.Column("pending", sa.Boolean(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("driver_turn_responses") as batch:
        batch.drop_column("pending")
