"""Relation tuples: written, removed and listed in the caller's transaction.

Every grant and revoke also records an event (``authorization.<Type>.grant`` / ``.revoke``, payload
``{subject, relation, resource}``) in the same transaction: live subscriptions turn it into ``enter`` /
``leave``, and the family's change number keys the list counts of callers whose access it may change.
It is audited here too, whoever makes it (an administrator's relation routes, a user sharing a document
through the Database module): the one write path of a grant is the one place that cannot forget it.
The owner tuple of a new document and the tuples removed with a deleted document, user or team are
consequences of those changes, which have their own events, and are not audited as grants.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from trellis import audit, db, events
from trellis.access import GrantChange, ResourceTable, catalog
from trellis.errors import bad_request, conflict, not_found

from . import subjects
from .definitions import definition
from .models import Relation

_table = Relation.__table__


def family(resource_type: str) -> str:
    return f"authorization.{resource_type}"


def change_of(topic: str, payload: Mapping[str, Any]) -> GrantChange | None:
    """The grant or revoke ``authorization.<Type>.grant|revoke`` records (see :func:`grant`, :func:`revoke`)."""
    parts = topic.split(".")
    if len(parts) != 3 or parts[0] != "authorization" or parts[2] not in ("grant", "revoke"):
        return None
    kind = parts[2]
    resource, subject, relation = (payload.get(name) for name in ("resource", "subject", "relation"))
    if not isinstance(resource, str) or not isinstance(subject, str) or not isinstance(relation, str):
        return None
    if ":" not in resource:
        return None
    return GrantChange(resource, subject, relation, granted=kind == "grant")


def parse_resource(text: Any, key: str = "resource") -> tuple[ResourceTable, str]:
    """``(resource, document id)`` of ``<Schema>:<id>``: 400 unless the schema is under access control."""
    if not isinstance(text, str) or ":" not in text:
        raise bad_request("A resource is <Schema>:<documentId>", {key: ["Not a resource"]})
    name, doc_id = text.split(":", 1)
    found = catalog()
    resource = found.resource(name) if found is not None and name else None
    if resource is None:
        raise bad_request(f"{name!r} is not a schema under access control", {key: ["Unknown resource type"]})
    if not doc_id or len(doc_id) > 64:
        raise bad_request("A resource is <Schema>:<documentId>", {key: ["Missing document id"]})
    return resource, doc_id


def existing_documents(resource: ResourceTable, doc_ids: list[str]) -> set[str]:
    table = resource.table
    rows = db.session.execute(sa.select(table.c.id).where(table.c.id.in_(doc_ids)))
    return {row[0] for row in rows}


def check_relation(resource_type: str, relation: Any, subject: str, key: str = "relation") -> None:
    """400 for a relation the resource does not define, or one that does not admit the subject's type."""
    relations = definition(resource_type).relations
    if not isinstance(relation, str) or relation not in relations:
        raise bad_request(
            f"{resource_type} has no relation {relation!r}; it has {', '.join(sorted(relations))}",
            {key: ["Unknown relation"]},
        )
    kind, _ = subjects.parse(subject)
    if kind not in relations[relation]:
        raise bad_request(
            f"The relation {relation!r} does not admit {subject} (it admits {', '.join(relations[relation])})",
            {"subject": ["Subject type not admitted"]},
        )


def as_dict(row: Any) -> dict[str, Any]:
    return {
        "_id": row.id,
        "subject": row.subject,
        "relation": row.relation,
        "resource": f"{row.resource_type}:{row.resource_id}",
        "createdAt": db.isoformat(row.created_at),
    }


def grant(subject: str, relation: str, resource_type: str, doc_ids: list[str]) -> list[dict[str, Any]]:
    """Write ``subject relation resource_type:id`` for every id (checked by the caller); 409 when one
    exists already, and then nothing is written."""
    now = db.utcnow()
    rows = [
        {
            "id": db.new_id(),
            "subject": subject,
            "relation": relation,
            "resource_type": resource_type,
            "resource_id": doc_id,
            "created_at": now,
        }
        for doc_id in doc_ids
    ]
    try:
        with db.session.begin_nested():
            db.session.execute(sa.insert(_table), rows)
    except IntegrityError:
        raise conflict(f"{subject} already holds {relation} on one of these {resource_type} documents") from None
    granted = [
        {"subject": subject, "relation": relation, "resource": f"{resource_type}:{r['resource_id']}"} for r in rows
    ]
    events.record_many(f"{family(resource_type)}.grant", granted)
    _audit("relation.grant", resource_type, granted)
    return [as_dict(SimpleNamespace(**r)) for r in rows]  # as_dict reads attributes, as of a table row


def _audit(action: str, resource_type: str, changed: list[dict[str, str]]) -> None:
    """One entry per call: its target is the document (or the schema, for several documents)."""
    target = changed[0]["resource"] if len(changed) == 1 else resource_type
    changes: dict[str, Any] = {"subject": changed[0]["subject"], "relation": changed[0]["relation"]}
    if len(changed) == 1:
        changes["resource"] = changed[0]["resource"]
    else:
        changes["resources"] = [c["resource"] for c in changed]
    audit.record("authorization", action, target, changes, users=True)


def created(resource_type: str, doc_ids: list[str], owner: str) -> None:
    """A document was created: its creator (or scope team) owns it. One statement for a batch; the event
    of the document's own creation tells live subscribers (no grant event)."""
    now = db.utcnow()
    db.session.execute(
        sa.insert(_table),
        [
            {
                "id": db.new_id(),
                "subject": owner,
                "relation": "owner",
                "resource_type": resource_type,
                "resource_id": doc_id,
                "created_at": now,
            }
            for doc_id in doc_ids
        ],
    )


def owner_insert(resource_type: str, written: sa.CTE) -> sa.Insert:
    """:func:`created` as part of a create's own statement (one round trip): the owner tuple of each row
    ``written`` returns; bound parameters ``acc_tuple`` (its id), ``acc_owner`` (the subject) and ``now``."""
    return sa.insert(_table).from_select(
        ["id", "subject", "relation", "resource_type", "resource_id", "created_at"],
        sa.select(
            sa.bindparam("acc_tuple", type_=_table.c.id.type),
            sa.bindparam("acc_owner", type_=_table.c.subject.type),
            db.sql_text("owner"),
            db.sql_text(resource_type),
            written.c.id,
            sa.bindparam("now", type_=_table.c.created_at.type),
        ).select_from(written),
    )


def owner_parameters(owner: str) -> dict[str, Any]:
    return {"acc_tuple": db.new_id(), "acc_owner": owner}


def forget_written(resource_type: str, written: sa.CTE) -> sa.Delete:
    """:func:`forget_resources` as part of a deletion's own statement: the tuples of the rows ``written``
    returns, deleted and returned (``resource_id``, ``subject``, ``relation``)."""
    statement = (
        sa.delete(_table)
        .where(_table.c.resource_type == db.sql_text(resource_type), _table.c.resource_id.in_(sa.select(written.c.id)))
        .returning(_table.c.resource_id, _table.c.subject, _table.c.relation)
    )
    return statement  # type: ignore[return-value]  # SQLAlchemy's typing-only ReturningDelete derives from Update


def revoke(resource_type: str, doc_id: str, subject: str, relation: str) -> bool:
    """Remove one tuple; False when there was none."""
    statement = sa.delete(_table).where(
        _table.c.resource_type == resource_type,
        _table.c.resource_id == doc_id,
        _table.c.subject == subject,
        _table.c.relation == relation,
    )
    if db.rowcount(db.session.execute(statement)) == 0:
        return False
    revoked = {"subject": subject, "relation": relation, "resource": f"{resource_type}:{doc_id}"}
    events.record(f"{family(resource_type)}.revoke", revoked)
    _audit("relation.revoke", resource_type, [revoked])
    return True


def remove(tuple_id: str) -> dict[str, Any]:
    """Remove a tuple by id (404 when there is none); returns it."""
    row = db.session.execute(sa.select(_table).where(_table.c.id == tuple_id)).first()
    if row is None:
        raise not_found(f"No relation with id {tuple_id!r}")
    revoke(row.resource_type, row.resource_id, row.subject, row.relation)
    return as_dict(row)


def on_resource(resource_type: str, doc_id: str) -> list[dict[str, str]]:
    rows = db.session.execute(
        sa.select(_table.c.subject, _table.c.relation)
        .where(_table.c.resource_type == resource_type, _table.c.resource_id == doc_id)
        .order_by(_table.c.created_at, _table.c.id)
    )
    return [{"subject": subject, "relation": relation} for subject, relation in rows]


def held(resource_type: str, doc_id: str, subject_list: list[str]) -> list[tuple[str, str]]:
    """``(subject, relation)`` of the tuples on the document that name one of ``subject_list``."""
    rows = db.session.execute(
        sa.select(_table.c.subject, _table.c.relation).where(
            _table.c.resource_type == resource_type,
            _table.c.resource_id == doc_id,
            _table.c.subject.in_(subject_list),
        )
    )
    return [(subject, relation) for subject, relation in rows]


def forget_resources(resource_type: str, doc_ids: list[str]) -> dict[str, list[list[str]]]:
    """Documents were deleted: their tuples go in the same transaction. Returns them by document
    (``[[subject, relation], …]``): the deletion's event carries them to live subscribers."""
    removed: dict[str, list[list[str]]] = {}
    for start in range(0, len(doc_ids), 500):
        rows = db.session.execute(
            sa.delete(_table)
            .where(_table.c.resource_type == resource_type, _table.c.resource_id.in_(doc_ids[start : start + 500]))
            .returning(_table.c.resource_id, _table.c.subject, _table.c.relation)
        )
        for doc_id, subject, relation in rows:
            removed.setdefault(doc_id, []).append([subject, relation])
    return removed


def forget_subjects(subject_list: list[str]) -> None:
    """Users or teams were deleted: the tuples naming them go in the same transaction, each with its
    ``revoke`` event (live subscribers who read through a deleted team get ``leave``)."""
    rows = db.session.execute(
        sa.delete(_table)
        .where(_table.c.subject.in_(subject_list))
        .returning(_table.c.resource_type, _table.c.resource_id, _table.c.subject, _table.c.relation)
    ).all()
    by_type: dict[str, list[dict | str]] = {}
    for resource_type, doc_id, subject, relation in sorted(rows):
        payload = {"subject": subject, "relation": relation, "resource": f"{resource_type}:{doc_id}"}
        by_type.setdefault(resource_type, []).append(payload)
    for resource_type, payloads in by_type.items():
        events.record_many(f"{family(resource_type)}.revoke", payloads)


def forget_type(resource_type: str) -> None:
    db.session.execute(sa.delete(_table).where(_table.c.resource_type == resource_type))


def rename_type(old: str, new: str) -> None:
    db.session.execute(sa.update(_table).where(_table.c.resource_type == old).values(resource_type=new))


def find(filters: dict[str, Any], skip: int, limit: int) -> tuple[list[dict[str, Any]], int]:
    """Tuples matching ``subject``, ``relation``, ``resource`` (``Type:id``), ``subjectType``,
    ``resourceType``; newest first."""
    conditions = []
    if filters.get("subject"):
        conditions.append(_table.c.subject == filters["subject"])
    if filters.get("relation"):
        conditions.append(_table.c.relation == filters["relation"])
    if filters.get("resource"):
        resource_type, _, doc_id = filters["resource"].partition(":")
        conditions += [_table.c.resource_type == resource_type, _table.c.resource_id == doc_id]
    if filters.get("subjectType"):
        kind = filters["subjectType"]
        conditions.append(  # User:* begins with "User:" but is a wildcard, not a user
            _table.c.subject.in_(subjects.WILDCARDS)
            if kind == "*"
            else sa.and_(
                _table.c.subject.startswith(f"{kind}:", autoescape=True), _table.c.subject.not_in(subjects.WILDCARDS)
            )
        )
    if filters.get("resourceType"):
        conditions.append(_table.c.resource_type == filters["resourceType"])
    page = sa.select(_table).where(*conditions).order_by(_table.c.created_at.desc(), _table.c.id.desc())
    rows = db.session.execute(page.offset(skip).limit(limit)).all()
    total = db.session.execute(sa.select(sa.func.count()).select_from(_table).where(*conditions)).scalar_one()
    return [as_dict(row) for row in rows], total
