"""Teams: creating, moving and deleting them (here), members and roles (``team_members.py``), invitations by
mail (``team_invites.py``), the tree and authority over it (``team_tree.py``), what an account's deletion does
to teams (``team_handover.py``) and a user's teams as other modules ask for them (``team_memory.py``). The
authentication README's "Teams" section is the reference.

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

from typing import Any

from sqlalchemy import func, select

from trellis import EventTopic, db
from trellis.errors import APIError, bad_request
from trellis.http import paginate

from .team_config import require_enabled, require_invites, settings
from .team_handover import forget_user
from .team_invites import ACCEPT_PATH, INVITE_LIFETIME, INVITE_TOKEN_BYTES, accept, invite, invites_of, revoke_invites
from .team_members import add_member, members, members_by_id, remove_members, set_roles
from .team_memory import MEMBERSHIP, existing_team_ids, record, record_join, team_ids_of
from .team_models import Team, TeamMember
from .team_tree import (
    MAX_DEPTH,
    NO_TEAM,
    ancestor_ids,
    commit_unique,
    delete_subtree,
    managed,
    members_of,
    name_conflict,
    name_taken,
    parent_for,
    role_in,
    serialise_writes,
    subtree_height,
    subtree_ids,
    team_dict,
    viewable,
)

__all__ = [
    "ACCEPT_PATH",
    "INVITE_LIFETIME",
    "INVITE_TOKEN_BYTES",
    "MAX_DEPTH",
    "MEMBERSHIP",
    "NO_TEAM",
    "TEAM_EVENTS",
    "accept",
    "add_member",
    "create_team",
    "delete_team",
    "existing_team_ids",
    "forget_user",
    "invite",
    "invites_of",
    "managed",
    "members",
    "members_by_id",
    "remove_members",
    "require_enabled",
    "require_invites",
    "revoke_invites",
    "role_in",
    "set_roles",
    "settings",
    "sub_teams",
    "subtree_ids",
    "team_dict",
    "team_ids_of",
    "teams_of",
    "update_team",
    "viewable",
]

# What each team event's payload may hold (``teams``: each named user's teams once the change is made).
_TEAMS = "{userId: [teamId, ...]}: each named user's teams after the change, ancestors included"
_MEMBERSHIP = {"teamId": "the team", "userId": "the member", "teams": _TEAMS}

TEAM_EVENTS = (
    EventTopic("authentication.team.create", "A team was created", {"team": "the team as the API shows it"}),
    EventTopic(
        "authentication.team.update",
        "A team was renamed or moved",
        {
            "team": "the team after the change",
            "previous": "the team before it",
            "userIds": "the members of the moved subtree",
            "teams": _TEAMS,
        },
    ),
    EventTopic(
        "authentication.team.delete",
        "Teams were deleted (a team with every sub-team)",
        {"teamIds": "the deleted teams", "userIds": "their members", "teams": _TEAMS},
    ),
    EventTopic(
        "authentication.team.join",
        "A user joined a team or changed role",
        {**_MEMBERSHIP, "role": "owner or member", "previousRole": "the role before, when it changed"},
    ),
    EventTopic("authentication.team.leave", "A user left or was removed from a team", _MEMBERSHIP),
)


def create_team(user_id: str, name: str, parent_id: str | None) -> Team:
    """A team (under ``parent_id``, which the caller must own) whose first owner is the caller."""
    serialise_writes()
    if parent_id is not None:
        parent_for(parent_id, user_id, 1)
    if name_taken(name, parent_id, user_id):
        raise name_conflict()
    now = db.utcnow()
    team = Team(id=db.new_id(), name=name, parent_id=parent_id, created_by=user_id, created_at=now, updated_at=now)
    db.session.add(team)
    db.session.add(TeamMember(team_id=team.id, user_id=user_id, role="owner", created_at=now))
    record("authentication.team.create", {"team": team_dict(team)})
    record_join(team.id, user_id, "owner")
    commit_unique()
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
    serialise_writes()
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
            if team.id in ancestor_ids(parent_id):
                raise bad_request(
                    "A team cannot move under itself or one of its sub-teams",
                    {"parentTeam": ["Would make a cycle."]},
                )
            parent_for(parent_id, user_id, subtree_height(team.id))
        member_ids = members_of(subtree_ids(team.id))
    if (name, parent_id) != (team.name, team.parent_id) and name_taken(name, parent_id, team.created_by, team.id):
        raise name_conflict()
    team.name, team.parent_id, team.updated_at = name, parent_id, db.utcnow()
    db.session.flush()
    record("authentication.team.update", {"team": team_dict(team), "previous": previous, "userIds": member_ids})
    commit_unique()
    return team


def delete_team(team_id: str, user_id: str) -> list[str]:
    """Delete the team and its sub-teams at any depth, with their members and invites; other modules drop
    what refers to them (``trellis_team_deleted``) in the same transaction. Returns the deleted ids."""
    serialise_writes()
    managed(team_id, user_id)
    team_ids = delete_subtree(team_id)
    db.session.commit()
    return team_ids
