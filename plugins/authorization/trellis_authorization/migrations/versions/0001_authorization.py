"""relation tuples and resource definitions

Revision ID: authorization_0001
Revises:
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

import trellis.db

revision = "authorization_0001"
down_revision = None
branch_labels = ("authorization",)
depends_on = "core_0001"


def upgrade() -> None:
    op.create_table(
        "authz_relations",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("subject", sa.String(100), nullable=False),
        sa.Column("relation", sa.String(32), nullable=False),
        sa.Column("resource_type", sa.String(63), nullable=False),
        sa.Column("resource_id", sa.String(64), nullable=False),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_authz_relations")),
        sa.UniqueConstraint("resource_type", "resource_id", "relation", "subject", name="uq_authz_relations_tuple"),
    )
    op.create_index(
        "ix_authz_relations_subject", "authz_relations", ["subject", "resource_type", "relation", "resource_id"]
    )
    op.create_table(
        "authz_resources",
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("relations", trellis.db.JSONType, nullable=False),
        sa.Column("permissions", trellis.db.JSONType, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_at", trellis.db.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_authz_resources")),
    )


def downgrade() -> None:
    op.drop_table("authz_resources")
    op.drop_index("ix_authz_relations_subject", table_name="authz_relations")
    op.drop_table("authz_relations")
