"""Access control for live subscriptions (Socket.IO and SSE): who may see which change.

The rule: a subscriber receives a change when the access in force at that change's commit let it read the
document, in commit order — whatever has changed by the time the event is delivered or replayed.

Each subscription holds its *viewer* (``trellis.access.Acting``: read when it subscribes, then taken from
each change of its user's teams, which records the teams it leaves the user in; None for administrators and
when no Authorization module is installed). An event is turned, once for every subscription, into
:class:`Sides`: the document before and after and its *audiences* before and after
(``LiveAudiences.audiences``: the tuples on the document and the related documents it inherits from, as
they were at the event's commit (:mod:`.live_history`), read once per event (once for a delivery's
changes of the schema: :func:`document_sides`) and only when the schema is
under access control and has a subscriber that is not an administrator; field-backed relations from the
event's own documents). Each subscription then decides in memory (``Audience.admits``): no query per
subscriber per event.

- ``database.<S>.*``: a create reaches those who could read the document; an update is ``update``,
  ``enter`` (it became readable: a field change) or ``leave`` (no longer readable, sent as ``{_id}``);
  a delete reaches those who could read it (its ``grants``, removed with it, travel in the event).
- ``authorization.<S>.grant|revoke``: ``enter`` (with the document as it was then) or ``leave``
  (``{_id}``) for the subscribers whose access it changed, on the document and on the documents of
  schemas that inherit a permission from it (``<field>-><permission>``).
- ``authentication.team.*``: the viewers of the users it names follow it; where the subjects changed, ONE
  query per such subscription finds the candidates (the documents whose readability differs now, and
  those changed since), each judged as it was at the change, sent as ``enter``/``leave``.
- ``database.<T>.update|delete`` of a schema ``T`` the schema inherits from: ``enter``/``leave`` for the
  documents naming the changed one, where its field-backed relations or its deletion changed who may read
  them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import visitors

from trellis import access, events, reads
from trellis.access import Acting, Audience, Probe, ResourceTable
from trellis.credentials import Identity, UserIdentity
from trellis_authentication import service as users_service

from . import document_access, live_history
from .documents import columns, to_document
from .registry import CompiledSchema, snapshot

TEAM_EVENTS = users_service.TEAM_EVENTS
TEAM_FAMILY = users_service.TEAM_FAMILY
_OLD = "old_"  # prefix of the bound parameters of the previous viewer's predicate


def viewer(identity: Identity | None) -> Acting | None:
    """Who a subscriber acts as, or None when it sees everything (administrators; no access module)."""
    found = access.control()
    if found is None or (identity is not None and identity.is_admin):
        return None
    return found.viewer(identity)


def user_viewer(user_id: str) -> Acting | None:
    return viewer(UserIdentity("user", user_id))


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
        if family_name == schema_name:
            return _document_sides(event, kind, restricted)
        return _related_sides(event, kind, schema_name) if restricted else []
    if module == "authorization" and kind in ("grant", "revoke") and restricted:
        return _grant_sides(event, schema_name)
    return []


def _document_sides(event: events.Event, kind: str, restricted: bool) -> list[Sides]:
    side = _document_side(event, kind)
    if side is None:
        return []
    found, probes = side
    resolved = resource_of(_schema_of(event)) if restricted else None  # administrators read every document
    if resolved is None:
        return [found]
    _, resource = resolved
    # Usually nothing that decides who reads the schema changed after the event: the audiences read now,
    # then a tail read after them and found empty, prove they are the event's (no transaction needed).
    with _connection() as connection:
        found_audiences = control().audiences(resource, probes(), connection)
        changed = not _tail(connection, event.id, resource).empty
    if changed:  # read again in one snapshot, the later changes undone
        with live_history.snapshot() as connection:
            tail = _tail(connection, event.id, resource)
            found_audiences = control().audiences(resource, probes(*tail.changes()), connection, related=tail.documents)
    _settle(found, found_audiences)
    return [found]


def document_sides(batch: list[events.Event], schema_name: str) -> dict[int, list[Sides]]:
    """``sides(event, schema_name, True)`` for each event of ``batch`` (changes of the schema's own
    documents, in ascending order), read together: the audiences of all their documents in one read per
    ``READ_AHEAD`` events, then the tail after the first of them once. An event left out (none when the
    schema is not under access control) reads its own as ``sides`` does: those of a chunk after whose first
    event something that decides who may read changed (their tails differ)."""
    resolved = resource_of(schema_name)
    if resolved is None:
        return {}
    _, resource = resolved
    found: dict[int, list[Sides]] = {}
    for start in range(0, len(batch), READ_AHEAD):
        chunk = batch[start : start + READ_AHEAD]
        prepared: list[tuple[int, Sides | None, list[Probe]]] = []
        for event in chunk:
            made = _document_side(event, event.topic.split(".", 2)[2])
            prepared.append((event.id, made[0], made[1]()) if made is not None else (event.id, None, []))
        probes = [probe for _, _, made in prepared for probe in made]
        with _connection() as connection:
            audiences = control().audiences(resource, probes, connection) if probes else []
            if not _tail(connection, chunk[0].id, resource).empty:
                continue
        position = 0
        for event_id, side, own in prepared:
            if side is None:
                found[event_id] = []
                continue
            _settle(side, audiences[position : position + len(own)])
            position += len(own)
            found[event_id] = [side]
    return found


READ_AHEAD = 500  # events whose audiences one statement reads (document_sides)


def _schema_of(event: events.Event) -> str:
    return event.topic.split(".", 2)[1]


def _document_side(event: events.Event, kind: str) -> tuple[Sides, Callable[..., list[Probe]]] | None:
    """The event's document as a :class:`Sides` whose audiences are still to be read, and its probes
    (``probes(plus, minus)``: the tuples a later change undoes); None when it carries no document."""
    schema_name = _schema_of(event)
    payload = event.payload
    document, previous = payload.get("document"), payload.get("previous")
    if not isinstance(document, dict):
        return None
    doc_id = str(document.get("_id"))
    before = previous if kind != "create" and isinstance(previous, dict) else None
    found = Sides(kind, doc_id, before, document if kind != "delete" else None)
    found.gone = document if kind == "delete" else found.gone
    removed = tuple((f"{schema_name}:{doc_id}", s, r) for s, r in payload.get("grants") or ())

    def probes(plus: tuple[live_history.Key, ...] = (), minus: tuple[live_history.Key, ...] = ()) -> list[Probe]:
        if kind == "delete":
            return [Probe(before or {"_id": doc_id}, plus=removed + plus, minus=minus)]
        return [Probe(doc, plus, minus) for doc in (before, document) if doc is not None]

    return found, probes


def _settle(found: Sides, audiences: list[Audience]) -> None:
    """Its audiences before and after, from those of its probes (in their order)."""
    if found.kind == "delete":
        found.readers_before, found.readers_after = audiences[0], Audience()
    elif found.before is None:
        found.readers_before, found.readers_after = Audience(), audiences[0]
    else:
        found.readers_before, found.readers_after = audiences[0], audiences[1]


def _tail(
    connection: sa.Connection, event_id: int, resource: ResourceTable, documents: bool = False
) -> live_history.Tail:
    """What changed after ``event_id`` in who may read the resource's documents: its grants, its deleted
    documents' grants, and the documents and grants of the resources it inherits from; ``documents``: its
    own documents' changes too (an event that does not carry the document reads it, as it was then)."""
    found = control()
    families = found.change_families(resource)
    if documents:
        return live_history.read_tail(connection, event_id, found.grant_change, [*families, resource.family])
    return live_history.read_tail(connection, event_id, found.grant_change, families, [f"{resource.family}.delete"])


def _grant_sides(event: events.Event, schema_name: str) -> list[Sides]:
    """A grant or revoke on ``R:<id>``: the document itself when ``R`` is the schema, and the schema's
    documents that named it in a Relation field when the schema inherits from ``R`` — each as it was when
    the grant committed."""
    grant = control().grant_change(event.topic, event.payload) if resource_of(schema_name) is not None else None
    if grant is None:
        return []

    def moments(tail: live_history.Tail) -> list[Moment]:
        before = live_history.split({**tail.tuples, grant.key: not grant.granted})  # without a grant, with a revoke
        return [(*before, tail.documents), (*tail.changes(), tail.documents)]

    target, target_id = grant.resource.split(":", 1)
    return _access_sides(event, schema_name, target, target_id, moments)


def _related_sides(event: events.Event, kind: str, schema_name: str) -> list[Sides]:
    """A change of a document of ``T`` that the schema's documents inherit a permission from
    (``<field>-><permission>``): the schema's documents naming it, as they were then, with their audiences
    before and after (its field-backed relations changed, or it was deleted with its grants)."""
    _, target, _ = event.topic.split(".", 2)
    payload = event.payload
    document, previous = payload.get("document"), payload.get("previous")
    if kind == "create" or not isinstance(document, dict) or not isinstance(previous, dict):
        return []  # a new document is named by nothing yet
    target_id = str(document.get("_id"))
    removed = tuple((f"{target}:{target_id}", s, r) for s, r in payload.get("grants") or ()) if kind == "delete" else ()

    def moments(tail: live_history.Tail) -> list[Moment]:
        plus, minus = tail.changes()
        then = tail.documents
        before = {**then, target: {**then.get(target, {}), target_id: previous}}
        after = {**then, target: {**then.get(target, {}), target_id: None if kind == "delete" else document}}
        return [(plus + removed, minus, before), (plus, minus, after)]

    return _access_sides(event, schema_name, target, target_id, moments)


# The tuples held although gone now, those left out although held now, and the related documents as
# they were: one side of a change of who may read (see Probe and LiveAudiences.audiences).
Moment = tuple[tuple[live_history.Key, ...], tuple[live_history.Key, ...], live_history.Documents]


def _access_sides(
    event: events.Event,
    schema_name: str,
    target: str,
    target_id: str,
    moments: Callable[[live_history.Tail], list[Moment]],
) -> list[Sides]:
    """The schema's documents that were ``target:target_id`` or named it when ``event`` committed, each
    with its audience before and after the change (``moments``, given what changed since)."""
    resolved = resource_of(schema_name)
    if resolved is None:
        return []
    schema, resource = resolved
    with live_history.snapshot() as connection:
        tail = _tail(connection, event.id, resource, documents=True)
        documents = _naming(connection, tail, schema, resource, target, target_id)
        if not documents:
            return []
        # one read per side: the tuples a probe adds or leaves out also hold for the related documents it
        # inherits from, so before and after must not share one
        was, now = (
            control().audiences(resource, [Probe(doc, plus, minus) for doc in documents], connection, related=related)
            for plus, minus, related in moments(tail)
        )
    return [
        Sides("access", doc["_id"], doc, doc, before, after)
        for doc, before, after in zip(documents, was, now, strict=True)
    ]


def _naming(
    connection: sa.Connection,
    tail: live_history.Tail,
    schema: CompiledSchema,
    resource: ResourceTable,
    target: str,
    target_id: str,
) -> list[dict[str, Any]]:
    """The schema's documents that were ``target:target_id`` itself, or named it in a Relation field the
    schema inherits through, when the tail's event committed (read now, then the tail undone)."""
    refs = []
    if f"database.{target}" in control().change_families(resource):  # the schema inherits from the target
        refs = [ref for ref in resource.relation_fields.values() if ref.target == target]
    if target != schema.name and not refs:
        return []
    conditions = [ref.refers_to(sa.literal(target_id)) for ref in refs]
    if target == schema.name:
        conditions.append(resource.id_column == target_id)
    touched = tail.touched(schema.name)
    if touched:
        conditions.append(resource.id_column.in_(touched))
    rows = connection.execute(sa.select(*columns(schema.documents_table)).where(sa.or_(*conditions))).all()
    now = {str(row[0]): to_document(schema, row) for row in rows}
    documents = []
    for doc_id in sorted(set(now) | set(touched)):
        then = tail.document(schema.name, doc_id, now.get(doc_id))
        if then is None:
            continue
        if (target == schema.name and doc_id == target_id) or any(target_id in ref.ids(then) for ref in refs):
            documents.append(then)
    return documents


def inherits_from(schema_name: str, target: str) -> bool:
    """Whether the schema, under access control, inherits a permission from documents of ``target``."""
    resolved = resource_of(schema_name)
    return (
        resolved is not None
        and target != schema_name
        and f"database.{target}" in control().change_families(resolved[1])
    )


def access_families(schema_name: str) -> list[str]:
    """The families of the events that change who may read the schema's documents: its grants, and the
    documents and grants of the schemas it inherits from (none when it is not under access control)."""
    resolved = resource_of(schema_name)
    if resolved is None:
        return []
    return control().change_families(resolved[1])


def affected_users(event: events.Event) -> list[str]:
    """The users whose teams (and so whose subjects) a team event changed."""
    change = users_service.team_change(event.topic, event.payload)
    return list(change.users) if change is not None else []


def viewer_after(event: events.Event, user_id: str) -> Acting | None:
    """Who ``user_id`` acts as once the team change ``event`` committed: its teams as the change recorded
    them (``teams`` in the payload), else as they are now."""
    change = users_service.team_change(event.topic, event.payload)
    found = access.control()
    if found is None:
        return None
    if change is not None and user_id in change.teams:
        return found.viewer_of(user_id, change.teams[user_id])
    return user_viewer(user_id)


def viewer_at(user_id: str, since: int) -> Acting | None:
    """Who ``user_id`` acted as right after event ``since``: the teams the last team change naming it at
    or before ``since`` recorded; with none kept, as it is now when no later change names it, else a user
    of no team (a team is only ever joined through a recorded change)."""
    found = access.control()
    if found is None:
        return None
    recorded = events.recorded()
    statement = (
        sa.select(recorded.c.event_id, recorded.c.topic, recorded.c.payload)
        .where(recorded.c.family == TEAM_FAMILY)
        .order_by(recorded.c.event_id.is_(None).desc(), recorded.c.event_id.desc())
    )
    later = False
    with _connection() as connection:
        for event_id, topic, text in connection.execute(statement):
            payload = json.loads(text) if isinstance(text, str | bytes) else text
            change = users_service.team_change(topic, payload) if isinstance(payload, dict) else None
            if change is None or user_id not in change.teams:
                continue
            if event_id is None or event_id > since:
                later = True
                continue
            return found.viewer_of(user_id, change.teams[user_id])
    return found.viewer_of(user_id, []) if later else user_viewer(user_id)


def membership_changes(
    schema_name: str, old: Acting, new: Acting, event_id: int
) -> Iterable[tuple[bool, dict[str, Any]]]:
    """``(entered, document)`` for each document of the schema that ``new`` could read and ``old`` could
    not when event ``event_id`` committed (True), or the reverse (False). The candidates are the documents
    whose readability differs now (ONE query, the predicate bound twice) and those whose access changed
    since; each is then judged as it was at the event."""
    resolved = resource_of(schema_name)
    if resolved is None:
        return []
    schema, resource = resolved
    now = sa.func.coalesce(document_access.read_condition(schema, new), sa.false())
    then = visitors.replacement_traverse(now, {}, _rename_parameters)
    table = schema.documents_table
    parameters = {**new.parameters(), **{_OLD + key: value for key, value in old.parameters().items()}}
    with live_history.snapshot() as connection:
        tail = _tail(connection, event_id, resource, documents=True)
        touched = tail.touched(schema_name)
        # readable now as before, but not at the event: the document, its tuples or a related document
        # (one it inherits from) changed since
        since: list[sa.ColumnElement[bool]] = []
        if changed := tail.changed(schema_name):
            since.append(resource.id_column.in_(changed))
        for ref in resource.relation_fields.values():
            since += [ref.refers_to(sa.literal(related)) for related in tail.changed(ref.target)]
        differs = sa.or_(now != then, *since)
        rows = connection.execute(sa.select(*columns(table)).where(differs), parameters).all()
        current = {str(row[0]): to_document(schema, row) for row in rows}
        documents = [
            doc
            for doc_id in sorted(set(current) | set(touched))
            if (doc := tail.document(schema_name, doc_id, current.get(doc_id))) is not None
        ]
        if not documents:
            return []
        plus, minus = tail.changes()
        found = control().audiences(
            resource, [Probe(doc, plus, minus) for doc in documents], connection, related=tail.documents
        )
    changes = []
    for document, audience in zip(documents, found, strict=True):
        could, can = audience.admits(old), audience.admits(new)
        if could != can:
            changes.append((can, document))
    return changes


def _rename_parameters(element: Any, **kw: Any) -> Any:
    if isinstance(element, sa.BindParameter) and element.key in (access.SUBJECTS, access.USERS, access.TEAMS):
        return sa.bindparam(_OLD + element.key, type_=element.type, expanding=element.expanding)
    return None


def control() -> access.AccessControl:
    return document_access.control()


@contextmanager
def _connection() -> Iterator[sa.Connection]:
    """A read connection for one event's queries, given back at once (nothing held between events), through
    the provider: one found dead (PostgreSQL restarted) sends every idle one back to the pool, so the read
    made once more (``live.once_more_if_lost``) gets a fresh connection, not the next dead one."""
    provider = reads.provider()
    connection = provider.open()
    try:
        yield connection
    finally:
        provider.close(connection)
