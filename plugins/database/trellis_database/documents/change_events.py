"""The event a document write records (``database.<Schema>.<kind>``), in the write's transaction: what live
subscriptions, webhooks and the cached list counts (:mod:`..counts`) learn of the change from."""

from __future__ import annotations

from typing import Any, cast

from trellis import events

from .. import counts
from ..registry import CompiledSchema
from .json_text import serialise


def record(
    kind: str,
    schema: CompiledSchema,
    docs: list[dict[str, Any]] | list[str],
    previous: list[dict[str, Any]] | None = None,
    grants: dict[str, list[list[str]]] | None = None,
) -> None:
    """Every document write made in a transaction passes here, once its statement has run (on PostgreSQL a
    single-document write records its event in its own statement instead: ``events.recorded_by``).

    ``kind`` is ``create``, ``update`` or ``delete``; ``docs`` are the documents written (their ids
    for a delete); ``previous`` the documents as they were (updates and deletes); ``grants`` the tuples
    a deletion removed (under access control), by id. The change is recorded in the event log
    (``database.<Schema>.<kind>``) in the same transaction; that event is also what tells cached list
    counts the schema changed (see :mod:`..counts`).
    """
    events.record_many(f"{counts.family(schema.name)}.{kind}", _event_payloads(kind, docs, previous, grants))


def _event_payloads(
    kind: str,
    docs: list[dict[str, Any]] | list[str],
    previous: list[dict[str, Any]] | None,
    grants: dict[str, list[list[str]]] | None = None,
) -> list[str]:
    """``{"document": <after>, "previous": <before>}`` as JSON text; a deleted document is ``{"_id"}``,
    and a deleted document under access control also carries ``"grants": [[subject, relation], …]``,
    the tuples removed with it: the only trace left of who could read it, which live subscriptions need
    to send its ``delete`` to those readers only."""
    if kind == "delete":  # ``docs`` holds ids
        written: list[dict[str, Any]] = [{"_id": doc_id} for doc_id in cast("list[str]", docs)]
    else:
        written = cast("list[dict[str, Any]]", docs)
    if previous is None:
        return [created_payload(serialise(doc)) for doc in written]
    tail = [',"grants":' + serialise(grants.get(doc["_id"], [])) + "}" if grants else "}" for doc in written]
    return [
        '{"document":' + serialise(doc) + ',"previous":' + serialise(before) + end
        for doc, before, end in zip(written, previous, tail, strict=True)
    ]


def created_payload(document_text: str) -> str:
    """A create's (or a deletion's) event payload around the document's JSON text."""
    return '{"document":' + document_text + "}"
