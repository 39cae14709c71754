"""The tree of teams: walking it (ancestors, sub-teams), the caller's authority over a team, the names a team
may take, deleting a subtree, and the one lock every team write holds (see ``teams.py``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func, literal, select, text
from sqlalchemy.exc import IntegrityError

from trellis import db
from trellis.errors import APIError, bad_request, conflict, forbidden, not_found
from trellis.hooks import call as hooks

from .team_memory import record
from .team_models import Team, TeamInvite, TeamMember

# Deeper nesting is refused (400): every authority check walks the ancestors, so the walk stays short.
MAX_DEPTH = 10
_LOCK = 0x7465616D73  # "teams": the advisory lock serialising team writes (PostgreSQL)
_TAKE_SQLITE_WRITE_LOCK = text("DELETE FROM auth_teams WHERE 0")

NO_TEAM = "No team with this id"


def team_dict(team: Team) -> dict[str, Any]:
    return {
        "_id": team.id,
        "name": team.name,
        "parentTeam": team.parent_id,
        "createdAt": db.isoformat(team.created_at),
        "updatedAt": db.isoformat(team.updated_at),
    }


def _ancestors(team_id: Any, name: str = "up") -> Any:
    """A recursive CTE of ``team_id`` and all its ancestors: ``(id, parent_id, level)``, level 0 the team.
    ``UNION`` (not ``ALL``) ends the walk even over a loop, which the writes below never make."""
    start = select(Team.id, Team.parent_id, literal(0).label("level")).where(Team.id == team_id)
    up = start.cte(name, recursive=True)
    step = select(Team.id, Team.parent_id, (up.c.level + 1).label("level")).join(up, Team.id == up.c.parent_id)
    return up.union(step)


def _descendants(team_id: str) -> Any:
    """A recursive CTE of ``team_id`` and all its sub-teams at any depth: ``(id, level)``."""
    start = select(Team.id, literal(0).label("level")).where(Team.id == team_id)
    down = start.cte("down", recursive=True)
    step = select(Team.id, (down.c.level + 1).label("level")).join(down, Team.parent_id == down.c.id)
    return down.union(step)


def role_in(team_id: str, user_id: str) -> str | None:
    """The user's authority over the team: ``owner`` when owner of it or of an ancestor, else ``member``
    when a member of either, else None (also for a team that does not exist). One query."""
    up = _ancestors(team_id)
    roles = db.session.execute(
        select(TeamMember.role).join(up, TeamMember.team_id == up.c.id).where(TeamMember.user_id == user_id)
    ).scalars()
    found = set(roles)
    return "owner" if "owner" in found else "member" if found else None


def viewable(team_id: str, user_id: str) -> tuple[Team, str]:
    """The team and the caller's authority over it; a team the caller may not view is the 404 of a
    missing one."""
    role = role_in(team_id, user_id)
    team = db.session.get(Team, team_id) if role else None
    if team is None or role is None:
        raise not_found(NO_TEAM)
    return team, role


def managed(team_id: str, user_id: str) -> Team:
    """The team when the caller owns it or an ancestor (403 for a member, 404 for anyone else)."""
    team, role = viewable(team_id, user_id)
    if role != "owner":
        raise forbidden("Only an owner of this team or of a team above it may do this")
    return team


def ancestor_ids(team_id: str) -> list[str]:
    """``team_id`` and its ancestors, nearest first."""
    up = _ancestors(team_id)
    return list(db.session.execute(select(up.c.id).order_by(up.c.level)).scalars())


def subtree_ids(team_id: str) -> list[str]:
    """``team_id`` and all its sub-teams, shallowest first."""
    down = _descendants(team_id)
    return list(db.session.execute(select(down.c.id).order_by(down.c.level, down.c.id)).scalars())


def subtree_height(team_id: str) -> int:
    """Levels in the subtree of ``team_id`` (1: no sub-teams)."""
    down = _descendants(team_id)
    return int(db.session.execute(select(func.max(down.c.level))).scalar_one() or 0) + 1


def members_of(team_ids: list[str]) -> list[str]:
    """Direct members of any of the teams, each once, sorted."""
    if not team_ids:
        return []
    query = select(TeamMember.user_id).where(TeamMember.team_id.in_(team_ids)).distinct()
    return sorted(db.session.execute(query).scalars())


def serialise_writes() -> None:
    """Take the lock every team write holds until its commit (see ``teams.py``'s docstring)."""
    if db.is_postgresql():
        db.session.execute(select(func.pg_advisory_xact_lock(_LOCK)))
    else:
        db.session.execute(_TAKE_SQLITE_WRITE_LOCK)


def name_taken(name: str, parent_id: str | None, creator: str | None, own_id: str | None = None) -> bool:
    """Whether another team has ``name`` under ``parent_id``, or, for a root team, among the root teams of
    ``creator`` (root names are unique per creator; a root team whose creator's account is gone has no
    namespace, as NULLs are distinct in the unique index)."""
    query = select(Team.id).where(Team.name == name)
    if parent_id is None:
        if creator is None:
            return False
        query = query.where(Team.parent_id.is_(None), Team.created_by == creator)
    else:
        query = query.where(Team.parent_id == parent_id)
    if own_id is not None:
        query = query.where(Team.id != own_id)
    return db.session.execute(query).first() is not None


def name_conflict() -> Exception:
    return conflict(
        "A team of this name already exists under this parent (or among your root teams)", {"name": ["Already taken."]}
    )


def commit_unique() -> None:
    """Commit; a name taken by a concurrent write (the unique indexes) is a 409, nothing written."""
    try:
        db.session.commit()
    except IntegrityError:
        db.session.rollback()
        raise name_conflict() from None


def parent_for(parent_id: str, user_id: str, levels: int) -> None:
    """The caller may hang ``levels`` levels of teams under ``parent_id``: it must own the parent (404 as
    for a missing team when it may not even view it, 403 for a member), and the tree may not grow deeper
    than :data:`MAX_DEPTH` (400)."""
    role = role_in(parent_id, user_id)
    if role is None:
        raise APIError(404, NO_TEAM + " (parentTeam)", {"parentTeam": [NO_TEAM + "."]})
    if role != "owner":
        raise APIError(
            403, "Only an owner of the parent team may put teams under it", {"parentTeam": ["Not an owner."]}
        )
    if len(ancestor_ids(parent_id)) + levels > MAX_DEPTH:
        raise bad_request(
            f"Teams nest at most {MAX_DEPTH} levels deep", {"parentTeam": [f"At most {MAX_DEPTH} levels."]}
        )


def delete_subtree(team_id: str) -> list[str]:
    """Delete the team with its sub-teams, members and invites, in the current transaction."""
    team_ids = subtree_ids(team_id)
    hooks().trellis_team_deleted(team_ids=team_ids)  # first: a module that refuses leaves nothing written
    members = members_of(team_ids)
    # Explicit rows first: the result does not depend on the database cascading a self-reference.
    db.session.execute(delete(TeamInvite).where(TeamInvite.team_id.in_(team_ids)))
    db.session.execute(delete(TeamMember).where(TeamMember.team_id.in_(team_ids)))
    db.session.execute(delete(Team).where(Team.id.in_(team_ids)))
    record("authentication.team.delete", {"teamIds": team_ids, "userIds": members})  # their teams after it
    return team_ids
