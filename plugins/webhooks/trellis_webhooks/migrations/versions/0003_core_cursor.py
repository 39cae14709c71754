"""webhooks: the dispatch cursor moves to the core (core_event_consumers, row "webhooks")

Revision ID: webhooks_0003
Revises: webhooks_0002
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "webhooks_0003"
down_revision = "webhooks_0002"
branch_labels = None
# core_0004 copies this table's position into the core's consumer table before it goes.
depends_on = "core_0004"


def upgrade() -> None:
    op.drop_table("webhooks_cursor")


def downgrade() -> None:
    op.create_table(
        "webhooks_cursor",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("last_event_id", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_webhooks_cursor")),
    )
    op.execute(
        "INSERT INTO webhooks_cursor (name, last_event_id) "
        "SELECT 'events', last_event_id FROM core_event_consumers WHERE name = 'webhooks'"
    )
