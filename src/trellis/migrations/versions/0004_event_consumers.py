"""core: durable consumers of the event log (trellis.events.consumer); the Webhooks cursor carried over

Revision ID: core_0004
Revises: core_0003
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "core_0004"
down_revision = "core_0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "core_event_consumers",
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("last_event_id", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_core_event_consumers")),
    )
    # A deployment whose Webhooks module kept its own cursor goes on from where it was (its migration
    # webhooks_0003, which runs after this one, drops that table).
    if sa.inspect(op.get_bind()).has_table("webhooks_cursor"):
        op.execute(
            "INSERT INTO core_event_consumers (name, last_event_id) "
            "SELECT 'webhooks', last_event_id FROM webhooks_cursor WHERE name = 'events'"
        )


def downgrade() -> None:
    op.drop_table("core_event_consumers")
