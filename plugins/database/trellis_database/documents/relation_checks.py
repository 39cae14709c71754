"""Relation values: the ids a document names, and the check that each names a document the writer may
name, read in the write's transaction."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from trellis.access import Acting
from trellis.errors import bad_request
from trellis_authentication import service as users_service

from .. import document_access
from ..registry import CompiledSchema, Snapshot
from .connections import in_transaction
from .statement_cache import cached_statement


def check_relations(
    snapshot: Snapshot,
    schema: CompiledSchema,
    docs: list[dict[str, Any]],
    prefix: str = "",
    acting: Acting | None = None,
    doc_ids: list[str] | None = None,
) -> None:
    """Every Relation value must name an existing document of the related schema (400 otherwise). A target
    under access control must also be one the writer may read (:func:`document_access.relation_reader`),
    and a ``Team`` one it belongs to (:func:`document_access.nameable_teams`), else it is the very 400 of
    a missing id: a write must neither tell which hidden ids exist nor put a
    document into the lists of those who read a document the writer cannot. ``doc_ids`` (updates, in the
    order of ``docs``): a hidden id the document already holds in that field may stay (a PUT sends it back).
    One query per related schema, reading existence and readability together (users and teams: one for
    both)."""
    wanted: dict[str, set[str]] = {}
    for doc in docs:
        for name, field in schema.fields.items():
            if field.type == "Relation" and name in doc:
                wanted.setdefault(field.target, set()).update(_named(doc, name, field.array))
    missing: dict[str, set[str]] = {}
    hidden: dict[str, set[str]] = {}
    # the users and teams named that exist: one round trip for both
    people = users_service.existing_user_and_team_ids(sorted(wanted.get("User", ())), sorted(wanted.get("Team", ())))
    for model, ids in wanted.items():
        target = snapshot.document_schema(model)
        found: set[str] = set()
        if model == "User" and ids:
            found = people[0]
        elif model == "Team" and ids:
            found = people[1]
            teams = document_access.nameable_teams()
            hidden[model] = found - teams if teams is not None else set()
        elif target is not None and ids:
            found, hidden[model] = _existing_and_hidden(target, ids, document_access.relation_reader(target, acting))
        missing[model] = ids - found
    held = _stored_relations(schema, doc_ids) if doc_ids and any(hidden.values()) else {}
    errors: dict[str, list[str]] = {}
    for index, doc in enumerate(docs):
        for name, field in schema.fields.items():
            if field.type == "Relation" and name in doc:
                kept = held.get((doc_ids[index], name), set()) if doc_ids else set()
                refused = missing.get(field.target, set()) | (hidden.get(field.target, set()) - kept)
                gone = [i for i in _named(doc, name, field.array) if i in refused]
                if gone:
                    key = f"{prefix}{index}.{name}" if prefix else name
                    errors[key] = [f"No {field.model} document with id {gone[0]!r}"]
    if errors:
        raise bad_request("A related document does not exist", errors)


def has_relations(schema: CompiledSchema, values: list[dict[str, Any]]) -> bool:
    """Whether the documents name related documents: their check reads, in the write's transaction."""
    return any(field.type == "Relation" and name in doc for doc in values for name, field in schema.fields.items())


def relation_ids(docs: list[dict[str, Any]], name: str, array: bool) -> set[str]:
    """The ids the documents name in their Relation field ``name`` (stored or populated)."""
    ids: set[str] = set()
    for doc in docs:
        value = doc.get(name)
        if array and isinstance(value, list):
            ids.update(v for v in value if isinstance(v, str))
        elif isinstance(value, str):
            ids.add(value)
    return ids


def _named(doc: dict[str, Any], name: str, array: bool) -> list[str]:
    """The ids a validated document's Relation field names."""
    return doc[name] if array else [doc[name]]


def _existing_and_hidden(target: CompiledSchema, ids: set[str], reader: Acting | None) -> tuple[set[str], set[str]]:
    """(the ids of ``target`` that exist, those of them ``reader`` may not read), read in the write's transaction."""
    table = target.documents_table
    wanted: sa.BindParameter[Any] = sa.bindparam("ids", expanding=True)
    if reader is None:
        statement = cached_statement(target, "existing", lambda: sa.select(table.c.id).where(table.c.id.in_(wanted)))
        return set(in_transaction(statement, {"ids": sorted(ids)}).scalars()), set()

    def build() -> sa.Select:  # once per schema and definitions' version: the predicate is costly to build
        readable = sa.case((document_access.read_condition(target, reader), 1), else_=0)
        return sa.select(table.c.id, readable).where(table.c.id.in_(wanted))

    statement = cached_statement(target, ("existing", document_access.statement_key(target)), build)
    rows = in_transaction(statement, {"ids": sorted(ids), **reader.parameters()}).all()
    return {row[0] for row in rows}, {row[0] for row in rows if not row[1]}


def _stored_relations(schema: CompiledSchema, doc_ids: list[str]) -> dict[tuple[str, str], set[str]]:
    """``(document id, field) → ids`` the stored documents name in their Relation fields."""
    table = schema.documents_table
    rows = in_transaction(sa.select(table.c.id, table.c.data).where(table.c.id.in_(sorted(set(doc_ids))))).all()
    held: dict[tuple[str, str], set[str]] = {}
    for doc_id, data in rows:
        stored = json.loads(data) if isinstance(data, str) else data
        for name, field in schema.fields.items():
            if field.type == "Relation":
                held[(doc_id, name)] = set(relation_ids([stored], name, field.array))
    return held
