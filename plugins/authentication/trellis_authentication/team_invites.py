"""Invitations to a team by mail: inviting (the mail queued in the same transaction), withdrawing, the
pending invites of an address, and accepting one."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from sqlalchemy import delete, select, update

from trellis import db
from trellis.errors import conflict, forbidden, not_found

from . import delivery
from .models import User
from .team_config import require_invites
from .team_members import direct_roles
from .team_memory import record_join
from .team_models import Team, TeamInvite, TeamMember
from .team_tree import managed, serialise_writes
from .users import normalise_email

INVITE_LIFETIME = timedelta(days=7)
INVITE_TOKEN_BYTES = 32  # 256 random bits, urlsafe base64
ACCEPT_PATH = "/authentication/teams/invite/accept"


def invite(team_id: str, user_id: str, email: str, role: str) -> str:
    """Invite ``email`` with ``role`` (owners) and queue the ``TeamInvite`` mail in the same transaction.
    A new invite of the same address to the same team replaces the pending one (its token stops working).
    Returns the invitation token."""
    require_invites()
    delivery.require_module("email")
    email = normalise_email(email)
    # the write lock before the first read: on SQLite a transaction that has read cannot wait for the lock
    # another writer holds, it fails at once ("database is locked")
    serialise_writes()
    team = managed(team_id, user_id)
    delivery.limit_sends(email)
    already = select(TeamMember.user_id).join(User, User.id == TeamMember.user_id)
    if db.session.execute(already.where(TeamMember.team_id == team_id, User.email == email)).first():
        raise conflict("A user with this email is already a member of the team", {"email": ["Already a member."]})
    link_base = delivery.host_url()  # before writing: an untrusted Host is a 400 with nothing written
    _delete_pending(team_id, email)
    token = secrets.token_urlsafe(INVITE_TOKEN_BYTES)
    now = db.utcnow()
    db.session.add(
        TeamInvite(
            id=db.new_id(),
            team_id=team_id,
            email=email,
            role=role,
            token=token,
            invited_by=user_id,
            created_at=now,
            expires_at=now + INVITE_LIFETIME,
            used=False,
        )
    )
    delivery.queue_mail(
        email, "TeamInvite", f"{link_base}{ACCEPT_PATH}?invitationToken={token}", teamName=team.name, role=role
    )
    db.session.commit()
    return token


def _delete_pending(team_id: str, email: str) -> int:
    """Delete the unused invites of ``email`` to the team (expired ones too); how many there were."""
    where = (TeamInvite.team_id == team_id, TeamInvite.email == email, TeamInvite.used.is_(False))
    return db.rowcount(db.session.execute(delete(TeamInvite).where(*where)))


def revoke_invites(team_id: str, user_id: str, email: str) -> None:
    """Withdraw the pending invites of ``email`` (owners); 404 when there is none."""
    require_invites()
    managed(team_id, user_id)
    if not _delete_pending(team_id, normalise_email(email)):
        raise not_found("No pending invite for this email")
    db.session.commit()


def invites_of(email: str | None, verified: bool) -> list[dict[str, Any]]:
    """The pending invites of the signed-in user's address, newest first. The tokens only for a verified
    address: whoever registered an address, or changed theirs to it, without proving it must not learn
    them (the token mailed to the address is the proof; opening the mailed link still accepts)."""
    require_invites()
    if email is None:
        return []
    rows = db.session.execute(
        select(TeamInvite.team_id, TeamInvite.token, TeamInvite.role, TeamInvite.expires_at, Team.name)
        .join(Team, Team.id == TeamInvite.team_id)
        .where(TeamInvite.email == email, TeamInvite.used.is_(False), TeamInvite.expires_at > db.utcnow())
        .order_by(TeamInvite.created_at.desc(), TeamInvite.id)
    )
    return [
        {
            "teamId": row.team_id,
            "teamName": row.name,
            "invitationToken": row.token if verified else None,
            "role": row.role,
            "expiresAt": db.isoformat(row.expires_at),
        }
        for row in rows
    ]


def accept(token: str, user_id: str, email: str | None) -> tuple[Team, str]:
    """Join the invite's team with its role: 404 for an unknown, used or expired token, 403 when the invite
    is for another address. A member already there keeps the higher of the two roles."""
    require_invites()
    serialise_writes()
    found = db.session.execute(
        select(TeamInvite).where(
            TeamInvite.token == token, TeamInvite.used.is_(False), TeamInvite.expires_at > db.utcnow()
        )
    ).scalar_one_or_none()
    if found is None:
        raise not_found("Unknown, used or expired invitation")
    if email is None or found.email != email:
        raise forbidden("This invitation is for another email address")
    # Used exactly once: the conditional UPDATE of a concurrent acceptance finds no row.
    used = db.rowcount(
        db.session.execute(
            update(TeamInvite).where(TeamInvite.id == found.id, TeamInvite.used.is_(False)).values(used=True)
        )
    )
    if not used:
        raise not_found("Unknown, used or expired invitation")
    current = direct_roles(found.team_id, [user_id]).get(user_id)
    role = "owner" if "owner" in (current, found.role) else "member"
    if current is None:
        db.session.add(TeamMember(team_id=found.team_id, user_id=user_id, role=role, created_at=db.utcnow()))
        record_join(found.team_id, user_id, role)
    elif current != role:
        db.session.execute(
            update(TeamMember)
            .where(TeamMember.team_id == found.team_id, TeamMember.user_id == user_id)
            .values(role=role)
        )
        record_join(found.team_id, user_id, role, previous=current)
    team = db.session.get_one(Team, found.team_id)
    db.session.commit()
    return team, role
