"""Who may read a document, as data: what live subscriptions intersect with their own subjects.

The predicate (:mod:`.predicate`) answers "which documents may this caller read" for one caller per
statement. A live event turns the question around: one document, hundreds of subscribers. Asking the
predicate once per subscriber would be one query per subscriber per event; instead
:func:`audiences` reads, once per event, the same three sources the predicate reads — the tuples on the
document (one query for every document of the call), the users and teams its field-backed relations
name (from the document itself, no query), and for ``<field>-><permission>`` the related documents'
own audiences (one query for their rows, one for their tuples) — and each subscription intersects the
result with its subjects in memory (:meth:`trellis.access.Audience.admits`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import sqlalchemy as sa

from trellis.access import Audience, Probe, ResourceTable, any_of, catalog

from .definitions import definition
from .models import Relation

_table = Relation.__table__
Related = Mapping[str, Mapping[str, "dict[str, Any] | None"]]


def audiences(
    resource: ResourceTable,
    probes: list[Probe],
    connection: sa.Connection,
    permission: str = "read",
    hop: bool = True,
    related: Related | None = None,
) -> list[Audience]:
    """The audience of ``permission`` on each probed document (in order); see the module docstring.
    ``related``: documents of the resources inherited from as they were at some moment, by resource name
    and id (None: it did not exist then), instead of their rows."""
    found = definition(resource.name)
    direct = found.direct(permission)
    ids = sorted({str(probe.document.get("_id")) for probe in probes})
    stored = _tuples(connection, resource.name, ids, direct) if direct and ids else {}
    result = []
    for probe in probes:
        doc_id = str(probe.document.get("_id"))
        text = f"{resource.name}:{doc_id}"
        held = set(stored.get(doc_id, ()))
        held -= {(subject, relation) for res, subject, relation in probe.minus if res == text}
        held |= {(subject, relation) for res, subject, relation in probe.plus if res == text and relation in direct}
        users: set[str] = set()
        teams: set[str] = set()
        for field_name, relation in resource.field_relations.items():
            ref = resource.relation_fields.get(field_name)
            if relation in direct and ref is not None:
                (users if ref.target == "User" else teams).update(ref.ids(probe.document))
        result.append(Audience(frozenset(subject for subject, _ in held), frozenset(users), frozenset(teams)))
    if hop:
        for field_name, inherited in found.inherited(permission):
            result = _inherit(resource, field_name, inherited, probes, result, connection, related or {})
    return result


def _inherit(
    resource: ResourceTable,
    field_name: str,
    permission: str,
    probes: list[Probe],
    result: list[Audience],
    connection: sa.Connection,
    related: Related,
) -> list[Audience]:
    """Add to each audience the audience of ``permission`` on the documents its ``field_name`` names."""
    ref = resource.relation_fields.get(field_name)
    registered = catalog()
    target = registered.resource(ref.target) if ref is not None and registered is not None else None
    if ref is None or target is None:
        return result  # the target left access control: it grants nothing (admins only)
    named = sorted({related_id for probe in probes for related_id in ref.ids(probe.document)})
    if not named:
        return result
    rows = connection.execute(sa.select(target.table.c.id, target.table.c.data).where(target.id_column.in_(named)))
    stored: dict[str, dict[str, Any] | None] = {row[0]: {"_id": row[0], **_data(row[1])} for row in rows}
    then = related.get(target.name, {})
    stored.update({doc_id: then[doc_id] for doc_id in named if doc_id in then})
    documents = {doc_id: doc for doc_id, doc in stored.items() if doc is not None}
    changes = tuple(change for probe in probes for change in probe.plus)
    removed = tuple(change for probe in probes for change in probe.minus)
    parents = [Probe(doc, changes, removed) for doc in documents.values()]
    by_id = dict(zip(documents, audiences(target, parents, connection, permission, hop=False), strict=True))
    merged = []
    for probe, own in zip(probes, result, strict=True):
        for related_id in ref.ids(probe.document):
            if related_id in by_id:
                own = own | by_id[related_id]
        merged.append(own)
    return merged


def _tuples(
    connection: sa.Connection, resource_type: str, doc_ids: list[str], relations: Iterable[str]
) -> dict[str, list[tuple[str, str]]]:
    dialect = connection.dialect.name
    key = (dialect, resource_type, tuple(sorted(relations)))
    statement = _TUPLES.get(key)
    if statement is None:
        statement = _TUPLES[key] = sa.select(_table.c.resource_id, _table.c.subject, _table.c.relation).where(
            _table.c.resource_type == sa.literal(resource_type),
            any_of(_table.c.resource_id, "doc_ids", dialect),
            sa.or_(*(_table.c.relation == sa.literal(relation) for relation in key[2])),
        )
    rows = connection.execute(statement, {"doc_ids": doc_ids})
    found: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for doc_id, subject, relation in rows:
        found[doc_id].append((subject, relation))
    return found


# Built once per resource type and relations: made anew for each live event, the statement cost more CPU
# than its round trip (py-spy, the access benchmark). Run through SQLAlchemy, whose disconnect handling
# the live path's retry after a PostgreSQL restart relies on.
_TUPLES: dict[tuple[str, str, tuple[str, ...]], sa.Select[Any]] = {}


def _data(value: Any) -> dict[str, Any]:
    return json.loads(value) if isinstance(value, str) else dict(value or {})
