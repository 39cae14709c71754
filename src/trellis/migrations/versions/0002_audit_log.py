"""core: the audit log of administrative changes

Revision ID: core_0002
Revises: core_0001
Create Date: 2026-11-23
"""
from alembic import op
import sqlalchemy as sa

import trellis.db

revision = "core_0002"
down_revision = "core_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "trellis_audit_log",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.Column("actor_type", sa.String(20), nullable=False),
        sa.Column("actor_id", sa.String(32), nullable=True),
        sa.Column("actor_username", sa.String(150), nullable=True),
        sa.Column("module", sa.String(100), nullable=False),
        sa.Column("action", sa.String(100), nullable=False),
        sa.Column("target", sa.String(255), nullable=True),
        sa.Column("changes", trellis.db.JSONType, nullable=True),
        sa.Column("ip", sa.String(64), nullable=True),
        sa.Column("request_id", sa.String(64), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trellis_audit_log")),
    )
    op.create_index("ix_trellis_audit_log_created_at_id", "trellis_audit_log", ["created_at", "id"])
    op.create_index(op.f("ix_trellis_audit_log_module"), "trellis_audit_log", ["module"])
    op.create_index(op.f("ix_trellis_audit_log_action"), "trellis_audit_log", ["action"])
    op.create_index(op.f("ix_trellis_audit_log_target"), "trellis_audit_log", ["target"])


def downgrade() -> None:
    op.drop_table("trellis_audit_log")
