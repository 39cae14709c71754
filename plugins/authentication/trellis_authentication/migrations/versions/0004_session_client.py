"""authentication: a session remembers the client address and user agent it was last used from

Revision ID: authentication_0004
Revises: authentication_0003
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "authentication_0004"
down_revision = "authentication_0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("auth_sessions") as batch:
        batch.add_column(sa.Column("ip", sa.String(45), nullable=True))
        batch.add_column(sa.Column("user_agent", sa.String(512), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("auth_sessions") as batch:
        batch.drop_column("user_agent")
        batch.drop_column("ip")
