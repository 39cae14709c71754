"""core tables: admins, module configs, cache generations

Revision ID: core_0001
Revises:
Create Date: 2026-11-21
"""
from alembic import op
import sqlalchemy as sa

import trellis.db

revision = "core_0001"
down_revision = None
branch_labels = ("trellis",)
depends_on = None


def upgrade() -> None:
    op.create_table(
        "trellis_admins",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("username", sa.String(150), nullable=False),
        sa.Column("password_hash", sa.String(255), nullable=False),
        sa.Column("token_version", sa.Integer(), nullable=False),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.Column("updated_at", trellis.db.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trellis_admins")),
        sa.UniqueConstraint("username", name=op.f("uq_trellis_admins_username")),
    )
    op.create_table(
        "trellis_module_configs",
        sa.Column("module", sa.String(100), nullable=False),
        sa.Column("data", trellis.db.JSONType, nullable=False),
        sa.Column("updated_at", trellis.db.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("module", name=op.f("pk_trellis_module_configs")),
    )
    op.create_table(
        "trellis_cache_generations",
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_trellis_cache_generations")),
    )


def downgrade() -> None:
    op.drop_table("trellis_cache_generations")
    op.drop_table("trellis_module_configs")
    op.drop_table("trellis_admins")
