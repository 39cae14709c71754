"""A page of documents matching a query, and how many match."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from trellis import reads, statements
from trellis.access import Acting

from .. import document_access
from .. import search as full_text
from ..query import Compiler
from ..registry import CompiledSchema
from .broad_callers import change_key
from .json_text import document_json
from .list_access import read_under_access
from .list_statements import MAX_LITERAL_LIMIT, ListShape
from .listing import Listing
from .statement_cache import dialect


def find(
    schema: CompiledSchema,
    where: Any = None,
    sort: str | None = None,
    skip: int = 0,
    limit: int = 25,
    count: bool = True,
    acting: Acting | None = None,
    search: str | None = None,
) -> tuple[list[dict[str, Any]], int | None]:
    """One page of documents matching ``where`` (a condition tree) and the words of ``search`` (see
    :mod:`..search`), and the total before skip/limit (None when ``count`` is False); with ``acting``, only
    the documents it may read."""
    texts, total = find_json(schema, where, sort, skip, limit, count, acting, search)
    return [json.loads(text) for text in texts], total


def find_json(
    schema: CompiledSchema,
    where: Any = None,
    sort: str | None = None,
    skip: int = 0,
    limit: int = 25,
    count: bool = True,
    acting: Acting | None = None,
    search: str | None = None,
) -> tuple[list[str], int | None]:
    """:func:`find` with each document as JSON text (see :func:`.json_text.document_json`).

    The page and count statements are built once per query shape (:class:`.list_statements.ListShape`); a
    request only binds its values. The page also reads the schema's change number (see :mod:`..counts`), in
    the same round trip. Under access (``acting``) both statements carry the read predicate, and the count is
    remembered per caller's subjects and the change numbers of everything that may change what it reads (the
    schema's documents, its grants, and those of the schemas it inherits from):
    :func:`.list_access.read_under_access` chooses how each is read.

    ``search`` adds :func:`..search.condition` (its query text bound as one more parameter) and, without
    ``sort``, orders by its rank, best first, then by id. Words that leave nothing to look for answer
    an empty page without a query.
    """
    dialect_name = dialect()
    compiler = Compiler(schema, dialect_name)
    shape, values = compiler.prepare(where)
    families = [] if acting is None else document_access.change_families(schema)
    searched = None if search is None else full_text.query_value(schema, search, dialect_name)
    if search is not None and searched is None:
        return [], (0 if count else None)
    first = limit if skip == 0 and limit <= MAX_LITERAL_LIMIT else None
    shaped = ListShape(schema, compiler, shape, sort, search, dialect_name, families, count, first)
    access_key = None if acting is None else document_access.statement_key(schema)
    built = shaped.statements(access_key, acting)
    params = {f"p{index}": value for index, value in enumerate(values)}
    if searched is not None:
        params[full_text.PARAMETER] = searched
    if acting is not None:
        params.update(acting.parameters())
    listing = Listing(shaped, built, params, skip, limit, query=(schema.version, shape, values, searched))

    def read(connection: sa.Connection) -> tuple[list[Any], int | None]:
        if acting is not None:
            return read_under_access(connection, listing, acting, access_key)
        # The driver's cursor, as for a get by id (``bench/results/documents.md#a-list-on-the-drivers-cursor``).
        rows = statements.execute_compiled(connection, listing.statements.page, listing.bound(), schema.statements)
        told = listing.told_by_page(rows)
        if told is not None:
            return told
        return rows, listing.counted(connection, listing.query, change_key(rows[0], families) if rows else None)

    rows, total = reads.reading(read)
    return [document_json(schema, row) for row in rows], total
