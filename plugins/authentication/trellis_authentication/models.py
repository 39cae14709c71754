"""Users, their sign-in sessions, and the refresh tokens a session has rotated away."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from trellis.db import Base, JSONType, UTCDateTime, new_id, utcnow


class User(Base):
    __tablename__ = "auth_users"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    # Stored normalised (trimmed, lower case), so a plain unique index makes it case-insensitive.
    email: Mapped[str] = mapped_column(String(254))
    password_hash: Mapped[str] = mapped_column(String(255))
    is_active: Mapped[bool] = mapped_column(Boolean, default=True)
    is_verified: Mapped[bool] = mapped_column(Boolean, default=False)
    # Values of fields an administrator added to the User schema (Database module extensions).
    extra: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)

    __table_args__ = (
        Index("ix_auth_users_email", "email", unique=True),
        Index("ix_auth_users_created_at", "created_at"),
    )


class Session(Base):
    """One sign-in: access tokens carry its id (``sid``); its current refresh token is stored hashed."""

    __tablename__ = "auth_sessions"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(String(32), ForeignKey("auth_users.id", ondelete="CASCADE"), index=True)
    # sha256 hex of the current refresh token; the token itself is never stored.
    refresh_hash: Mapped[str] = mapped_column(String(64))
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    renewed_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (Index("ix_auth_sessions_refresh_hash", "refresh_hash", unique=True),)


class RotatedToken(Base):
    """A refresh token that was exchanged on renew. Seeing it again means it leaked: revoke its session."""

    __tablename__ = "auth_rotated_tokens"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    session_id: Mapped[str] = mapped_column(String(32), ForeignKey("auth_sessions.id", ondelete="CASCADE"), index=True)
    rotated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
