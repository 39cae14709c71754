"""authentication: root team names are unique per creator, not across the whole server

A global namespace of root names let anyone learn, from a 409, that a stranger had a root team of a given
name. Teams now record who created them (``created_by``, no foreign key: cleared when that account is
deleted); the unique index of root names covers ``(created_by, name)``. Existing teams get their
longest-standing owner as creator (root names were unique before, so no two collide).

Revision ID: authentication_0006
Revises: authentication_0005
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "authentication_0006"
down_revision = "authentication_0005"
branch_labels = None
depends_on = None

ROOTS = sa.text("parent_id IS NULL")


def upgrade() -> None:
    with op.batch_alter_table("auth_teams") as batch:
        batch.add_column(sa.Column("created_by", sa.String(32), nullable=True))
    op.execute(
        "UPDATE auth_teams SET created_by = ("
        " SELECT m.user_id FROM auth_team_members m"
        " WHERE m.team_id = auth_teams.id AND m.role = 'owner'"
        " ORDER BY m.created_at, m.user_id LIMIT 1)"
    )
    op.drop_index("ix_auth_teams_root_name", table_name="auth_teams")
    op.create_index(
        "ix_auth_teams_root_created_by_name",
        "auth_teams",
        ["created_by", "name"],
        unique=True,
        postgresql_where=ROOTS,
        sqlite_where=ROOTS,
    )


def downgrade() -> None:
    # Fails (unique violation) when two creators have root teams of the same name: rename one first.
    op.drop_index("ix_auth_teams_root_created_by_name", table_name="auth_teams")
    op.create_index(
        "ix_auth_teams_root_name", "auth_teams", ["name"], unique=True, postgresql_where=ROOTS, sqlite_where=ROOTS
    )
    # A plain DROP COLUMN (SQLite 3.35+): a batch rebuild would drop auth_teams, and with it, by ON DELETE
    # CASCADE, every member and invite.
    op.execute("ALTER TABLE auth_teams DROP COLUMN created_by")
