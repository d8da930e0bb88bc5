"""driver: the endpoints a turn response's model call fell back from (``llm.fallbacks``)

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("driver_turn_responses", sa.Column("fallback_from", sa.String(512), nullable=True))


def downgrade() -> None:
    op.drop_column("driver_turn_responses", "fallback_from")
