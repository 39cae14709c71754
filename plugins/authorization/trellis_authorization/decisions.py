"""Decisions on one document: may a caller do this, which relations does it hold, and why.

``allowed`` is the one a request uses: the permissions' predicates as columns of one ``SELECT`` on the
document's row (no row: the document does not exist). ``evaluate`` answers the administrator's "why":
the same rules walked in Python, returning every chain of tuples, team memberships and field relations
that grants the permission (a test keeps the two in agreement).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from trellis import db
from trellis.access import Acting, ResourceTable, catalog
from trellis_authentication import service as users

from . import subjects, tuples
from .definitions import definition
from .predicate import condition


def _dialect() -> str:
    return db.session.connection().dialect.name


def allowed(resource: ResourceTable, acting: Acting, doc_id: str, permissions: Iterable[str]) -> dict[str, bool] | None:
    """``{permission: bool}`` for the caller on one document, read in the caller's transaction (so it
    sees the request's own writes); None when the document does not exist. Admins hold everything."""
    names = list(permissions)
    dialect = _dialect()
    columns = [sa.true() if acting.admin and acting.scope is None else condition(resource, p, dialect) for p in names]
    statement = sa.select(*[sa.case((c, 1), else_=0) for c in columns]).where(resource.id_column == doc_id)
    row = db.session.execute(statement, acting.parameters()).first()
    if row is None:
        return None
    return {name: bool(value) for name, value in zip(names, row, strict=True)}


def acting_as(subject: str) -> Acting:
    """Who a subject acts as, for the administrator's checks: a user as a request of theirs would (its
    teams and their ancestors included); a team as itself, as ``scope=Team:<id>`` does; a wildcard as
    itself (``User:*`` also holds what ``*`` holds)."""
    kind, ident = subjects.parse(subject)
    subjects.check_exists([subject])
    if kind == "User" and ident is not None:
        teams = users.team_ids_of(ident)
        names = (subject, subjects.SIGNED_IN, subjects.ANYONE, *(f"Team:{t}" for t in teams))
        return Acting(user_id=ident, subjects=names, team_ids=tuple(teams))
    if (
        kind == "Team" and ident is not None
    ):  # the team's own grants (its members' further teams are theirs, not the team's)
        return Acting(user_id=None, subjects=(subject,), team_ids=(ident,))
    return Acting(user_id=None, subjects=(subject,) if subject == subjects.ANYONE else (subject, subjects.ANYONE))


def roles(resource: ResourceTable, acting: Acting, doc_id: str) -> list[str]:
    """The relations the caller holds on the document itself: its tuples and field-backed relations."""
    held = {relation for _, relation in tuples.held(resource.name, doc_id, list(acting.subjects))}
    document = _document(resource, doc_id)
    if document is not None:
        for field_name, relation in resource.field_relations.items():
            if _field_names_caller(resource, field_name, document, acting):
                held.add(relation)
    return sorted(held)


def _document(resource: ResourceTable, doc_id: str) -> dict[str, Any] | None:
    row = db.session.execute(sa.select(resource.table.c.data).where(resource.id_column == doc_id)).first()
    if row is None:
        return None
    data = row[0]
    return json.loads(data) if isinstance(data, str) else data


def _field_names_caller(
    resource: ResourceTable, field_name: str, document: dict[str, Any], acting: Acting
) -> list[str]:
    ref = resource.relation_fields.get(field_name)
    if ref is None:
        return []
    held = set(ref.ids(document))
    if ref.target == "User":
        return [f"User:{acting.user_id}"] if acting.user_id is not None and acting.user_id in held else []
    return [f"Team:{t}" for t in acting.team_ids if t in held]


def evaluate(
    resource: ResourceTable, acting: Acting, doc_id: str, permission: str, hop: bool = True
) -> list[list[str]]:
    """Every chain that grants ``permission`` (empty: denied). A chain reads from the subject to the
    permission, e.g. ``["User:u1 is a member of Team:t1", "Team:t1 editor Task:9", "editor grants edit"]``."""
    found = definition(resource.name)
    direct = found.direct(permission)
    target_text = f"{resource.name}:{doc_id}"
    paths: list[list[str]] = []
    for subject, relation in tuples.held(resource.name, doc_id, list(acting.subjects)):
        if relation in direct:
            paths.append(
                [
                    *_membership(acting, subject),
                    f"{subject} {relation} {target_text}",
                    f"{relation} grants {permission}",
                ]
            )
    document = _document(resource, doc_id)
    if document is None:
        return []
    for field_name, relation in resource.field_relations.items():
        if relation not in direct:
            continue
        for subject in _field_names_caller(resource, field_name, document, acting):
            paths.append(
                [
                    *_membership(acting, subject),
                    f"{target_text}.{field_name} names {subject}",
                    f"{field_name} holds {relation}",
                    f"{relation} grants {permission}",
                ]
            )
    if hop:
        registered = catalog()
        for field_name, inherited in found.inherited(permission):
            ref = resource.relation_fields.get(field_name)
            target = registered.resource(ref.target) if ref is not None and registered is not None else None
            if ref is None or target is None:
                continue
            for related_id in ref.ids(document):
                for chain in evaluate(target, acting, related_id, inherited, hop=False):
                    paths.append(
                        [
                            *chain,
                            f"{target_text}.{field_name} is {ref.target}:{related_id}",
                            f"{field_name}->{inherited} grants {permission}",
                        ]
                    )
    return paths


def _membership(acting: Acting, subject: str) -> list[str]:
    """The step that makes the acting user one of ``subject`` (a team, or a wildcard)."""
    if acting.user_id is None or subject == f"User:{acting.user_id}":
        return []
    if subject.startswith("Team:"):
        return [f"User:{acting.user_id} is a member of {subject} (or of one of its sub-teams)"]
    return [f"User:{acting.user_id} is one of {subject}"]
