"""chat rooms, participants, messages

Revision ID: chat_0001
Revises:
Create Date: 2026-11-21
"""
import sqlalchemy as sa
from alembic import op

from trellis.db import UTCDateTime

revision = "chat_0001"
down_revision = None
branch_labels = ("chat",)
depends_on = "core_0001"


def upgrade() -> None:
    op.create_table(
        "chat_rooms",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("creator_id", sa.String(32), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_chat_rooms")),
    )
    op.create_index(op.f("ix_chat_rooms_created_at"), "chat_rooms", ["created_at"])
    op.create_table(
        "chat_participants",
        sa.Column("room_id", sa.String(32), nullable=False),
        sa.Column("user_id", sa.String(32), nullable=False),
        sa.Column("joined_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["room_id"], ["chat_rooms.id"], name=op.f("fk_chat_participants_room_id_chat_rooms"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("room_id", "user_id", name=op.f("pk_chat_participants")),
    )
    op.create_index(op.f("ix_chat_participants_user_id"), "chat_participants", ["user_id"])
    op.create_table(
        "chat_messages",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("room_id", sa.String(32), nullable=False),
        sa.Column("sender_id", sa.String(32), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["room_id"], ["chat_rooms.id"], name=op.f("fk_chat_messages_room_id_chat_rooms"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_chat_messages")),
    )
    op.create_index("ix_chat_messages_room_created", "chat_messages", ["room_id", "created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_chat_messages_room_created", table_name="chat_messages")
    op.drop_table("chat_messages")
    op.drop_index(op.f("ix_chat_participants_user_id"), table_name="chat_participants")
    op.drop_table("chat_participants")
    op.drop_index(op.f("ix_chat_rooms_created_at"), table_name="chat_rooms")
    op.drop_table("chat_rooms")
