"""Rooms, their participants, and messages.

Participants are rows (not a JSON list) so "the rooms of a user" is an indexed lookup on both
databases. Users live in the Authentication module; ids are kept without a foreign key so each
module migrates on its own, and the ``trellis_user_deleted`` hook keeps them consistent.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from trellis.db import Base, UTCDateTime, new_id, utcnow


class Room(Base):
    __tablename__ = "chat_rooms"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(200))
    creator_id: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)


class Participant(Base):
    __tablename__ = "chat_participants"

    room_id: Mapped[str] = mapped_column(String(32), ForeignKey("chat_rooms.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(32), primary_key=True, index=True)
    joined_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Message(Base):
    __tablename__ = "chat_messages"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    room_id: Mapped[str] = mapped_column(String(32), ForeignKey("chat_rooms.id", ondelete="CASCADE"))
    sender_id: Mapped[str] = mapped_column(String(32))
    message: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    # "Messages of a room, newest first": a backward scan of this index, id breaking ties.
    __table_args__ = (Index("ix_chat_messages_room_created", "room_id", "created_at", "id"),)
