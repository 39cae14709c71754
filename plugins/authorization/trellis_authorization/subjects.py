"""Subjects: who a tuple names, and who a request acts as.

A subject is ``User:<id>``, ``Team:<id>`` (the team's members, and the members of its sub-teams at any
depth), ``User:*`` (every signed-in user) or ``*`` (anyone). A request acts as its user, ``User:*``, ``*``
and every team the user belongs to together with the ancestors of those teams: one query
(the Authentication module's ``team_ids_of``), made once per request and bound as one parameter of
every statement that needs it (the lesson of Supabase's ``(select auth.uid())``: computed once, never
per row).
"""

from __future__ import annotations

import re
from typing import Any

from flask import has_request_context

from trellis import current
from trellis.access import ADMIN, Acting
from trellis.credentials import Identity
from trellis.errors import bad_request, forbidden
from trellis_authentication import service as users

SIGNED_IN, ANYONE = "User:*", "*"
WILDCARDS = (SIGNED_IN, ANYONE)
_SUBJECT = re.compile(r"^(User|Team):([A-Za-z0-9_-]{1,64})$")


def parse(subject: Any, key: str = "subject") -> tuple[str, str | None]:
    """``(type, id)`` of a subject text; ``("*", None)`` for the wildcards. 400 when malformed."""
    if isinstance(subject, str):
        if subject in WILDCARDS:
            return "*", None
        match = _SUBJECT.match(subject)
        if match:
            return match.group(1), match.group(2)
    raise bad_request("A subject is User:<id>, Team:<id>, User:* or *", {key: ["Not a subject"]})


def check_exists(subjects: list[str], key: str = "subject") -> None:
    """400 when a ``User:`` or ``Team:`` subject names nobody (one query for both kinds)."""
    wanted: dict[str, set[str]] = {"User": set(), "Team": set()}
    for subject in subjects:
        kind, ident = parse(subject, key)
        if ident is not None:
            wanted[kind].add(ident)
    found_users, found_teams = users.existing_user_and_team_ids(sorted(wanted["User"]), sorted(wanted["Team"]))
    found = {"User": found_users, "Team": found_teams}
    for kind, ids in wanted.items():
        missing = ids - found[kind]
        if missing:
            raise bad_request(f"No {kind.lower()} with id {min(missing)!r}", {key: [f"Unknown {kind.lower()}"]})


def check_grantable(subject: str, acting: Acting) -> None:
    """A user names in a grant only a team it is a member of (directly or through a sub-team: the
    ``Team:`` subjects it acts as); any other team id, existing or not, is the 400 of an unknown team, so a
    grant neither confirms a stranger's team nor makes it an owner. (Administrators name any team.)"""
    kind, ident = parse(subject)
    if kind != "Team" or ident is None:
        return
    if acting.user_id is None or ident not in users.team_ids_of(acting.user_id):
        raise bad_request(f"No team with id {ident!r}", {"subject": ["Unknown team"]})


def acting(identity: Identity | None, scope: str | None = None) -> Acting:
    """Who the request acts as (memoised per request and scope). 403 for a scope the caller is not in."""
    memo = current.request().environ.setdefault("trellis", {}).setdefault("acting", {}) if has_request_context() else {}
    key = (identity.kind if identity is not None else None, identity.id if identity is not None else None, scope)
    if key not in memo:
        memo[key] = read_acting(identity, scope)
    return memo[key]


def read_acting(identity: Identity | None, scope: str | None) -> Acting:
    team_id = None
    if scope is not None:
        kind, team_id = parse(scope, "scope")
        if kind != "Team" or team_id is None:
            raise bad_request("scope is Team:<id>", {"scope": ["Not a team"]})
    if identity is not None and identity.is_admin:
        if scope is None or team_id is None:
            return ADMIN
        check_exists([scope], "scope")
        return Acting(user_id=None, subjects=(scope,), team_ids=(team_id,), scope=scope, admin=True)
    if identity is None or identity.kind != "user" or identity.id is None:
        if scope is not None:
            raise forbidden("Acting as a team needs a signed-in member of it")
        return Acting(user_id=None, subjects=(ANYONE,))
    teams = users.team_ids_of(identity.id)
    if scope is not None:
        if team_id not in teams:
            raise forbidden(f"You are not a member of {scope}")
        return Acting(user_id=identity.id, subjects=(scope,), team_ids=(team_id,), scope=scope)
    return user_acting(identity.id, teams)


def user_acting(user_id: str, teams: list[str]) -> Acting:
    """A signed-in user belonging to ``teams`` (with their ancestors), acting as itself."""
    subjects = (f"User:{user_id}", SIGNED_IN, ANYONE, *(f"Team:{t}" for t in teams))
    return Acting(user_id=user_id, subjects=subjects, team_ids=tuple(teams))
