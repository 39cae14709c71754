"""A user's teams as other modules ask for them (through ``service``), remembered in each process, and the
recording of every change of teams or memberships, which makes that memory stale in the same transaction."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, bindparam, select

from trellis import db, events, reads, statements
from trellis.cache import Remembered

from .team_models import Team, TeamMember


def team_ids_of(user_id: str) -> list[str]:
    """The user's teams and all their ancestors. Every access-controlled request asks, so each process
    remembers the answers beside the ``authentication-teams`` generation, which every membership change
    bumps in its own transaction (:func:`record`): a change acknowledged anywhere is seen by the next
    request everywhere (``trellis.cache``), and a session that changed teams itself reads the table."""
    if db.session.registry.has() and db.session.info.get(_CHANGED):  # no session: nothing written (and none made)
        return _team_ids_of(user_id)
    return list(MEMBERSHIP.get(user_id, lambda: tuple(_team_ids_of(user_id))))


MEMBERSHIP = Remembered("authentication-teams")
_CHANGED = "trellis_teams_changed"  # in the session's info: this session wrote teams or memberships


def record(topic: str, payload: dict[str, Any]) -> None:
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


def record_join(team_id: str, user_id: str, role: str, previous: str | None = None) -> None:
    payload: dict[str, Any] = {"teamId": team_id, "userId": user_id, "role": role}
    if previous is not None:
        payload["previousRole"] = previous
    record("authentication.team.join", payload)


def _teams_of_statement() -> Select:
    start = select(TeamMember.team_id.label("id")).where(TeamMember.user_id == bindparam("user_id"))
    up = start.cte("mine", recursive=True)
    up = up.union(select(Team.parent_id).join(up, Team.id == up.c.id).where(Team.parent_id.is_not(None)))
    return select(up.c.id).execution_options(**statements.PREPARE)


_TEAMS_OF = _teams_of_statement()


def _team_ids_of(user_id: str) -> list[str]:
    """The user's teams and all their ancestors: one recursive query, built once, on the request's read
    connection (in the session's transaction when one is open, so it sees the request's own writes).

    Every access-controlled request of a user asks this, so it is neither rebuilt per call nor run through
    the ORM session (which would also begin and roll back a transaction on a request that wrote nothing):
    ``bench/results/access.md#what-the-figures-say-and-the-list-predicate``.
    """
    session = db.session()
    if session.in_transaction():
        return sorted(session.execute(_TEAMS_OF, {"user_id": user_id}).scalars())
    rows = reads.reading(lambda connection: connection.execute(_TEAMS_OF, {"user_id": user_id}).scalars().all())
    return sorted(rows)


def existing_team_ids(team_ids: list[str]) -> set[str]:
    """Which of ``team_ids`` are teams (one query in the session's transaction, as ``users.existing_ids``)."""
    return statements.existing_ids(db.flushed_connection(), (Team.__table__.c.id, team_ids))[0]
