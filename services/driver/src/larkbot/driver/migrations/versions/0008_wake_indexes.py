"""driver: look-ups by wake-up (the inspector opens one wake-up's record, probe and steps)

Revision ID: 0008
Revises: 0007
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_driver_wakeups_wake", "driver_wakeups", ["wake_id"])
    op.create_index("ix_driver_turns_wake", "driver_turn_responses", ["wake_id"])
    op.create_index("ix_driver_probes_wake", "driver_probe_responses", ["wake_id"])


def downgrade() -> None:
    op.drop_index("ix_driver_probes_wake", "driver_probe_responses")
    op.drop_index("ix_driver_turns_wake", "driver_turn_responses")
    op.drop_index("ix_driver_wakeups_wake", "driver_wakeups")
