"""authorization: byte-order collation for the tuple columns on PostgreSQL (faster index probes)

Revision ID: authorization_0002
Revises: authorization_0001
Create Date: 2026-11-26
"""

from alembic import op

revision = "authorization_0002"
down_revision = "authorization_0001"
branch_labels = None
depends_on = None

# column → length; the indexes over them are rebuilt by ALTER … TYPE.
COLUMNS = {"subject": 100, "relation": 32, "resource_type": 63, "resource_id": 64}


def _collate(collation: str) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return  # SQLite compares bytes already
    changes = ", ".join(
        f'ALTER COLUMN {name} TYPE varchar({length}) COLLATE "{collation}"' for name, length in COLUMNS.items()
    )
    op.execute(f"ALTER TABLE authz_relations {changes}")


def upgrade() -> None:
    _collate("C")


def downgrade() -> None:
    _collate("default")
