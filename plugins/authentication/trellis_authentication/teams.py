"""Teams: creating, moving and deleting them, members and roles, invitations by mail (CONTRACT.md, "Teams").

Authority follows the tree. A member of a team or of any of its ancestors may view it (get, members,
sub-teams); an owner of the team or of any ancestor manages it (rename, move, delete, members, invites,
sub-teams). A team the caller may not view answers the 404 of a missing team, so ids of other people's
teams are not confirmed. Nobody grants a role above their own: members grant nothing, owners may grant
``owner`` or ``member``.

Every change and its events (``authentication.team.*``) commit in one transaction. Writes that check
the tree before changing it (a move must not make a cycle, the last owner must stay) are serialised:
on PostgreSQL by a transaction-level advisory lock, on SQLite by taking the write lock first. Team
changes are rare next to reads, so one lock for all of them costs nothing that shows, and two moves at
once can never join two trees into a loop that neither saw.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from sqlalchemy import Select, bindparam, delete, func, literal, select, text, update
from sqlalchemy.exc import IntegrityError

from trellis import EventTopic, db, events, reads, statements
from trellis.cache import Remembered
from trellis.errors import APIError, bad_request, conflict, forbidden, not_found
from trellis.hooks import call as hooks
from trellis.http import paginate

from . import delivery
from .models import User
from .team_models import Team, TeamInvite, TeamMember
from .users import config, normalise_email

# Deeper nesting is refused (400): every authority check walks the ancestors, so the walk stays short.
MAX_DEPTH = 10
INVITE_LIFETIME = timedelta(days=7)
INVITE_TOKEN_BYTES = 32  # 256 random bits, urlsafe base64
ACCEPT_PATH = "/authentication/teams/invite/accept"
_LOCK = 0x7465616D73  # "teams": the advisory lock serialising team writes (PostgreSQL)
_TAKE_SQLITE_WRITE_LOCK = text("DELETE FROM auth_teams WHERE 0")

NO_TEAM = "No team with this id"

TEAM_EVENTS = (
    EventTopic("authentication.team.create", "A team was created: {team}"),
    EventTopic(
        "authentication.team.update",
        "A team was renamed or moved: {team, previous, userIds, teams?} (userIds: the members of the moved subtree)",
    ),
    EventTopic("authentication.team.delete", "Teams were deleted: {teamIds (with every sub-team), userIds, teams?}"),
    EventTopic(
        "authentication.team.join", "A user joined a team or changed role: {teamId, userId, role, previousRole?, teams}"
    ),
    EventTopic(
        "authentication.team.leave",
        "A user left or was removed from a team: {teamId, userId, teams} (teams: each named user's teams after)",
    ),
)


# ---- switches and shapes ---------------------------------------------------------------------------


def settings() -> dict[str, Any]:
    return config()["teams"]


def require_enabled() -> None:
    """403 on every team route while ``teams.enabled`` is false."""
    if not settings()["enabled"]:
        raise forbidden("Teams are not enabled (config teams.enabled)")


def require_invites() -> None:
    """403 on the invite routes while ``teams.invites.enabled`` is false."""
    if not settings()["invites"]["enabled"]:
        raise forbidden("Team invites are not enabled (config teams.invites.enabled)")


def team_dict(team: Team) -> dict[str, Any]:
    return {
        "_id": team.id,
        "name": team.name,
        "parentTeam": team.parent_id,
        "createdAt": db.isoformat(team.created_at),
        "updatedAt": db.isoformat(team.updated_at),
    }


# ---- the tree ---------------------------------------------------------------------------------------


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
    if team is None:
        raise not_found(NO_TEAM)
    return team, role


def managed(team_id: str, user_id: str) -> Team:
    """The team when the caller owns it or an ancestor (403 for a member, 404 for anyone else)."""
    team, role = viewable(team_id, user_id)
    if role != "owner":
        raise forbidden("Only an owner of this team or of a team above it may do this")
    return team


def _ancestor_ids(team_id: str) -> list[str]:
    """``team_id`` and its ancestors, nearest first."""
    up = _ancestors(team_id)
    return list(db.session.execute(select(up.c.id).order_by(up.c.level)).scalars())


def subtree_ids(team_id: str) -> list[str]:
    """``team_id`` and all its sub-teams, shallowest first."""
    down = _descendants(team_id)
    return list(db.session.execute(select(down.c.id).order_by(down.c.level, down.c.id)).scalars())


def _subtree_height(team_id: str) -> int:
    """Levels in the subtree of ``team_id`` (1: no sub-teams)."""
    down = _descendants(team_id)
    return int(db.session.execute(select(func.max(down.c.level))).scalar_one() or 0) + 1


def _members_of(team_ids: list[str]) -> list[str]:
    """Direct members of any of the teams, each once, sorted."""
    if not team_ids:
        return []
    query = select(TeamMember.user_id).where(TeamMember.team_id.in_(team_ids)).distinct()
    return sorted(db.session.execute(query).scalars())


def _serialise_writes() -> None:
    """Take the lock every team write holds until its commit (see the module docstring)."""
    if db.is_postgresql():
        db.session.execute(select(func.pg_advisory_xact_lock(_LOCK)))
    else:
        db.session.execute(_TAKE_SQLITE_WRITE_LOCK)


def _name_taken(name: str, parent_id: str | None, creator: str | None, own_id: str | None = None) -> bool:
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


def _name_conflict() -> Exception:
    return conflict(
        "A team of this name already exists under this parent (or among your root teams)", {"name": ["Already taken."]}
    )


def _commit_unique() -> None:
    """Commit; a name taken by a concurrent write (the unique indexes) is a 409, nothing written."""
    try:
        db.session.commit()
    except IntegrityError:
        db.session.rollback()
        raise _name_conflict() from None


def _parent_for(parent_id: str, user_id: str, levels: int) -> None:
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
    if len(_ancestor_ids(parent_id)) + levels > MAX_DEPTH:
        raise bad_request(
            f"Teams nest at most {MAX_DEPTH} levels deep", {"parentTeam": [f"At most {MAX_DEPTH} levels."]}
        )


# ---- teams ------------------------------------------------------------------------------------------


def _record_join(team_id: str, user_id: str, role: str, previous: str | None = None) -> None:
    payload: dict[str, Any] = {"teamId": team_id, "userId": user_id, "role": role}
    if previous is not None:
        payload["previousRole"] = previous
    _record("authentication.team.join", payload)


def create_team(user_id: str, name: str, parent_id: str | None) -> Team:
    """A team (under ``parent_id``, which the caller must own) whose first owner is the caller."""
    _serialise_writes()
    if parent_id is not None:
        _parent_for(parent_id, user_id, 1)
    if _name_taken(name, parent_id, user_id):
        raise _name_conflict()
    now = db.utcnow()
    team = Team(id=db.new_id(), name=name, parent_id=parent_id, created_by=user_id, created_at=now, updated_at=now)
    db.session.add(team)
    db.session.add(TeamMember(team_id=team.id, user_id=user_id, role="owner", created_at=now))
    _record("authentication.team.create", {"team": team_dict(team)})
    _record_join(team.id, user_id, "owner")
    _commit_unique()
    return team


def teams_of(user_id: str, skip: int, limit: int, search: str | None) -> tuple[list[Team], int]:
    """The teams the user is a direct member of, by name."""
    query = select(Team).join(TeamMember, TeamMember.team_id == Team.id).where(TeamMember.user_id == user_id)
    if search:
        query = query.where(func.lower(Team.name).contains(search.strip().lower(), autoescape=True))
    return paginate(query, skip, limit, order_by=(Team.name, Team.id))


def sub_teams(team_id: str, user_id: str, skip: int, limit: int) -> tuple[list[Team], int]:
    viewable(team_id, user_id)
    return paginate(select(Team).where(Team.parent_id == team_id), skip, limit, order_by=(Team.name, Team.id))


def update_team(team_id: str, user_id: str, changes: dict[str, Any]) -> Team:
    """Rename and/or move. Moving needs owner on both sides: of the team's current parent (of the team
    itself for a root team) and of the new parent; a move under the team itself or one of its sub-teams
    is a 400, as is one that nests deeper than :data:`MAX_DEPTH`."""
    _serialise_writes()
    team = managed(team_id, user_id)
    previous = team_dict(team)
    name = changes.get("name", team.name)
    moved = "parentTeam" in changes and changes["parentTeam"] != team.parent_id
    parent_id = changes["parentTeam"] if moved else team.parent_id
    member_ids: list[str] = []
    if moved:
        if team.parent_id is not None and role_in(team.parent_id, user_id) != "owner":  # the side it leaves
            raise APIError(403, "Moving a team needs an owner of its current parent", {"parentTeam": ["Not an owner."]})
        if parent_id is not None:
            if team.id in _ancestor_ids(parent_id):
                raise bad_request(
                    "A team cannot move under itself or one of its sub-teams",
                    {"parentTeam": ["Would make a cycle."]},
                )
            _parent_for(parent_id, user_id, _subtree_height(team.id))
        member_ids = _members_of(subtree_ids(team.id))
    if (name, parent_id) != (team.name, team.parent_id) and _name_taken(name, parent_id, team.created_by, team.id):
        raise _name_conflict()
    team.name, team.parent_id, team.updated_at = name, parent_id, db.utcnow()
    db.session.flush()
    _record("authentication.team.update", {"team": team_dict(team), "previous": previous, "userIds": member_ids})
    _commit_unique()
    return team


def delete_team(team_id: str, user_id: str) -> list[str]:
    """Delete the team and its sub-teams at any depth, with their members and invites; other modules drop
    what refers to them (``trellis_team_deleted``) in the same transaction. Returns the deleted ids."""
    _serialise_writes()
    managed(team_id, user_id)
    team_ids = _delete_subtree(team_id)
    db.session.commit()
    return team_ids


def _delete_subtree(team_id: str) -> list[str]:
    """Delete the team with its sub-teams, members and invites, in the current transaction."""
    team_ids = subtree_ids(team_id)
    hooks().trellis_team_deleted(team_ids=team_ids)  # first: a module that refuses leaves nothing written
    members = _members_of(team_ids)
    # Explicit rows first: the result does not depend on the database cascading a self-reference.
    db.session.execute(delete(TeamInvite).where(TeamInvite.team_id.in_(team_ids)))
    db.session.execute(delete(TeamMember).where(TeamMember.team_id.in_(team_ids)))
    db.session.execute(delete(Team).where(Team.id.in_(team_ids)))
    _record("authentication.team.delete", {"teamIds": team_ids, "userIds": members})  # their teams after it
    return team_ids


# ---- members ----------------------------------------------------------------------------------------


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


def _direct_roles(team_id: str, user_ids: list[str] | None = None) -> dict[str, str]:
    query = select(TeamMember.user_id, TeamMember.role).where(TeamMember.team_id == team_id)
    if user_ids is not None:
        query = query.where(TeamMember.user_id.in_(user_ids))
    return {user: role for user, role in db.session.execute(query)}


def _keep_an_owner(team_id: str, losing: set[str]) -> None:
    """409 when the users in ``losing`` are all the team's owners."""
    owners = {user for user, role in _direct_roles(team_id).items() if role == "owner"}
    if owners and owners <= losing:
        raise conflict("The last owner cannot leave the team or step down; make someone else owner first")


def _not_members(user_ids: list[str], roles: dict[str, str]) -> None:
    missing = [user for user in user_ids if user not in roles]
    if missing:
        raise bad_request("Not members of this team: " + ", ".join(missing), {"members": ["Not members."]})


def set_roles(team_id: str, user_id: str, user_ids: list[str], role: str) -> list[dict[str, Any]]:
    """Give each of the team's members ``role`` (owners only; the last owner cannot step down)."""
    _serialise_writes()
    managed(team_id, user_id)
    roles = _direct_roles(team_id, user_ids)
    _not_members(user_ids, roles)
    changed = [user for user in dict.fromkeys(user_ids) if roles[user] != role]
    if role == "member":
        _keep_an_owner(team_id, set(changed))
    if changed:
        db.session.execute(
            update(TeamMember).where(TeamMember.team_id == team_id, TeamMember.user_id.in_(changed)).values(role=role)
        )
    for user in changed:
        _record_join(team_id, user, role, previous=roles[user])
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
    _serialise_writes()
    user_ids = list(dict.fromkeys(user_ids))
    if user_ids == [user_id]:
        viewable(team_id, user_id)
    else:
        managed(team_id, user_id)
    roles = _direct_roles(team_id, user_ids)
    _not_members(user_ids, roles)
    _keep_an_owner(team_id, set(user_ids))
    db.session.execute(delete(TeamMember).where(TeamMember.team_id == team_id, TeamMember.user_id.in_(user_ids)))
    for user in user_ids:
        _record("authentication.team.leave", {"teamId": team_id, "userId": user})
    db.session.commit()
    return user_ids


def add_member(team_id: str, user_id: str, new_user_id: str, role: str) -> dict[str, Any]:
    """Add a user without an invite (``teams.allowAddWithoutInvite``, owners)."""
    if not settings()["allowAddWithoutInvite"]:
        raise forbidden("Adding members without an invite is not enabled (config teams.allowAddWithoutInvite)")
    _serialise_writes()
    managed(team_id, user_id)
    user = db.session.get(User, new_user_id)
    if user is None:
        raise not_found("No user with this id")
    if _direct_roles(team_id, [new_user_id]):
        raise conflict("This user is already a member of the team", {"userId": ["Already a member."]})
    db.session.add(TeamMember(team_id=team_id, user_id=new_user_id, role=role, created_at=db.utcnow()))
    _record_join(team_id, new_user_id, role)
    db.session.commit()
    return {"_id": user.id, "email": user.email, "role": role}


# ---- invites ----------------------------------------------------------------------------------------


def invite(team_id: str, user_id: str, email: str, role: str) -> str:
    """Invite ``email`` with ``role`` (owners) and queue the ``TeamInvite`` mail in the same transaction.
    A new invite of the same address to the same team replaces the pending one (its token stops working).
    Returns the invitation token."""
    require_invites()
    email = normalise_email(email)
    team = managed(team_id, user_id)
    delivery.limit_sends(email)
    _serialise_writes()
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
    return db.session.execute(delete(TeamInvite).where(*where)).rowcount


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
    _serialise_writes()
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
    used = db.session.execute(
        update(TeamInvite).where(TeamInvite.id == found.id, TeamInvite.used.is_(False)).values(used=True)
    ).rowcount
    if not used:
        raise not_found("Unknown, used or expired invitation")
    current = _direct_roles(found.team_id, [user_id]).get(user_id)
    role = "owner" if "owner" in (current, found.role) else "member"
    if current is None:
        db.session.add(TeamMember(team_id=found.team_id, user_id=user_id, role=role, created_at=db.utcnow()))
        _record_join(found.team_id, user_id, role)
    elif current != role:
        db.session.execute(
            update(TeamMember)
            .where(TeamMember.team_id == found.team_id, TeamMember.user_id == user_id)
            .values(role=role)
        )
        _record_join(found.team_id, user_id, role, previous=current)
    team = db.session.get(Team, found.team_id)
    db.session.commit()
    return team, role


# ---- users going ------------------------------------------------------------------------------------


def forget_user(user_id: str, email: str | None) -> None:
    """In a user's delete transaction: their memberships (each with a ``leave`` event) and the invites to
    their address go; invites they sent stay, without a sender; the teams they created keep no creator.
    Each team left without an owner is handed over (:func:`_hand_over`)."""
    _serialise_writes()
    roles = dict(
        db.session.execute(select(TeamMember.team_id, TeamMember.role).where(TeamMember.user_id == user_id)).all()
    )
    db.session.execute(delete(TeamMember).where(TeamMember.user_id == user_id))
    for team_id in roles:
        _record("authentication.team.leave", {"teamId": team_id, "userId": user_id})
    for team_id in sorted(team for team, role in roles.items() if role == "owner"):
        _hand_over(team_id)
    db.session.execute(update(Team).where(Team.created_by == user_id).values(created_by=None))
    if email is not None:
        db.session.execute(delete(TeamInvite).where(TeamInvite.email == email))


def _hand_over(team_id: str) -> None:
    """A team whose last owner is going: its longest-standing direct member becomes owner. With no direct
    member left, a sub-team stays as it is (the owners of the teams above manage it), and a root team goes
    to the longest-standing member of its sub-teams, or, when nobody is left in any of them, is deleted
    with them."""
    found = db.session.execute(select(Team.parent_id).where(Team.id == team_id)).first()
    if found is None or "owner" in _direct_roles(team_id).values():  # deleted with a team above; still owned
        return
    heir = _longest_standing([team_id])
    if heir is None and found.parent_id is None:
        heir = _longest_standing(subtree_ids(team_id))
    if heir is not None:
        previous = _direct_roles(team_id, [heir]).get(heir)
        if previous is None:
            db.session.add(TeamMember(team_id=team_id, user_id=heir, role="owner", created_at=db.utcnow()))
        else:
            db.session.execute(
                update(TeamMember).where(TeamMember.team_id == team_id, TeamMember.user_id == heir).values(role="owner")
            )
        _record_join(team_id, heir, "owner", previous=previous)
    elif found.parent_id is None:
        _delete_subtree(team_id)


def _longest_standing(team_ids: list[str]) -> str | None:
    """The member of any of the teams who joined first (ties: the smaller id)."""
    query = select(TeamMember.user_id).where(TeamMember.team_id.in_(team_ids))
    return db.session.execute(query.order_by(TeamMember.created_at, TeamMember.user_id).limit(1)).scalar()


# ---- what other modules ask (through ``service``) -----------------------------------------------------


def team_ids_of(user_id: str) -> list[str]:
    """The user's teams and all their ancestors. Every access-controlled request asks, so each process
    remembers the answers beside the ``authentication-teams`` generation, which every membership change
    bumps in its own transaction (:func:`_record`): a change acknowledged anywhere is seen by the next
    request everywhere (``trellis.cache``), and a session that changed teams itself reads the table."""
    if db.session.registry.has() and db.session.info.get(_CHANGED):  # no session: nothing written (and none made)
        return _team_ids_of(user_id)
    return list(MEMBERSHIP.get(user_id, lambda: tuple(_team_ids_of(user_id))))


MEMBERSHIP = Remembered("authentication-teams")
_CHANGED = "trellis_teams_changed"  # in the session's info: this session wrote teams or memberships


def _record(topic: str, payload: dict[str, Any]) -> None:
    """Every change of teams or memberships records its event here, and bumps the generation that
    :func:`team_ids_of`'s memory is kept under, in the same transaction."""
    db.session.info[_CHANGED] = True
    affected = payload.get("userIds") or ([payload["userId"]] if "userId" in payload else [])
    # Each affected user's teams once the change is made: a live subscriber's view follows the changes in
    # the order they committed, not the state when the event reaches it.
    if affected:
        db.session.flush()  # the memberships just added are what the teams are read from
        payload = {**payload, "teams": {user: _team_ids_of(user) for user in affected}}
    events.record(topic, payload)
    MEMBERSHIP.bump()


def _teams_of_statement() -> Select:
    start = select(TeamMember.team_id.label("id")).where(TeamMember.user_id == bindparam("user_id"))
    up = start.cte("mine", recursive=True)
    up = up.union(select(Team.parent_id).join(up, Team.id == up.c.id).where(Team.parent_id.is_not(None)))
    return select(up.c.id).execution_options(**statements.PREPARE)


_TEAMS_OF = _teams_of_statement()


def _team_ids_of(user_id: str) -> list[str]:
    """The user's teams and all their ancestors: one recursive query, built once, on the request's read
    connection (in the session's transaction when one is open, so it sees the request's own writes).

    Every access-controlled request of a user asks this. Built per call and run through the ORM session
    it cost a get by id under access a third of its server CPU (py-spy, ``bench/results/access.md``):
    the CTE rebuilt, the ORM execution path, and a BEGIN and ROLLBACK for a request that wrote nothing.
    """
    session = db.session()
    if session.in_transaction():
        return sorted(session.execute(_TEAMS_OF, {"user_id": user_id}).scalars())
    rows = reads.reading(lambda connection: connection.execute(_TEAMS_OF, {"user_id": user_id}).scalars().all())
    return sorted(rows)


def existing_team_ids(team_ids: list[str]) -> set[str]:
    if not team_ids:
        return set()
    return set(db.session.execute(select(Team.id).where(Team.id.in_(team_ids))).scalars())
