"""database module: schema records and custom endpoints

Document tables are not created here: each schema gets its own at run time (see tables.py).

Revision ID: database_0001
Revises:
Create Date: 2026-11-21
"""
import json

import sqlalchemy as sa
from alembic import op

import trellis.db

revision = "database_0001"
down_revision = None
branch_labels = ("database",)
depends_on = "core_0001"


def upgrade() -> None:
    op.create_table(
        "database_schemas",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("owner_module", sa.String(100), nullable=False),
        sa.Column("fields", trellis.db.JSONType, nullable=False),
        sa.Column("model_options", trellis.db.JSONType, nullable=False),
        sa.Column("extensions", trellis.db.JSONType, nullable=False),
        sa.Column("storage", trellis.db.JSONType, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.Column("updated_at", trellis.db.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_database_schemas")),
        sa.UniqueConstraint("name", name=op.f("uq_database_schemas_name")),
    )
    op.create_table(
        "database_custom_endpoints",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("operation", sa.String(10), nullable=False),
        sa.Column("schema_id", sa.String(32), nullable=False),
        sa.Column("inputs", trellis.db.JSONType, nullable=False),
        sa.Column("query", trellis.db.JSONType, nullable=True),
        sa.Column("assignments", trellis.db.JSONType, nullable=False),
        sa.Column("authentication", sa.Boolean(), nullable=False),
        sa.Column("paginated", sa.Boolean(), nullable=False),
        sa.Column("sorted", sa.Boolean(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.Column("updated_at", trellis.db.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["schema_id"], ["database_schemas.id"],
            name=op.f("fk_database_custom_endpoints_schema_id_database_schemas"), ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_database_custom_endpoints")),
        sa.UniqueConstraint("name", name=op.f("uq_database_custom_endpoints_name")),
    )
    op.create_index(
        op.f("ix_database_custom_endpoints_schema_id"), "database_custom_endpoints", ["schema_id"], unique=False
    )


def downgrade() -> None:
    # Document tables created at run time are named in database_schemas.storage; drop them first.
    bind = op.get_bind()
    rows = bind.execute(sa.text("SELECT storage FROM database_schemas")).all()
    for (storage,) in rows:
        if isinstance(storage, str):
            storage = json.loads(storage)
        table = (storage or {}).get("table")
        if table:
            op.execute(f'DROP TABLE IF EXISTS "{table}"')
    op.drop_index(op.f("ix_database_custom_endpoints_schema_id"), table_name="database_custom_endpoints")
    op.drop_table("database_custom_endpoints")
    op.drop_table("database_schemas")
