"""Documents and their grants as they were when one event of the log committed.

A live subscriber (and a replay) receives a change when the access in force at that change's commit let it
read the document, whatever has happened since. The event carries the document itself (its field-backed
relations with it); what else decides is read: the document's tuples and the related documents it inherits
from. Those are read as they are now, and the changes recorded after the event (numbered after it, or still
waiting for their number) are undone: the first change of a tuple or of a document after the event says
what it was at the event. The state and the tail are read in one snapshot, so a change is either in both
or in neither.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from trellis import events, reads, statements
from trellis.access import GrantChange

Key = tuple[str, str, str]  # (resource "<Schema>:<id>", subject, relation)
GrantParser = Callable[[str, Mapping[str, Any]], GrantChange | None]


def snapshot() -> AbstractContextManager[sa.Connection]:
    """A read-only transaction whose statements all see one snapshot (``trellis.reads``)."""
    return reads.provider().snapshot()


Documents = Mapping[str, Mapping[str, "dict[str, Any] | None"]]  # schema → id → document (None: none then)


def split(held: Mapping[Key, bool]) -> tuple[tuple[Key, ...], tuple[Key, ...]]:
    """``(plus, minus)`` of tuples known to be held or not: what a :class:`trellis.access.Probe` counts
    although not stored, and leaves out although stored."""
    return tuple(key for key, on in held.items() if on), tuple(key for key, on in held.items() if not on)


@dataclass
class Tail:
    """The changes recorded after one event, oldest first, of the families that decide who may read a
    schema's documents: the first change after the event of a tuple or of a document tells its state at
    the event."""

    tuples: dict[Key, bool] = field(default_factory=dict)  # held at the event, for tuples changed since
    documents: dict[str, dict[str, dict[str, Any] | None]] = field(default_factory=dict)  # schema → id → doc

    def add(self, topic: str, payload: Mapping[str, Any], grant: GrantParser) -> None:
        change = grant(topic, payload)
        if change is not None:
            self.tuples.setdefault(change.key, not change.granted)
            return
        module, name, kind = topic.split(".", 2)
        if module != "database" or kind not in ("create", "update", "delete"):
            return
        document = payload.get("document")
        if not isinstance(document, Mapping):
            return
        doc_id = str(document.get("_id"))
        previous = payload.get("previous")
        self.documents.setdefault(name, {}).setdefault(
            doc_id, dict(previous) if kind != "create" and isinstance(previous, Mapping) else None
        )
        if kind == "delete":  # its tuples went with it, no revoke each (the Database module's own payload)
            for subject, relation in payload.get("grants") or ():
                self.tuples.setdefault((f"{name}:{doc_id}", str(subject), str(relation)), True)

    @property
    def empty(self) -> bool:
        """Nothing that decides who may read changed after the event."""
        return not self.tuples and not self.documents

    def changes(self) -> tuple[tuple[Key, ...], tuple[Key, ...]]:
        """``(plus, minus)``: the tuples held at the event although gone now, and those held now although
        granted after it."""
        return split(self.tuples)

    def document(self, schema: str, doc_id: str, current: dict[str, Any] | None) -> dict[str, Any] | None:
        """The document at the event: as it was before its first change since, else as it is now."""
        changed = self.documents.get(schema, {})
        return changed[doc_id] if doc_id in changed else current

    def touched(self, schema: str) -> list[str]:
        """The ids of the schema's documents created, changed or deleted since the event."""
        return list(self.documents.get(schema, {}))

    def changed(self, schema: str) -> list[str]:
        """The ids of the schema's documents changed since the event, or whose tuples were."""
        prefix = schema + ":"
        granted = {resource[len(prefix) :] for resource, _, _ in self.tuples if resource.startswith(prefix)}
        return sorted(granted | set(self.documents.get(schema, {})))


def read_tail(
    connection: sa.Connection, after: int, grant: GrantParser, families: list[str], topics: Sequence[str] = ()
) -> Tail:
    """The changes of ``families`` (and single ``topics``) recorded after event ``after``, in ``connection``'s
    snapshot; numbered ones first, then those waiting for their number (they will be numbered later).
    ``grant``: the access control's reader of its grant events (``LiveAudiences.grant_change``)."""
    tail = Tail()
    if not families and not topics:
        return tail
    key = (tuple(families), tuple(topics))
    statement = _TAILS.get(key)
    if statement is None:
        statement = _TAILS[key] = _tail_statement(*key)
    for topic, payload in statements.execute_compiled(connection, statement, {"after": after}, _COMPILED):
        tail.add(topic, json.loads(payload) if isinstance(payload, str | bytes) else payload, grant)
    return tail


# Built and compiled once per (families, topics): a statement over the log's two tables, made anew for each
# event, cost more CPU than the audiences it serves.
_TAILS: dict[tuple[tuple[str, ...], tuple[str, ...]], sa.Select[Any]] = {}
_COMPILED: dict[Any, Any] = {}


def _tail_statement(families: tuple[str, ...], topics: tuple[str, ...]) -> sa.Select[Any]:
    recorded = events.recorded(sa.bindparam("after", type_=sa.BigInteger))
    # each a literal of the statement (no expanding IN); a topic with its family: the log's index is
    # (family, event_id), a topic alone would scan the family
    which = [recorded.c.family == sa.literal(family) for family in families]
    which += [
        sa.and_(recorded.c.family == sa.literal(events.family_of(topic)), recorded.c.topic == sa.literal(topic))
        for topic in topics
    ]
    return (
        sa.select(recorded.c.topic, recorded.c.payload)
        .where(sa.or_(*which))
        .order_by(recorded.c.event_id.is_(None), recorded.c.event_id, recorded.c.id)
    )
