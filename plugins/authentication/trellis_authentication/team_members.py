"""A team's members and their roles: listing them, changing roles, removing (or leaving), and adding a user
without an invite; the last owner always stays."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, delete, func, select, update

from trellis import db
from trellis.errors import bad_request, conflict, forbidden, not_found

from .models import User
from .team_config import settings
from .team_memory import record, record_join
from .team_models import TeamMember
from .team_tree import managed, serialise_writes, viewable


def members(team_id: str, user_id: str, skip: int, limit: int) -> tuple[list[dict[str, Any]], int]:
    """``[{_id, email, role}]`` of the team's direct members, owners first."""
    viewable(team_id, user_id)
    query: Select = (
        select(User.id, User.email, TeamMember.role)
        .join(TeamMember, TeamMember.user_id == User.id)
        .where(TeamMember.team_id == team_id)
    )
    total = db.session.execute(select(func.count()).select_from(query.subquery())).scalar_one()
    rows = db.session.execute(query.order_by(TeamMember.role.desc(), User.email, User.id).offset(skip).limit(limit))
    return [{"_id": row.id, "email": row.email, "role": row.role} for row in rows], total


def direct_roles(team_id: str, user_ids: list[str] | None = None) -> dict[str, str]:
    query = select(TeamMember.user_id, TeamMember.role).where(TeamMember.team_id == team_id)
    if user_ids is not None:
        query = query.where(TeamMember.user_id.in_(user_ids))
    return {user: role for user, role in db.session.execute(query)}


def _keep_an_owner(team_id: str, losing: set[str]) -> None:
    """409 when the users in ``losing`` are all the team's owners."""
    owners = {user for user, role in direct_roles(team_id).items() if role == "owner"}
    if owners and owners <= losing:
        raise conflict("The last owner cannot leave the team or step down; make someone else owner first")


def _not_members(user_ids: list[str], roles: dict[str, str]) -> None:
    missing = [user for user in user_ids if user not in roles]
    if missing:
        raise bad_request("Not members of this team: " + ", ".join(missing), {"members": ["Not members."]})


def set_roles(team_id: str, user_id: str, user_ids: list[str], role: str) -> list[dict[str, Any]]:
    """Give each of the team's members ``role`` (owners only; the last owner cannot step down)."""
    serialise_writes()
    managed(team_id, user_id)
    roles = direct_roles(team_id, user_ids)
    _not_members(user_ids, roles)
    changed = [user for user in dict.fromkeys(user_ids) if roles[user] != role]
    if role == "member":
        _keep_an_owner(team_id, set(changed))
    if changed:
        db.session.execute(
            update(TeamMember).where(TeamMember.team_id == team_id, TeamMember.user_id.in_(changed)).values(role=role)
        )
    for user in changed:
        record_join(team_id, user, role, previous=roles[user])
    db.session.commit()
    return members_by_id(team_id, list(dict.fromkeys(user_ids)))


def members_by_id(team_id: str, user_ids: list[str]) -> list[dict[str, Any]]:
    rows = db.session.execute(
        select(User.id, User.email, TeamMember.role)
        .join(TeamMember, TeamMember.user_id == User.id)
        .where(TeamMember.team_id == team_id, TeamMember.user_id.in_(user_ids))
        .order_by(User.email, User.id)
    )
    return [{"_id": row.id, "email": row.email, "role": row.role} for row in rows]


def remove_members(team_id: str, user_id: str, user_ids: list[str]) -> list[str]:
    """Remove members (owners), or leave (anyone may remove only themselves); the last owner stays."""
    serialise_writes()
    user_ids = list(dict.fromkeys(user_ids))
    if user_ids == [user_id]:
        viewable(team_id, user_id)
    else:
        managed(team_id, user_id)
    roles = direct_roles(team_id, user_ids)
    _not_members(user_ids, roles)
    _keep_an_owner(team_id, set(user_ids))
    db.session.execute(delete(TeamMember).where(TeamMember.team_id == team_id, TeamMember.user_id.in_(user_ids)))
    for user in user_ids:
        record("authentication.team.leave", {"teamId": team_id, "userId": user})
    db.session.commit()
    return user_ids


def add_member(team_id: str, user_id: str, new_user_id: str, role: str) -> dict[str, Any]:
    """Add a user without an invite (``teams.allowAddWithoutInvite``, owners)."""
    if not settings()["allowAddWithoutInvite"]:
        raise forbidden("Adding members without an invite is not enabled (config teams.allowAddWithoutInvite)")
    serialise_writes()
    managed(team_id, user_id)
    user = db.session.get(User, new_user_id)
    if user is None:
        raise not_found("No user with this id")
    if direct_roles(team_id, [new_user_id]):
        raise conflict("This user is already a member of the team", {"userId": ["Already a member."]})
    db.session.add(TeamMember(team_id=team_id, user_id=new_user_id, role=role, created_at=db.utcnow()))
    record_join(team_id, new_user_id, role)
    db.session.commit()
    return {"_id": user.id, "email": user.email, "role": role}
