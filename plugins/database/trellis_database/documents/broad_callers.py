"""Whether a caller under access control may read every document of a schema, asked once per caller and
change numbers: such a caller's counts are the admin's, and its pages may be read without the read
predicate (:mod:`.list_access`)."""

from __future__ import annotations

import threading
from typing import Any

import sqlalchemy as sa

from trellis import events
from trellis.access import Acting

from .. import counts, document_access
from ..registry import CompiledSchema
from .caller_hints import CallerHints
from .statement_cache import cached_statement, dialect

# Questions of reads_everything being asked in this process, and how long another request for the same
# answer waits for it: a new change number sends every busy connection to ask the same costly question at
# once, where one is enough (``bench/results/documents.md#one-question-at-a-time``).
_ASKING: dict[Any, threading.Event] = {}
ASK_WAIT_SECONDS = 10.0


def everything_query(schema: CompiledSchema, acting: Acting, access_key: Any) -> tuple[Any, ...]:
    """The key of :func:`reads_everything`'s answer for ``acting`` (``access_key``:
    :func:`.document_access.statement_key`)."""
    return ("reads everything", schema.version, access_key, acting.subjects)


def change_key(row: Any, families: list[str]) -> Any:
    """The change numbers a page row carries after the document's five columns: the schema's alone, or
    with those of ``families``, joined by dots."""
    return row[5] if not families else ".".join(str(n) for n in row[5:])


def reads_everything(
    connection: sa.Connection,
    schema: CompiledSchema,
    acting: Acting,
    access_key: Any,
    families: list[str],
    changes: Any,
) -> bool:
    """Whether ``acting`` may read every document of ``schema`` at the change numbers ``changes`` (those of
    the schema and of ``families``, read by the page; ``access_key``: :func:`.document_access.statement_key`):
    then its count of any query is the admin's, which is counted without the read predicate and kept for
    every caller alike, and its next pages may be read without the predicate.

    A count under access joins the caller's tuples with the matches, far dearer than the admin's for a
    caller who may read everything (``bench/results/documents.md#a-broad-callers-count``), and each query and
    change number is counted again. This asks once per caller and change numbers — both counts of the whole
    table, and the change numbers, in one statement, one snapshot — and keeps the answer beside the counts
    (:mod:`..counts`). It is kept only when the statement read the same change numbers as the page: the
    answer is then true of that very moment, so a write that commits in between (a grant revoked, a
    document made) can never stand for an earlier one. A true answer is also kept in this process as the
    caller's page hint (:func:`broad_hints`)."""
    query = everything_query(schema, acting, access_key)
    if broad_hints(schema).get(query) == str(changes):
        return True  # this process found it so at these very numbers: no lookup
    cache = counts.cache()
    known = cache.known(schema.documents_table.name, query, changes)
    if known is not None:
        note_broad(schema, query, changes, bool(known))
        return bool(known)
    asked, mine = (schema.documents_table.name, query, str(changes)), threading.Event()
    answer = _ASKING.setdefault(asked, mine)  # one step: two threads cannot both think they ask first
    if answer is not mine:  # another request of this process is asking: wait for its answer
        answer.wait(ASK_WAIT_SECONDS)
        return bool(cache.known(schema.documents_table.name, query, changes))  # none kept: count as the caller
    try:
        statement = _everything_statement(schema, acting, access_key, families)
        readable, total, *numbers = connection.execute(statement, acting.parameters()).one()
        if ".".join(str(n) for n in numbers) != str(changes):
            return False  # a write came between the page and this statement: count as the caller
        cache.keep(schema.documents_table.name, query, changes, int(readable == total))
        note_broad(schema, query, changes, readable == total)
        return readable == total
    finally:
        del _ASKING[asked]
        mine.set()


def _everything_statement(schema: CompiledSchema, acting: Acting, access_key: Any, families: list[str]) -> sa.Select:
    """:func:`reads_everything`'s statement: the caller's count of the whole table, the admin's, and the
    change numbers of the schema and of ``families`` (built once per definitions' version)."""

    def build() -> sa.Select:
        table = schema.documents_table
        readable = document_access.read_condition(schema, acting)
        numbers = [counts.CountCache.change_column(schema.name), *(events.change_number(f) for f in families)]
        return sa.select(
            sa.select(sa.func.count()).select_from(table).where(readable).scalar_subquery(),
            sa.select(sa.func.count()).select_from(table).scalar_subquery(),
            *numbers,
        )

    return cached_statement(schema, ("everything", dialect(), access_key), build)


def broad_hints(schema: CompiledSchema) -> CallerHints:
    """The change numbers at which callers last read every document of ``schema``, as this process found
    (:func:`reads_everything`): hints that the unguarded page checks against the page it reads. Kept in the
    schema's statement cache, so any change to the schemas (one this schema inherits from included) drops
    them; each lives ``counts.TTL_SECONDS`` from when it was noted, which bounds writes made behind
    Trellis's back (they record no event) as the counts' expiry does."""
    hints = schema.statements.get("broad callers")
    if hints is None:
        hints = schema.statements["broad callers"] = CallerHints()
    return hints


def note_broad(schema: CompiledSchema, query: tuple[Any, ...], changes: Any, everything: bool) -> None:
    """Keep (or drop) the hint that the caller of ``query`` reads everything at ``changes``."""
    if everything:
        broad_hints(schema).put(query, str(changes), counts.TTL_SECONDS)
    else:
        broad_hints(schema).drop(query)
