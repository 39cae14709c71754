"""Teams, their members and the invitations to join them (README, "Teams").

A team may have a parent team; membership of a team also lets one view its sub-teams at any depth, and an
owner of a team manages its sub-teams (``teams.authority``). Rows of sub-teams, members and invites go
with their team by ``ON DELETE CASCADE``; the code still lists what it deletes, for the events and hooks.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, Index, String, text
from sqlalchemy.orm import Mapped, mapped_column

from trellis.db import Base, UTCDateTime, new_id, utcnow

ROLES = ("owner", "member")


class Team(Base):
    __tablename__ = "auth_teams"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(100))
    parent_id: Mapped[str | None] = mapped_column(
        String(32), ForeignKey("auth_teams.id", ondelete="CASCADE"), nullable=True
    )
    # The user who created it (no foreign key: set to None when that account is deleted). Root team names
    # are unique per creator, so a 409 never reveals that a stranger has a root team of that name.
    created_by: Mapped[str | None] = mapped_column(String(32), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    # A name is unique among the teams of one parent, and among the root teams of one creator. One index
    # over (parent_id, name) would not do it: NULLs are distinct in unique indexes on both databases (and
    # SQLite has no NULLS NOT DISTINCT), so the roots get an index of their own.
    __table_args__ = (
        Index(
            "ix_auth_teams_parent_id_name",
            "parent_id",
            "name",
            unique=True,
            postgresql_where=text("parent_id IS NOT NULL"),
            sqlite_where=text("parent_id IS NOT NULL"),
        ),
        Index(
            "ix_auth_teams_root_created_by_name",
            "created_by",
            "name",
            unique=True,
            postgresql_where=text("parent_id IS NULL"),
            sqlite_where=text("parent_id IS NULL"),
        ),
    )


class TeamMember(Base):
    """One row per (team, user): the user's direct role in that team."""

    __tablename__ = "auth_team_members"

    team_id: Mapped[str] = mapped_column(String(32), ForeignKey("auth_teams.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(32), ForeignKey("auth_users.id", ondelete="CASCADE"), primary_key=True)
    role: Mapped[str] = mapped_column(String(16))  # one of ROLES
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (Index("ix_auth_team_members_user_id", "user_id"),)


class TeamInvite(Base):
    """An invitation of an email address to a team with a role, valid for 7 days and once.

    The token is stored as it is, not hashed like the module's other tokens: the contract lets the invited
    user list their pending invites with the token (``GET /authentication/teams/invites``). That is safe
    because a token alone is not a credential: accepting needs the Bearer token of a user whose email is
    the invited one, so a leaked token lets nobody else in.
    """

    __tablename__ = "auth_team_invites"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    team_id: Mapped[str] = mapped_column(String(32), ForeignKey("auth_teams.id", ondelete="CASCADE"), index=True)
    email: Mapped[str] = mapped_column(String(254), index=True)  # normalised (trimmed, lower case)
    role: Mapped[str] = mapped_column(String(16))
    token: Mapped[str] = mapped_column(String(64))
    invited_by: Mapped[str | None] = mapped_column(
        String(32), ForeignKey("auth_users.id", ondelete="SET NULL"), nullable=True
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    used: Mapped[bool] = mapped_column(Boolean, default=False)

    __table_args__ = (Index("ix_auth_team_invites_token", "token", unique=True),)
