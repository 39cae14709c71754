"""The administrators' read-only view of teams: every team (paged, searched by name), and one team with
its members and sub-teams. Administrators are not team members, so the user routes' authority rules do
not apply here; nothing is changed, so nothing is locked or recorded."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from trellis import db
from trellis.errors import not_found
from trellis.http import paginate

from .models import User
from .team_models import Team, TeamMember
from .teams import NO_TEAM, team_dict


def _member_counts(team_ids: list[str]) -> dict[str, int]:
    if not team_ids:
        return {}
    query = (
        select(TeamMember.team_id, func.count()).where(TeamMember.team_id.in_(team_ids)).group_by(TeamMember.team_id)
    )
    return {team_id: count for team_id, count in db.session.execute(query)}


def _with_counts(teams: list[Team]) -> list[dict[str, Any]]:
    counts = _member_counts([team.id for team in teams])
    return [{**team_dict(team), "memberCount": counts.get(team.id, 0)} for team in teams]


def all_teams(skip: int, limit: int, search: str | None) -> tuple[list[dict[str, Any]], int]:
    """Every team, by name, each with its number of direct members; ``search``: part of the name."""
    query = select(Team)
    if search:
        query = query.where(func.lower(Team.name).contains(search.strip().lower(), autoescape=True))
    found, count = paginate(query, skip, limit, order_by=(Team.name, Team.id))
    return _with_counts(found), count


def one_team(team_id: str) -> dict[str, Any]:
    """The team with its direct members (owners first, ``joinedAt``) and its direct sub-teams; 404."""
    team = db.session.get(Team, team_id)
    if team is None:
        raise not_found(NO_TEAM)
    rows = db.session.execute(
        select(User.id, User.email, TeamMember.role, TeamMember.created_at)
        .join(TeamMember, TeamMember.user_id == User.id)
        .where(TeamMember.team_id == team_id)
        .order_by(TeamMember.role.desc(), TeamMember.created_at, User.id)
    )
    members = [
        {"_id": row.id, "email": row.email, "role": row.role, "joinedAt": db.isoformat(row.created_at)} for row in rows
    ]
    subs = db.session.execute(select(Team).where(Team.parent_id == team_id).order_by(Team.name, Team.id)).scalars()
    return {**team_dict(team), "members": members, "teams": _with_counts(list(subs))}
