"""A list's page and count for a caller under access control: which statement reads them."""

from __future__ import annotations

import math
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import REGCLASS

from trellis import events, statements
from trellis.access import Acting

from .. import counts, document_access
from ..registry import CompiledSchema
from .broad_callers import broad_hints, change_key, everything_query, note_broad, reads_everything
from .caller_hints import CallerHints
from .list_statements import WALK
from .listing import Listing
from .statement_cache import cached_statement

MAX_WALKED_PAGE = 100  # deeper pages take the deferred join at once
NARROW_SECONDS = 60.0
# Callers whose last walked page came back short, per schema (the page is the same whichever statement
# finds it): their next pages go to the deferred join at once, or to the membership page when their grants
# name few documents (the hint's value is then HOLDS_FEW).
narrow_callers = CallerHints()
HOLDS_FEW = "holds few"
# How many documents "few" is. Building the caller's set costs per document it names; the deferred join
# costs a tuple-index probe per walked row, ~rows ÷ named per row returned: they break even near
# sqrt(TRADE × rows) named (~4,500 of 100,000; ``bench/results/peer.md#a-narrow-callers-page-by-membership``).
FEW = 10_000  # at most: a set this size is built in a few milliseconds and fits PostgreSQL's hash memory
MIN_FEW = 1_000  # at least: small tables
TRADE = 200


def read_under_access(
    connection: sa.Connection, listing: Listing, acting: Acting, access_key: Any
) -> tuple[list[Any], int | None]:
    """The page ``acting`` may read and its total (None when no count is asked); ``access_key``:
    :func:`.document_access.statement_key`. Every strategy reads the same rows; they differ in cost, by how
    much of what matches the caller may read.

    The page, from the first of these that applies:

    - **unguarded** (:func:`_unguarded_page`): this process last found the caller reading every document of
      the schema (:func:`.broad_callers.reads_everything`), and the page's own change numbers show nothing
      changed since, or the answer shared in :mod:`..counts` says so at them (the event log on). The page is
      read without the read predicate, at the admin's cost.
    - **walked** (:func:`.list_statements.walked_page`): no search, the page ends within the first
      ``MAX_WALKED_PAGE`` matches, and the caller's last walk did not come back short (a hint kept
      ``NARROW_SECONDS``). The first ``WALK`` × (skip + limit) matches are read with the predicate; a whole
      page among them is the page.
    - **deferred join** (:func:`.list_statements.deferred_page`): otherwise, and after a short walk. When it
      finds more than the walk did, the caller is narrow and its next pages come here at once (a page short
      because the matches ran out is no sign of that:
      ``bench/results/documents.md#a-short-page-is-no-sign-of-a-narrow-caller``).
    - **membership** (:func:`.list_statements.few_page`): instead of the deferred join for a narrow caller
      whose grants name few documents (:func:`_holds_few`, asked when its hint is made).

    The total, from the first of these that applies:

    - the page tells it: no count asked, or a short page;
    - the **admin's count**: the page came from the walk or was unguarded (the caller reads most of the
      first matches: narrow callers never ask) and the caller reads every document at the page's change
      numbers: counted without the predicate and shared by every such caller;
    - the **caller's count** with the predicate, cached per its subjects and those change numbers.
    """
    rows = _page(connection, listing, acting, access_key)
    told = listing.told_by_page(rows)
    if told is not None:
        return told
    schema, families = listing.shape.schema, listing.shape.families
    changes = change_key(rows[0], families) if rows else None
    cache = counts.cache()
    if listing.broad and cache.usable(changes):
        if reads_everything(connection, schema, acting, access_key, families, changes):
            admin_total = listing.shape.statements(None, None).total
            caller_names = acting.parameters().keys()
            unbound = {k: v for k, v in listing.params.items() if k not in caller_names}
            return rows, cache.count(
                schema.documents_table.name,
                listing.query,
                rows[0][5],
                lambda: connection.execute(admin_total, unbound).scalar_one(),
            )
    return rows, listing.counted(connection, (*listing.query, access_key, acting.subjects), changes)


def _page(connection: sa.Connection, listing: Listing, acting: Acting, access_key: Any) -> list[Any]:
    """The page, by :func:`read_under_access`'s first strategy that applies; notes ``listing.broad``."""
    schema, built, skip, limit = listing.shape.schema, listing.statements, listing.skip, listing.limit
    bound = listing.bound()
    if built.unguarded is not None:
        everything = everything_query(schema, acting, access_key)
        rows = _unguarded_page(connection, listing, everything, built.unguarded, bound)
        if rows is not None:
            listing.broad = True
            return rows
    caller = (schema.documents_table.name, acting.subjects)
    narrow = narrow_callers.get(caller)
    if built.walked is not None and skip + limit <= MAX_WALKED_PAGE and narrow is None:
        rows = statements.execute_compiled(
            connection, built.walked, {**bound, "walk": WALK * (skip + limit)}, schema.statements
        )
        if len(rows) == limit:
            listing.broad = True
            return rows
        found = statements.execute_compiled(connection, built.page, bound, schema.statements)
        if len(found) > len(rows):
            # Too few readable rows near the front: the deferred join finds the page, and the caller's
            # next pages go there at once, or to the membership page if it holds few documents. (When the
            # matches ran out, the walk's page was the page.)
            narrow_callers.put(caller, HOLDS_FEW if _holds_few(connection, listing, acting) else True, NARROW_SECONDS)
        return found
    if narrow == HOLDS_FEW and built.few is not None:
        return statements.execute_compiled(connection, built.few, bound, schema.statements)
    return statements.execute_compiled(connection, built.page, bound, schema.statements)


def _holds_few(connection: sa.Connection, listing: Listing, acting: Acting) -> bool:
    """Whether the caller's grants name few of the schema's documents (see ``FEW``): a count that stops at
    ``FEW``, beside the table's size (PostgreSQL's estimate; SQLite counts)."""
    schema = listing.shape.schema
    key = ("holds few", document_access.statement_key(schema))
    counted = cached_statement(schema, key, lambda: _named_and_rows(schema, connection.dialect.name))
    named_count, rows_count = connection.execute(counted, acting.parameters()).one()
    return named_count <= min(FEW, max(MIN_FEW, math.sqrt(TRADE * max(rows_count or 0, 0))))


def _named_and_rows(schema: CompiledSchema, dialect_name: str) -> sa.Select[Any]:
    """How many documents the caller's grants name, up to ``FEW`` + 1, and how many rows the table has."""
    named = document_access.held(schema).limit(FEW + 1).subquery("named")
    table = schema.documents_table
    rows: sa.Select[Any]
    if dialect_name == "postgresql":
        rows = sa.select(sa.column("reltuples")).select_from(sa.table("pg_class"))
        rows = rows.where(sa.column("oid") == sa.cast(sa.literal(table.name), REGCLASS))
    else:
        rows = sa.select(sa.func.count()).select_from(table)
    return sa.select(sa.select(sa.func.count()).select_from(named).scalar_subquery(), rows.scalar_subquery())


def _unguarded_page(
    connection: sa.Connection, listing: Listing, query: tuple[Any, ...], page: sa.Select, bound: dict[str, Any]
) -> list[Any] | None:
    """The page read without the read predicate, for a caller that this process last found reading every
    document of the schema (``query``: :func:`.broad_callers.everything_query`); None when that cannot be
    shown for the page's own snapshot, and the caller's page is to be read with the predicate.

    The page reads the change numbers of the schema and of the families the predicate depends on, as the
    predicated page does. When they are the ones at which the caller read everything, or ones at which the
    shared answer (:mod:`..counts`) says so, nothing the predicate reads has changed since: it is true of
    every row, so this page is the caller's, at the admin's cost
    (``bench/results/documents.md#the-unguarded-page``). A page that comes back empty is the caller's too
    (it reads a subset). After a write the first page is read twice (this one, then the predicated one),
    until the count path asks the question again."""
    schema = listing.shape.schema
    known = broad_hints(schema).get(query)
    if known is None or not events.enabled():
        return None
    rows = statements.execute_compiled(connection, page, bound, schema.statements)
    if not rows:
        return rows
    changes = change_key(rows[0], listing.shape.families)
    if str(changes) == known:
        return rows
    answer = counts.cache().known(schema.documents_table.name, query, changes)
    note_broad(schema, query, changes, bool(answer))
    return rows if answer else None
