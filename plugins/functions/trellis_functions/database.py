"""``ctx.db``: the Database module's documents as the function's caller may use them (the same rules, the
same triggers as a REST request), or as the administrator (``as_admin()``). Writes join the transaction
of the work that runs the function: a before-trigger's write commits with the request's, or not at all."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from trellis import db
from trellis.credentials import Identity
from trellis_database.as_caller import CallerDocuments

from .callers import push_identity

T = TypeVar("T")


class Db:
    def __init__(self, identity: Identity | None) -> None:
        self._identity = identity
        self._documents = CallerDocuments(identity)

    def as_admin(self) -> Db:
        return Db(Identity("admin"))

    def get(self, schema: str, id: str) -> dict[str, Any]:
        return self._as_caller(lambda: self._documents.get(schema, id))

    def find(
        self, schema: str, where: dict[str, Any] | None = None, sort: str | None = None, limit: int = 25
    ) -> list[dict[str, Any]]:
        return self._as_caller(lambda: self._documents.find(schema, where, sort, limit))

    def count(self, schema: str, where: dict[str, Any] | None = None) -> int:
        return self._as_caller(lambda: self._documents.count(schema, where))

    def create(self, schema: str, data: dict[str, Any]) -> dict[str, Any]:
        return self._as_caller(lambda: self._documents.create(schema, data))

    def update(self, schema: str, id: str, changes: dict[str, Any]) -> dict[str, Any]:
        return self._as_caller(lambda: self._documents.update(schema, id, changes))

    def delete(self, schema: str, id: str) -> None:
        self._as_caller(lambda: self._documents.delete(schema, id))

    def _as_caller(self, work: Callable[[], T]) -> T:
        """Triggers of the writes made here act as this caller, one level deeper. The session's transaction
        is begun first, so that what is read and written here commits with the work that runs the function
        (a before-trigger's write with the request's), or not at all."""
        db.session.connection()
        done = push_identity(self._identity)
        try:
            return work()
        finally:
            done()
