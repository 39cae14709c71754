"""webhooks: active_since (a reactivated webhook gets no events of its inactive time)

Revision ID: webhooks_0002
Revises: webhooks_0001
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

import trellis.db

revision = "webhooks_0002"
down_revision = "webhooks_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("webhooks") as batch:
        batch.add_column(sa.Column("active_since", trellis.db.UTCDateTime(), nullable=True))
    op.execute("UPDATE webhooks SET active_since = created_at")
    with op.batch_alter_table("webhooks") as batch:
        batch.alter_column("active_since", existing_type=trellis.db.UTCDateTime(), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("webhooks") as batch:
        batch.drop_column("active_since")
