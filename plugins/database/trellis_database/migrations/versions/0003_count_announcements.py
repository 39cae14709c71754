"""database module: count announcements (writes skip Redis while no count of their table is cached)

Revision ID: database_0003
Revises: database_0002
Create Date: 2026-11-24
"""

import json

import sqlalchemy as sa
from alembic import op

from trellis.db import UTCDateTime

revision = "database_0003"
down_revision = "database_0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("database_count_epochs", sa.Column("counted_until", UTCDateTime(), nullable=True))
    # Every existing document table gets its row (without one, its writes always drop its counts).
    connection = op.get_bind()
    existing = {row[0] for row in connection.execute(sa.text("SELECT table_name FROM database_count_epochs"))}
    for (storage,) in connection.execute(sa.text("SELECT storage FROM database_schemas")):
        table = (json.loads(storage) if isinstance(storage, str) else storage or {}).get("table")
        if table and table not in existing:
            connection.execute(
                sa.text("INSERT INTO database_count_epochs (table_name, epoch) VALUES (:t, 0)"), {"t": table}
            )


def downgrade() -> None:
    with op.batch_alter_table("database_count_epochs") as batch:
        batch.drop_column("counted_until")
