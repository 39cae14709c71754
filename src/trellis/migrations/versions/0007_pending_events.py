"""core: events wait for their number in core_events_pending (PostgreSQL), not as unnumbered core_events rows

Revision ID: core_0007
Revises: core_0006
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

import trellis.db

revision = "core_0007"
down_revision = "core_0006"
branch_labels = None
depends_on = None

COLUMNS = "id, topic, family, payload, created_at"


def upgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    op.create_table(
        "core_events_pending",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            # One insert order for both tables: the pending row keeps its id when it is numbered.
            server_default=sa.text("nextval('core_events_id_seq')") if postgresql else None,
            autoincrement=not postgresql,
            nullable=False,
        ),
        sa.Column("topic", sa.String(200), nullable=False),
        sa.Column("family", sa.String(200), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_core_events_pending")),
    )
    # The events committed but not numbered yet wait in the new table (SQLite numbered every event as it
    # inserted it: it has none).
    if postgresql:
        op.execute(
            f"INSERT INTO core_events_pending ({COLUMNS}) SELECT {COLUMNS} FROM core_events WHERE event_id IS NULL"
        )
        op.execute("DELETE FROM core_events WHERE event_id IS NULL")
    op.drop_index("ix_core_events_unsequenced", table_name="core_events")
    with op.batch_alter_table("core_events") as batch:
        batch.alter_column("event_id", existing_type=sa.BigInteger(), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("core_events") as batch:
        batch.alter_column("event_id", existing_type=sa.BigInteger(), nullable=True)
    op.create_index(
        "ix_core_events_unsequenced",
        "core_events",
        ["id"],
        postgresql_where=sa.text("event_id IS NULL"),
        sqlite_where=sa.text("event_id IS NULL"),
    )
    op.execute(f"INSERT INTO core_events ({COLUMNS}) SELECT {COLUMNS} FROM core_events_pending")
    op.drop_table("core_events_pending")
