"""One list request on its way: its statements, its values bound, and the count it asks for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from .. import counts
from .list_statements import ListShape, ListStatements


@dataclass(eq=False)
class Listing:
    shape: ListShape
    statements: ListStatements
    params: dict[str, Any]  # the query's values (and under access the caller's)
    skip: int
    limit: int
    query: tuple[Any, ...]  # the count cache's key of the query, whoever asks it
    broad: bool = False  # under access: a page of this request came from the walk or the unguarded page

    def bound(self) -> dict[str, Any]:
        return {**self.params, "skip": self.skip, "limit": self.limit}

    def told_by_page(self, rows: list[Any]) -> tuple[list[Any], int | None] | None:
        """``(rows, total)`` when the page tells the total without counting: none asked for, or a short
        page; else None."""
        if not self.shape.count:
            return rows, None
        if len(rows) < self.limit and (rows or self.skip == 0):
            return rows, self.skip + len(rows)
        return None

    def counted(self, connection: sa.Connection, query: tuple[Any, ...], changes: Any) -> int:
        """The count of ``query`` (its statement, its values), kept by :mod:`..counts` at ``changes``."""
        name, total = self.shape.schema.documents_table.name, self.statements.total
        return counts.cache().count(name, query, changes, lambda: connection.execute(total, self.params).scalar_one())
