"""authentication: account lifecycle (phone, two-factor, providers, single-use tokens)

Revision ID: authentication_0002
Revises: authentication_0001
Create Date: 2026-11-23
"""
import sqlalchemy as sa
from alembic import op

import trellis.db

revision = "authentication_0002"
down_revision = "authentication_0001"
branch_labels = None
depends_on = None

# Children of auth_users: SQLite's batch mode rebuilds auth_users, and dropping the old table with
# foreign keys on deletes their rows (ON DELETE CASCADE). They are kept aside and put back.
_CHILDREN = ("auth_sessions", "auth_rotated_tokens")


def _rebuild_users(change) -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    if sqlite:
        for table in _CHILDREN:
            op.execute(f"CREATE TEMP TABLE keep_{table} AS SELECT * FROM {table}")
    with op.batch_alter_table("auth_users") as batch:
        change(batch)
    if sqlite:
        for table in _CHILDREN:  # parents first: rotated tokens refer to sessions
            op.execute(f"INSERT OR IGNORE INTO {table} SELECT * FROM keep_{table}")
            op.execute(f"DROP TABLE keep_{table}")


def upgrade() -> None:
    def change(batch) -> None:
        batch.alter_column("email", existing_type=sa.String(254), nullable=True)
        batch.alter_column("password_hash", existing_type=sa.String(255), nullable=True)
        batch.add_column(sa.Column("phone_number", sa.String(20), nullable=True))
        # Server defaults fill the existing rows; the models set both columns on every insert.
        batch.add_column(sa.Column("two_fa_enabled", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("two_fa_method", sa.String(16), nullable=True))
        batch.add_column(sa.Column("two_fa_secret", sa.String(64), nullable=True))
        batch.add_column(sa.Column("providers", trellis.db.JSONType, nullable=False, server_default="[]"))
        batch.create_index("ix_auth_users_phone_number", ["phone_number"], unique=True)

    _rebuild_users(change)
    op.create_table(
        "auth_tokens",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("user_id", sa.String(32), nullable=True),
        sa.Column("data", trellis.db.JSONType, nullable=False),
        sa.Column("code_hash", sa.String(64), nullable=True),
        sa.Column("tries", sa.Integer(), nullable=False),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.Column("expires_at", trellis.db.UTCDateTime(), nullable=True),
        sa.Column("consumed_at", trellis.db.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["auth_users.id"], name=op.f("fk_auth_tokens_user_id_auth_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_auth_tokens")),
    )
    op.create_index("ix_auth_tokens_token_hash", "auth_tokens", ["token_hash"], unique=True)
    op.create_index("ix_auth_tokens_user_id", "auth_tokens", ["user_id"])


def downgrade() -> None:
    op.drop_table("auth_tokens")
    # Users without an email or a password (phone sign-in) cannot exist in the old schema.
    op.execute("DELETE FROM auth_users WHERE email IS NULL OR password_hash IS NULL")

    def change(batch) -> None:
        batch.drop_index("ix_auth_users_phone_number")
        for column in ("providers", "two_fa_secret", "two_fa_method", "two_fa_enabled", "phone_number"):
            batch.drop_column(column)
        batch.alter_column("password_hash", existing_type=sa.String(255), nullable=False)
        batch.alter_column("email", existing_type=sa.String(254), nullable=False)

    _rebuild_users(change)
