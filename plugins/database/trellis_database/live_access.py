"""Access control for live subscriptions (Socket.IO and SSE): who may see which change.

Each subscription holds its *viewer* (``trellis.access.Acting``, read when it subscribes and again when
its user's teams change; None for administrators and when no Authorization module is installed). An
event is turned, once for every subscription, into :class:`Sides`: the document before and after and
its *audiences* before and after (``AccessControl.audiences``: the tuples on the document, read with one
query per event and only when the schema is under access control and has a subscriber that is not an
administrator; field-backed relations from the event's own documents; inheritance from the related
documents' audiences). Each subscription then decides in memory (``Audience.admits``): no query per
subscriber per event.

- ``database.<S>.*``: a create reaches those who may read the document; an update is ``update``,
  ``enter`` (it became readable: a field change) or ``leave`` (no longer readable, sent as ``{_id}``);
  a delete reaches those who could read it (its ``grants``, removed with it, travel in the event).
- ``authorization.<S>.grant|revoke``: ``enter`` (with the document, read once) or ``leave`` (``{_id}``)
  for the subscribers whose access it changed, on the document and on the documents of schemas that
  inherit a permission from it (``<field>-><permission>``).
- ``authentication.team.*``: the viewers of the users it names are read again; where the subjects
  changed, ONE query per such subscription finds the documents that became readable or unreadable
  (``pred(new) AND NOT pred(old)``, and the reverse), sent as ``enter``/``leave``. A team deletion also
  removes the team's tuples (each with a ``revoke`` event right after): the subjects the viewer lost
  stay counted as held *before* (``Subscription.former``), so those revokes still send ``leave``.

Ordering: events are applied as they come, with the readers the database holds when the event is
applied (not when it was written). A ``leave`` for a document a subscriber never saw, or an ``enter``
right after the ``create`` of the same document, is harmless: clients treat both as idempotent. A
change of a related document's own field-backed relations, or its deletion, does not send
``enter``/``leave`` for the documents inheriting from it; their next event is filtered exactly.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import visitors

from trellis import access, events, reads
from trellis.access import Acting, Audience, Probe, ResourceTable
from trellis.credentials import Identity

from . import document_access
from .documents import columns, to_document
from .registry import CompiledSchema, snapshot

TEAM_EVENTS = "authentication.team.*"
GRANT_EVENTS = "authorization.*.*"
_OLD = "old_"  # prefix of the bound parameters of the previous viewer's predicate


def viewer(identity: Identity | None) -> Acting | None:
    """Who a subscriber acts as, or None when it sees everything (administrators; no access module)."""
    found = access.control()
    if found is None or (identity is not None and identity.is_admin):
        return None
    return found.viewer(identity)


def user_viewer(user_id: str) -> Acting | None:
    return viewer(Identity("user", user_id))


def resource_of(schema_name: str) -> tuple[CompiledSchema, ResourceTable] | None:
    """The schema and its resource when it is under access control now, else None."""
    schema = snapshot().document_schema(schema_name)
    if not document_access.opted_in(schema) or access.control() is None:
        return None
    return schema, document_access.describe(schema)


@dataclass
class Sides:
    """One document as an event changes it for one schema's subscriptions. ``readers_*`` None: no access
    rule applies (everyone who may subscribe sees it). ``kind``: create, update, delete, or ``access``
    (a grant or revoke: the document did not change, who may read it did)."""

    kind: str
    doc_id: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    readers_before: Audience | None = None
    readers_after: Audience | None = None
    gone: dict[str, Any] = field(default_factory=dict)  # ``{_id}``: what a leave shows (one object per event)

    def __post_init__(self) -> None:
        self.gone = {"_id": self.doc_id}


def sides(event: events.Event, schema_name: str, restricted: bool) -> list[Sides]:
    """What ``event`` is for the subscriptions of ``schema_name`` (empty: nothing). ``restricted``: some
    of them are not administrators (only then are audiences read)."""
    module, family_name, kind = event.topic.split(".", 2)
    if module == "database":
        return _document_sides(event, kind) if family_name == schema_name else []
    if module == "authorization" and kind in ("grant", "revoke") and restricted:
        return _grant_sides(event, kind, schema_name)
    return []


def _document_sides(event: events.Event, kind: str) -> list[Sides]:
    _, schema_name, _ = event.topic.split(".", 2)
    payload = event.payload
    document, previous = payload.get("document"), payload.get("previous")
    if not isinstance(document, dict):
        return []
    doc_id = str(document.get("_id"))
    before = previous if kind != "create" and isinstance(previous, dict) else None
    found = Sides(kind, doc_id, before, document if kind != "delete" else None)
    found.gone = document if kind == "delete" else found.gone
    resolved = resource_of(schema_name)
    if resolved is None:
        return [found]
    _, resource = resolved
    probes: list[Probe] = []
    if kind == "delete":
        removed = tuple((f"{schema_name}:{doc_id}", s, r) for s, r in payload.get("grants") or ())
        probes.append(Probe(before or {"_id": doc_id}, plus=removed))
    else:
        if before is not None:
            probes.append(Probe(before))
        probes.append(Probe(document))
    with _connection() as connection:
        found_audiences = control().audiences(resource, probes, connection)
    if kind == "delete":
        found.readers_before, found.readers_after = found_audiences[0], Audience()
    elif before is None:
        found.readers_before, found.readers_after = Audience(), found_audiences[0]
    else:
        found.readers_before, found.readers_after = found_audiences
    return [found]


def _grant_sides(event: events.Event, kind: str, schema_name: str) -> list[Sides]:
    """A grant or revoke on ``R:<id>``: the document itself when ``R`` is the schema, and the schema's
    documents that name it in a Relation field when the schema inherits from ``R``."""
    payload = event.payload
    subject, relation, text = payload.get("subject"), payload.get("relation"), payload.get("resource")
    if not all(isinstance(value, str) for value in (subject, relation, text)) or ":" not in text:
        return []
    resolved = resource_of(schema_name)
    if resolved is None:
        return []
    schema, resource = resolved
    target, target_id = text.split(":", 1)
    conditions = []
    if target == schema_name:
        conditions.append(resource.id_column == target_id)
    if f"database.{target}" in control().change_families(resource):  # the schema inherits from the target
        conditions += [
            ref.refers_to(sa.literal(target_id)) for ref in resource.relation_fields.values() if ref.target == target
        ]
    if not conditions:
        return []
    change = ((text, subject, relation),)
    table = schema.table
    with _connection() as connection:
        rows = connection.execute(sa.select(*columns(table)).where(sa.or_(*conditions))).all()
        documents = [to_document(schema, row) for row in rows]
        if not documents:
            return []
        # before the event: without a granted tuple, with a revoked one
        before = [Probe(doc, minus=change) if kind == "grant" else Probe(doc, plus=change) for doc in documents]
        found = control().audiences(resource, before + [Probe(doc) for doc in documents], connection)
    count = len(documents)
    return [
        Sides("access", doc["_id"], doc, doc, found[index], found[count + index]) for index, doc in enumerate(documents)
    ]


def grant_families(schema_name: str) -> list[str]:
    """The families of the grant events that change who may read the schema's documents (none when it is
    not under access control)."""
    resolved = resource_of(schema_name)
    if resolved is None:
        return []
    return [family for family in control().change_families(resolved[1]) if family.startswith("authorization.")]


def affected_users(event: events.Event) -> list[str]:
    """The users whose teams (and so whose subjects) a team event changed."""
    payload = event.payload
    kind = event.topic.rsplit(".", 1)[1]
    if kind in ("join", "leave"):
        user = payload.get("userId")
        if kind == "join" and payload.get("previousRole") is not None:
            return []  # a role change: the same teams
        return [user] if isinstance(user, str) else []
    if kind in ("delete", "update"):
        return [user for user in payload.get("userIds") or () if isinstance(user, str)]
    return []


def membership_changes(schema_name: str, old: Acting, new: Acting) -> Iterable[tuple[bool, dict[str, Any]]]:
    """``(entered, document)`` for each document of the schema that ``new`` may read and ``old`` could not
    (True), or the reverse (False): ONE query, the predicate bound twice."""
    resolved = resource_of(schema_name)
    if resolved is None:
        return []
    schema, _ = resolved
    now = document_access.read_condition(schema, new)
    then = visitors.replacement_traverse(now, {}, _rename_parameters)
    table = schema.table
    statement = sa.select(*columns(table), sa.case((now, 1), else_=0)).where(
        sa.or_(sa.and_(now, sa.not_(then)), sa.and_(then, sa.not_(now)))
    )
    parameters = {**new.parameters(), **{_OLD + key: value for key, value in old.parameters().items()}}
    with _connection() as connection:
        rows = connection.execute(statement, parameters).all()
    return [(bool(row[-1]), to_document(schema, row)) for row in rows]


def _rename_parameters(element: Any) -> Any:
    if isinstance(element, sa.BindParameter) and element.key in (access.SUBJECTS, access.USERS, access.TEAMS):
        return sa.bindparam(_OLD + element.key, type_=element.type, expanding=element.expanding)
    return None


def with_subjects(acting: Acting, extra: frozenset[str]) -> Acting:
    """``acting`` also holding ``extra`` (subjects lost with a deleted team: held *before* its revokes)."""
    if not extra:
        return acting
    return Acting(acting.user_id, (*acting.subjects, *sorted(extra)), acting.team_ids, acting.scope, acting.admin)


def control() -> access.AccessControl:
    return document_access.control()


def _connection() -> Any:
    """A read connection for one event's queries, given back at once (nothing held between events)."""
    return closing(reads.provider().open())
