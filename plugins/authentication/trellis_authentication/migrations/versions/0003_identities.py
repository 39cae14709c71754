"""authentication: identities linked from sign-in providers (OAuth 2.0 / OpenID Connect)

Revision ID: authentication_0003
Revises: authentication_0002
Create Date: 2026-11-23
"""
import sqlalchemy as sa
from alembic import op

import trellis.db

revision = "authentication_0003"
down_revision = "authentication_0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "auth_identities",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("provider", sa.String(32), nullable=False),
        sa.Column("subject", sa.String(255), nullable=False),
        sa.Column("user_id", sa.String(32), nullable=False),
        sa.Column("email", sa.String(254), nullable=True),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["auth_users.id"], name=op.f("fk_auth_identities_user_id_auth_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_auth_identities")),
    )
    op.create_index("ix_auth_identities_provider_subject", "auth_identities", ["provider", "subject"], unique=True)
    op.create_index("ix_auth_identities_user_id", "auth_identities", ["user_id"])


def downgrade() -> None:
    op.drop_table("auth_identities")
