"""functions: the function log, the after-trigger queue, the schedules' last runs

Revision ID: functions_0001
Revises:
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

import trellis.db

revision = "functions_0001"
down_revision = None
branch_labels = ("functions",)
depends_on = "core_0001"


def upgrade() -> None:
    op.create_table(
        "functions_log",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("function", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("status", sa.String(10), nullable=False),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=True),
        sa.Column("request_id", sa.String(64), nullable=True),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_functions_log")),
    )
    op.create_index("ix_functions_log_created", "functions_log", ["created_at"])
    op.create_index("ix_functions_log_function", "functions_log", ["function"])
    op.create_table(
        "functions_jobs",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("trigger", sa.String(500), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("actor", sa.String(10), nullable=False),
        sa.Column("user_id", sa.String(32), nullable=True),
        sa.Column("status", sa.String(10), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", trellis.db.UTCDateTime(), nullable=True),
        sa.Column("claim", sa.String(32), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_functions_jobs")),
    )
    op.create_index("ix_functions_jobs_due", "functions_jobs", ["status", "next_attempt_at"])
    op.create_table(
        "functions_schedules",
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("last_due_at", trellis.db.UTCDateTime(), nullable=False),
        sa.Column("last_run_at", trellis.db.UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_functions_schedules")),
    )


def downgrade() -> None:
    op.drop_table("functions_schedules")
    op.drop_index("ix_functions_jobs_due", table_name="functions_jobs")
    op.drop_table("functions_jobs")
    op.drop_index("ix_functions_log_function", table_name="functions_log")
    op.drop_index("ix_functions_log_created", table_name="functions_log")
    op.drop_table("functions_log")
