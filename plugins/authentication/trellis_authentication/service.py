"""What other modules may call (the Authentication module's service API); they never query its tables.

Everything else in this package is the module's own and may change shape. Each function below is one
query on the request's session, so it sees what the caller's transaction has written and not committed.
"""

from __future__ import annotations

from typing import Any

from trellis import db, statements

from . import teams, users
from .models import User
from .team_events import FAMILY as TEAM_FAMILY
from .team_events import PATTERN as TEAM_EVENTS
from .team_events import TeamChange, team_change
from .team_models import Team
from .users import existing_ids, get_user

__all__ = [
    "TEAM_EVENTS",
    "TEAM_FAMILY",
    "TeamChange",
    "existing_team_ids",
    "existing_user_and_team_ids",
    "existing_user_ids",
    "get_user",
    "public_users",
    "team_change",
    "team_exists",
    "team_ids_of",
]


def existing_user_ids(user_ids: list[str]) -> set[str]:
    """Which of ``user_ids`` are users (one query; unknown ids are left out)."""
    return existing_ids(user_ids)


def existing_user_and_team_ids(user_ids: list[str], team_ids: list[str]) -> tuple[set[str], set[str]]:
    """Which of ``user_ids`` are users and which of ``team_ids`` are teams (one query for both, none for
    neither)."""
    if not user_ids and not team_ids:
        return set(), set()
    users_found, teams_found = statements.existing_ids(
        db.flushed_connection(), (User.__table__.c.id, user_ids), (Team.__table__.c.id, team_ids)
    )
    return users_found, teams_found


def team_ids_of(user_id: str) -> list[str]:
    """The teams ``user_id`` is a direct member of plus all their ancestors, sorted: the ``Team:<id>``
    subjects the user acts as (a member of a sub-team counts as a member of the teams above it). One
    recursive query, on SQLite and PostgreSQL alike."""
    return teams.team_ids_of(user_id)


def existing_team_ids(team_ids: list[str]) -> set[str]:
    """Which of ``team_ids`` are teams (one query)."""
    return teams.existing_team_ids(team_ids)


def team_exists(team_id: str) -> bool:
    """Whether ``team_id`` is a team (one query)."""
    return bool(teams.existing_team_ids([team_id]))


def public_users(user_ids: list[str]) -> dict[str, dict[str, Any]]:
    """``{id: {"_id", "email"}}`` for the ids that are users (one query): what may be shown of a user to
    another (populate of a Relation field to ``User``); never a secret or a private field."""
    return users.public_users(user_ids)
