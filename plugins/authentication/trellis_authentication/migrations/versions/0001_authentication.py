"""authentication: users, sessions, rotated refresh tokens

Revision ID: authentication_0001
Revises:
Create Date: 2026-11-21
"""
import sqlalchemy as sa
from alembic import op

import trellis.db

revision = "authentication_0001"
down_revision = None
branch_labels = ("authentication",)
depends_on = "core_0001"


def upgrade() -> None:
    op.create_table(
        "auth_users",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("email", sa.String(254), nullable=False),
        sa.Column("password_hash", sa.String(255), nullable=False),
        sa.Column("is_active", sa.Boolean(), nullable=False),
        sa.Column("is_verified", sa.Boolean(), nullable=False),
        sa.Column("extra", trellis.db.JSONType, nullable=False),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.Column("updated_at", trellis.db.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_auth_users")),
    )
    op.create_index("ix_auth_users_email", "auth_users", ["email"], unique=True)
    op.create_index("ix_auth_users_created_at", "auth_users", ["created_at"])
    op.create_table(
        "auth_sessions",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("user_id", sa.String(32), nullable=False),
        sa.Column("refresh_hash", sa.String(64), nullable=False),
        sa.Column("revoked", sa.Boolean(), nullable=False),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.Column("renewed_at", trellis.db.UTCDateTime(), nullable=True),
        sa.Column("expires_at", trellis.db.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["auth_users.id"], name=op.f("fk_auth_sessions_user_id_auth_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_auth_sessions")),
    )
    op.create_index("ix_auth_sessions_user_id", "auth_sessions", ["user_id"])
    op.create_index("ix_auth_sessions_refresh_hash", "auth_sessions", ["refresh_hash"], unique=True)
    op.create_table(
        "auth_rotated_tokens",
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("session_id", sa.String(32), nullable=False),
        sa.Column("rotated_at", trellis.db.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["auth_sessions.id"],
            name=op.f("fk_auth_rotated_tokens_session_id_auth_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("token_hash", name=op.f("pk_auth_rotated_tokens")),
    )
    op.create_index("ix_auth_rotated_tokens_session_id", "auth_rotated_tokens", ["session_id"])


def downgrade() -> None:
    op.drop_table("auth_rotated_tokens")
    op.drop_table("auth_sessions")
    op.drop_table("auth_users")
