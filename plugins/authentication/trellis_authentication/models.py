"""Users, their sign-in sessions, the refresh tokens a session has rotated away, and single-use tokens."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from trellis.db import Base, JSONType, UTCDateTime, new_id, utcnow


class User(Base):
    __tablename__ = "auth_users"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    # Stored normalised (trimmed, lower case), so a plain unique index makes it case-insensitive.
    # None for a user who signed in by phone only (unique indexes allow many NULLs on both databases).
    email: Mapped[str | None] = mapped_column(String(254), nullable=True)
    password_hash: Mapped[str | None] = mapped_column(String(255), nullable=True)  # None: no password set
    is_active: Mapped[bool] = mapped_column(Boolean, default=True)
    is_verified: Mapped[bool] = mapped_column(Boolean, default=False)
    phone_number: Mapped[str | None] = mapped_column(String(20), nullable=True)  # E.164
    two_fa_enabled: Mapped[bool] = mapped_column(Boolean, default=False)
    # "authenticator" (TOTP secret below) or "phone" (codes by SMS to phone_number); set by twoFa/enable,
    # in force once twoFa/verify confirms it (two_fa_enabled).
    two_fa_method: Mapped[str | None] = mapped_column(String(16), nullable=True)
    two_fa_secret: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # Names of linked sign-in providers (OAuth/OIDC); the code that links an identity keeps it current.
    providers: Mapped[list[str]] = mapped_column(JSONType, default=list)
    # Values of fields an administrator added to the User schema (Database module extensions).
    extra: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)

    __table_args__ = (
        Index("ix_auth_users_email", "email", unique=True),
        Index("ix_auth_users_phone_number", "phone_number", unique=True),
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
    # Where the session was last used from (sign-in, then each renew): what its owner sees in the list of
    # sessions (``GET /authentication/sessions``) to tell them apart.
    ip: Mapped[str | None] = mapped_column(String(45), nullable=True)
    user_agent: Mapped[str | None] = mapped_column(String(512), nullable=True)

    __table_args__ = (Index("ix_auth_sessions_refresh_hash", "refresh_hash", unique=True),)


class RotatedToken(Base):
    """A refresh token that was exchanged on renew. Seeing it again means it leaked: revoke its session."""

    __tablename__ = "auth_rotated_tokens"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    session_id: Mapped[str] = mapped_column(String(32), ForeignKey("auth_sessions.id", ondelete="CASCADE"), index=True)
    rotated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class AuthToken(Base):
    """A single-use secret of any kind (email verification, password reset, magic link, SMS code …).

    Only the sha256 of the token is stored. ``consume_token`` marks it used with a conditional UPDATE
    (``… WHERE consumed_at IS NULL``), so of two concurrent uses exactly one succeeds. A code sent by SMS
    is kept as ``code_hash`` beside the token that identifies it, with a count of wrong tries.
    """

    __tablename__ = "auth_tokens"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    kind: Mapped[str] = mapped_column(String(32))
    token_hash: Mapped[str] = mapped_column(String(64))
    # None for a phone sign-in whose user does not exist yet.
    user_id: Mapped[str | None] = mapped_column(
        String(32), ForeignKey("auth_users.id", ondelete="CASCADE"), nullable=True, index=True
    )
    # What the token is about: the new email of a change, the phone number of a sign-in …
    data: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    code_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    tries: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)  # None: until used
    consumed_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)

    __table_args__ = (Index("ix_auth_tokens_token_hash", "token_hash", unique=True),)


class Identity(Base):
    """A sign-in provider's account linked to a user: ``subject`` is the provider's stable user id (the
    ID token's ``sub``, GitHub's numeric id). A user may link several providers; one provider account
    belongs to one user."""

    __tablename__ = "auth_identities"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    provider: Mapped[str] = mapped_column(String(32))
    subject: Mapped[str] = mapped_column(String(255))
    user_id: Mapped[str] = mapped_column(String(32), ForeignKey("auth_users.id", ondelete="CASCADE"), index=True)
    email: Mapped[str | None] = mapped_column(String(254), nullable=True)  # as the provider last reported it
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (Index("ix_auth_identities_provider_subject", "provider", "subject", unique=True),)
