"""authentication: teams, their members and invites

Revision ID: authentication_0005
Revises: authentication_0004
Create Date: 2026-11-26
"""
import sqlalchemy as sa
from alembic import op

import trellis.db

revision = "authentication_0005"
down_revision = "authentication_0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "auth_teams",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("parent_id", sa.String(32), nullable=True),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.Column("updated_at", trellis.db.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["parent_id"], ["auth_teams.id"], name=op.f("fk_auth_teams_parent_id_auth_teams"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_auth_teams")),
    )
    op.create_index(
        "ix_auth_teams_parent_id_name",
        "auth_teams",
        ["parent_id", "name"],
        unique=True,
        postgresql_where=sa.text("parent_id IS NOT NULL"),
        sqlite_where=sa.text("parent_id IS NOT NULL"),
    )
    op.create_index(
        "ix_auth_teams_root_name",
        "auth_teams",
        ["name"],
        unique=True,
        postgresql_where=sa.text("parent_id IS NULL"),
        sqlite_where=sa.text("parent_id IS NULL"),
    )
    op.create_table(
        "auth_team_members",
        sa.Column("team_id", sa.String(32), nullable=False),
        sa.Column("user_id", sa.String(32), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["team_id"], ["auth_teams.id"], name=op.f("fk_auth_team_members_team_id_auth_teams"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["auth_users.id"], name=op.f("fk_auth_team_members_user_id_auth_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("team_id", "user_id", name=op.f("pk_auth_team_members")),
    )
    op.create_index("ix_auth_team_members_user_id", "auth_team_members", ["user_id"])
    op.create_table(
        "auth_team_invites",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("team_id", sa.String(32), nullable=False),
        sa.Column("email", sa.String(254), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("token", sa.String(64), nullable=False),
        sa.Column("invited_by", sa.String(32), nullable=True),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.Column("expires_at", trellis.db.UTCDateTime(), nullable=False),
        sa.Column("used", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["team_id"], ["auth_teams.id"], name=op.f("fk_auth_team_invites_team_id_auth_teams"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["invited_by"],
            ["auth_users.id"],
            name=op.f("fk_auth_team_invites_invited_by_auth_users"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_auth_team_invites")),
    )
    op.create_index("ix_auth_team_invites_token", "auth_team_invites", ["token"], unique=True)
    op.create_index("ix_auth_team_invites_team_id", "auth_team_invites", ["team_id"])
    op.create_index("ix_auth_team_invites_email", "auth_team_invites", ["email"])


def downgrade() -> None:
    op.drop_table("auth_team_invites")
    op.drop_table("auth_team_members")
    op.drop_table("auth_teams")
