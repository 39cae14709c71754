"""core: the event families' change counters (trellis.events.change_number in O(1))

Revision ID: core_0006
Revises: core_0005
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "core_0006"
down_revision = "core_0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "core_event_counters",
        sa.Column("family", sa.String(200), nullable=False),
        sa.Column("slot", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("changes", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("family", "slot", name=op.f("pk_core_event_counters")),
    )
    # Each family starts at the change number it had (its highest event_id plus its unnumbered rows), so
    # the number never goes back across the upgrade.
    op.execute(
        "INSERT INTO core_event_counters (family, slot, changes) "
        "SELECT family, 0, coalesce(max(event_id), 0) + sum(CASE WHEN event_id IS NULL THEN 1 ELSE 0 END) "
        "FROM core_events GROUP BY family"
    )


def downgrade() -> None:
    op.drop_table("core_event_counters")
