"""The statements of a list request, built once per query *shape* (fields, operators, sort, search, under
access or not) on the compiled schema: the page, the count and, under access, the page's other forms that
:func:`.list_access.read_under_access` chooses between."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.sql import util as sql_util

from trellis import events, statements
from trellis.access import Acting

from .. import counts, document_access
from .. import search as full_text
from ..query import Compiler
from ..registry import CompiledSchema
from .json_text import text_columns
from .statement_cache import cached_statement

# A caller's page under access is first looked for among the first WALK × (skip + limit) matches in sort
# order (:func:`walked_page`).
WALK = 2
MAX_LITERAL_LIMIT = 100  # first pages up to this size have their bounds in the SQL (see ListShape.first)


class ListStatements(NamedTuple):
    page: sa.Select  # under access: the deferred join (:func:`deferred_page`)
    total: sa.Select
    walked: sa.Select | None  # under access without search (:func:`walked_page`)
    unguarded: sa.Select | None  # under access: the page without the read predicate, with the change numbers
    few: sa.Select | None  # under access without search: the page for a caller who holds few (:func:`few_page`)


@dataclass(frozen=True, eq=False)
class ListShape:
    """What a list's statements are built from; requests of the same shape share them and bind their values.

    ``first``: the page size of a first page whose bounds are SQL text. PostgreSQL settles on a prepared
    statement's generic plan only when LIMIT and OFFSET are constants, and otherwise plans every run
    (``bench/results/documents.md#a-first-pages-bounds-in-the-sql``)."""

    schema: CompiledSchema
    compiler: Compiler
    shape: Any
    sort: str | None
    search: str | None
    dialect_name: str
    families: list[str]  # under access: the change families the read predicate depends on
    count: bool
    first: int | None

    def statements(self, access_key: Any, acting: Acting | None) -> ListStatements:
        """The statements for callers under ``access_key`` (:func:`.document_access.statement_key`; None:
        without access control, the admin's)."""
        search = self.search is not None
        key = ("find", self.dialect_name, self.shape, self.sort or "", access_key, self.count, search, self.first)
        return cached_statement(self.schema, key, lambda: self._build(acting))

    def _build(self, acting: Acting | None) -> ListStatements:
        schema, dialect_name, search, sort = self.schema, self.dialect_name, self.search, self.sort
        bounds = _bounds(self.first)
        condition = self.compiler.build(self.shape)
        order = self.compiler.order_by(sort)
        if search is not None:
            parameter = sa.bindparam(full_text.PARAMETER, type_=sa.String)
            matching = full_text.condition(schema, search, dialect_name, parameter)
            condition = matching if condition is None else sa.and_(condition, matching)
            if not sort:
                order = [
                    full_text.rank(schema, search, dialect_name, parameter).desc(),
                    schema.documents_table.c.id.asc(),
                ]
        table = schema.documents_table
        # The change numbers key the count cache: a page without a count does not read them.
        numbers = [counts.CountCache.change_column(schema.name), *(events.change_number(f) for f in self.families)]
        wanted = [*text_columns(table, dialect_name), *(numbers if self.count else [])]
        walked = unguarded = few = None
        page = sa.select(*wanted)
        if condition is not None:
            page = page.where(condition)
        page = page.order_by(*order).offset(bounds.skip).limit(bounds.limit)
        if acting is not None:
            # The page without the read predicate, for a caller known to read everything; it reads the
            # change numbers the hint is checked against, with a count or without.
            unguarded = (page if self.count else page.add_columns(*numbers)).execution_options(**statements.PREPARE)
            readable = document_access.read_condition(schema, acting)
            if search is None:
                walked = walked_page(table, condition, readable, order, wanted, bounds)
                held = document_access.read_condition(schema, acting, membership=True)
                few = few_page(table, held if condition is None else sa.and_(condition, held), order, wanted, bounds)
            condition = readable if condition is None else sa.and_(condition, readable)
            page = deferred_page(table, condition, order, wanted, bounds)
        total = sa.select(sa.func.count()).select_from(table)
        if condition is not None:
            total = total.where(condition)
        if acting is None:
            return ListStatements(
                page.execution_options(**statements.PREPARE),
                total.execution_options(**statements.PREPARE),
                None,
                None,
                None,
            )
        # Under access the deferred page and the count are planned at every run: prepared, PostgreSQL settles
        # on a generic plan after five runs, and the plan a broad caller leaves is wrong for a narrow one. The
        # walked page reads at most ``walk`` rows, so its generic plan serves every caller
        # (``bench/results/documents.md#pages-under-access-prepared-or-planned-each-run``).
        return ListStatements(
            page.execution_options(**statements.UNPREPARED),
            total.execution_options(**statements.UNPREPARED),
            None if walked is None else walked.execution_options(**statements.PREPARE),
            unguarded,
            None if few is None else few.execution_options(**statements.UNPREPARED),
        )


class Bounds(NamedTuple):
    skip: sa.ColumnElement[int]
    limit: sa.ColumnElement[int]
    walk: sa.ColumnElement[int]


def _bounds(first: int | None) -> Bounds:
    """A page statement's OFFSET, LIMIT and walk (:func:`walked_page`): bound parameters (``skip``,
    ``limit``, ``walk``), or for a first page of ``first`` rows constants written into the SQL."""
    if first is None:
        return Bounds(sa.bindparam("skip"), sa.bindparam("limit"), sa.bindparam("walk"))
    return Bounds(sa.literal_column("0"), sa.literal_column(str(first)), sa.literal_column(str(WALK * first)))


def deferred_page(
    table: sa.Table, condition: Any, order: list[sa.ColumnElement], wanted: list[sa.ColumnElement], bounds: Bounds
) -> sa.Select:
    """A page under access as a deferred join: the walk along the sort order selects ids only (an
    index-only scan of the sort index, each row's read predicate an index-only probe of the tuples), and
    the page's rows are fetched by id after, so a row the predicate drops is never read from the heap
    (``bench/results/documents.md#the-deferred-join``). ``n`` keeps the walk's order for the outer query."""
    walk = sa.select(table.c.id, sa.func.row_number().over(order_by=order).label("n"))
    if condition is not None:
        walk = walk.where(condition)
    ids = walk.order_by(*order).offset(bounds.skip).limit(bounds.limit).subquery("page_ids")
    return sa.select(*wanted).join_from(table, ids, table.c.id == ids.c.id).order_by(ids.c.n)


def few_page(
    table: sa.Table, condition: Any, order: list[sa.ColumnElement], wanted: list[sa.ColumnElement], bounds: Bounds
) -> sa.Select:
    """A page under access for a caller whose grants name few documents (``condition`` holds the read
    predicate's membership form): the deferred join's walk, each row tested against the set of documents
    the caller's grants name, built once per statement, instead of probing the tuple index once per walked
    row (at 2% readable ~50 probes per row returned;
    ``bench/results/peer.md#a-narrow-callers-page-by-membership``)."""
    return deferred_page(table, condition, order, wanted, bounds)


def walked_page(
    table: sa.Table,
    condition: Any,
    readable: sa.ColumnElement[bool],
    order: list[sa.ColumnElement],
    wanted: list[sa.ColumnElement],
    bounds: Bounds,
) -> sa.Select:
    """A page under access for a caller who may read most of what matches: the first ``walk`` matches in
    sort order, their rows read directly (an index scan that stops after ``walk`` rows), then the read
    predicate on each and the page. When it returns a whole page, that page is exact (the readable
    rows among the first matches are the first readable matches); otherwise the caller reads too little
    of this schema for it and :func:`deferred_page` runs. Cheaper than the deferred join for a broad
    caller, and a failed walk is cheap beside the join a narrow caller needs anyway
    (``bench/results/documents.md#the-walked-page``)."""
    walk = sa.select(table)
    if condition is not None:
        walk = walk.where(condition)
    walked = walk.order_by(*order).limit(bounds.walk).subquery("walk")
    adapt = sql_util.ClauseAdapter(walked).traverse
    return (
        sa.select(*(adapt(column) for column in wanted))
        .where(adapt(readable))
        .order_by(*(adapt(term) for term in order))
        .offset(bounds.skip)
        .limit(bounds.limit)
    )
