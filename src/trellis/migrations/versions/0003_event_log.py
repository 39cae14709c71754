"""core: the event log (trellis.events)

Revision ID: core_0003
Revises: core_0002
Create Date: 2026-11-24
"""
from alembic import op
import sqlalchemy as sa

import trellis.db

revision = "core_0003"
down_revision = "core_0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "core_events",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("event_id", sa.BigInteger(), nullable=True),
        sa.Column("topic", sa.String(200), nullable=False),
        sa.Column("family", sa.String(200), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_core_events")),
        sa.UniqueConstraint("event_id", name=op.f("uq_core_events_event_id")),
    )
    op.create_index("ix_core_events_family_event_id", "core_events", ["family", "event_id"])
    op.create_index(
        "ix_core_events_unsequenced",
        "core_events",
        ["id"],
        postgresql_where=sa.text("event_id IS NULL"),
        sqlite_where=sa.text("event_id IS NULL"),
    )


def downgrade() -> None:
    op.drop_table("core_events")
