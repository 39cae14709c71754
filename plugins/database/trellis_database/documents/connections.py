"""Which connection a write's statement runs on: the session's transaction, or alone on the request's
autocommit connection.

PostgreSQL: a single-document write is ONE statement. Its data-modifying CTEs write the document, its event
row (and the family's change counter), and under access control its owner tuple (create) or the removal of
its tuples (delete): all of it commits or none of it, as PostgreSQL runs a statement atomically. When the
session has no transaction open, the statement runs on the request's autocommit connection
(:mod:`trellis.reads`) and commits on its own: one round trip, no BEGIN/COMMIT (:func:`commits_alone`).
Work that needs several statements (a relation check, several documents, a caller that wrote already or
opened a transaction) runs the same statement in the session's transaction, which the caller commits.
SQLite keeps its transaction (in-process: no round trip to save) and records its events afterwards
(:func:`.change_events.record`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trellis import db, reads, statements

from ..registry import CompiledSchema
from .statement_cache import cached_statement, dialect


def in_transaction(statement: Any, parameters: Any = None) -> Any:
    """Run a statement in the session's transaction (writes, and reads that belong to a write)."""
    return db.session.connection().execute(statement, parameters)


def write_in_transaction(
    schema: CompiledSchema, key: Any, build: Callable[[], Any], parameters: dict[str, Any]
) -> list[Any]:
    """One row's write statement (built once per schema version) in the session's transaction; its
    ``RETURNING`` rows. See :func:`trellis.statements.execute_compiled` for why it skips SQLAlchemy's execution."""
    return statements.execute_compiled(
        db.session.connection(), cached_statement(schema, key, build), parameters, schema.statements
    )


def commits_alone() -> bool:
    """Whether a single-document write may commit on its own: PostgreSQL, and no transaction open in the
    session (nothing read or written before it must commit with it). The caller's ``db.session.commit()``
    then has nothing to do."""
    return dialect() == "postgresql" and not db.in_transaction()


def execute_write(
    schema: CompiledSchema, key: Any, build: Callable[[], Any], parameters: dict[str, Any], alone: bool
) -> list[Any]:
    """Run a write statement built once per schema version and ``key``: on the autocommit connection
    when ``alone``, else in the session's transaction. Its rows (``RETURNING``)."""
    connection = reads.connection() if alone else db.session.connection()
    return statements.execute_compiled(connection, cached_statement(schema, key, build), parameters, schema.statements)
