"""The SQL condition that a document's row must meet for a caller to hold a permission on it.

For a resource ``R`` and a permission ``p`` it is the OR of:

- a tuple: ``EXISTS (SELECT 1 FROM authz_relations t WHERE t.resource_type = 'R' AND t.resource_id = d.id
  AND t.relation IN (<relations granting p>) AND t.subject = ANY(:acc_subjects))``, one probe of the
  unique index per row; or, in the *membership* form for a caller whose tuples name few documents,
  ``(d.id IN (SELECT t.resource_id FROM authz_relations t WHERE <the same>)) IS TRUE``, the caller's set
  built once per statement and one hash probe per row;
- field-backed relations (``authorization.fields``): the field holds the caller's user id (or one of its
  team ids), read from the row itself;
- inheritance (``<field>-><permission>``), one hop: ``EXISTS (SELECT 1 FROM <related table> r WHERE
  <the field holds r.id> AND <r's own condition for that permission, without its inheritance>)``.

The caller is three bound parameters (``trellis.access.SUBJECTS``, ``USERS``, ``TEAMS``), never SQL
text, so one statement serves every caller and is compiled once per resource definition.
"""

from __future__ import annotations

import sqlalchemy as sa

from trellis.access import SUBJECTS, TEAMS, USERS, ResourceTable, any_of, catalog

from .definitions import definition
from .models import Relation

_relations = Relation.__table__


def condition(
    resource: ResourceTable, permission: str, dialect: str, hop: bool = True, membership: bool = False
) -> sa.ColumnElement[bool]:
    """The condition for ``permission`` on ``resource``'s rows (see the module docstring); false when
    nothing grants it. ``membership``: the tuples tested as membership of the set of documents the caller's
    tuples name (:func:`held`), for a caller known to hold few of them."""
    found = definition(resource.name)
    direct = found.direct(permission)
    parts: list[sa.ColumnElement[bool]] = []
    if direct and membership:
        # IS TRUE (the same rows in a WHERE) keeps PostgreSQL from turning the IN into a semi-join: it stays a
        # hashed subplan, the caller's set built once per statement and each walked row one hash probe.
        parts.append(resource.id_column.in_(held(resource, permission, dialect)).is_(sa.true()))
    elif direct:
        tuples = _relations.alias(f"acc_{resource.name}_t")
        parts.append(
            sa.exists(
                sa.select(sa.literal_column("1")).where(
                    tuples.c.resource_type == sa.literal_column(_quoted(resource.name)),
                    tuples.c.resource_id == resource.id_column,
                    tuples.c.relation.in_([sa.literal_column(_quoted(r)) for r in direct]),
                    any_of(tuples.c.subject, SUBJECTS, dialect),
                )
            )
        )
    for field_name, relation in resource.field_relations.items():
        ref = resource.relation_fields.get(field_name)
        if relation in direct and ref is not None:
            parts.append(ref.holds_any(USERS if ref.target == "User" else TEAMS))
    if hop:
        for field_name, inherited in found.inherited(permission):
            ref = resource.relation_fields.get(field_name)
            registered = catalog()
            target = registered.resource(ref.target, aliased=True) if ref is not None and registered else None
            if ref is None or target is None:
                continue  # the target left access control: it grants nothing (admins only)
            inner = condition(target, inherited, dialect, hop=False)
            parts.append(sa.exists(sa.select(sa.literal_column("1")).where(ref.refers_to(target.id_column), inner)))
    if not parts:
        return sa.false()
    return sa.or_(*parts) if len(parts) > 1 else parts[0]


def held(resource: ResourceTable, permission: str, dialect: str) -> sa.Select:
    """The ids of ``resource``'s documents on which the caller's tuples grant ``permission`` (none when no
    relation does): an index-only scan of the caller's tuples, whatever the size of the table."""
    direct = definition(resource.name).direct(permission)
    tuples = _relations.alias(f"acc_{resource.name}_held")
    return sa.select(tuples.c.resource_id).where(
        tuples.c.resource_type == sa.literal_column(_quoted(resource.name)),
        tuples.c.relation.in_([sa.literal_column(_quoted(r)) for r in direct]) if direct else sa.false(),
        any_of(tuples.c.subject, SUBJECTS, dialect),
    )


def _quoted(text: str) -> str:
    """A validated name (letters, digits, _) as an SQL literal: constant text, compiled into the statement."""
    return "'" + text.replace("'", "''") + "'"
