"""The document routes' operations called from Python as a given caller: what server-side code (the
Functions module's ``ctx.db``) reads and writes with. The same gate, permissions, access control,
validation and triggers as the REST routes, and documents as they show them; writes join the session's
transaction, which the caller commits (or rolls back with everything else it wrote)."""

from __future__ import annotations

from typing import Any

from trellis.credentials import Identity

from . import document_access, documents
from .crud_gate import authorize_as, check_permission
from .query import parse_where
from .registry import CompiledSchema, Snapshot, snapshot_having

MAX_LIMIT = 1000


class CallerDocuments:
    """Documents as ``identity`` (None: anonymous) may use them."""

    def __init__(self, identity: Identity | None) -> None:
        self.identity = identity

    def get(self, schema_name: str, doc_id: str) -> dict[str, Any]:
        _, schema, acting = self._open(schema_name, "read")
        return documents.get(schema, doc_id, acting)

    def find(
        self, schema_name: str, where: dict[str, Any] | None = None, sort: str | None = None, limit: int = 25
    ) -> list[dict[str, Any]]:
        _, schema, acting = self._open(schema_name, "read")
        if not isinstance(limit, int) or isinstance(limit, bool) or not 0 <= limit <= MAX_LIMIT:
            raise ValueError(f"limit must be a whole number from 0 to {MAX_LIMIT}")
        return documents.find(schema, parse_where(where), sort, 0, limit, False, acting)[0]

    def count(self, schema_name: str, where: dict[str, Any] | None = None) -> int:
        _, schema, acting = self._open(schema_name, "read")
        return documents.find(schema, parse_where(where), None, 0, 0, True, acting)[1] or 0

    def create(self, schema_name: str, data: dict[str, Any]) -> dict[str, Any]:
        snap, schema, acting = self._open(schema_name, "create")
        check_permission(schema, "create")
        return documents.create(snap, schema, [data], acting=acting)[0]

    def update(self, schema_name: str, doc_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        snap, schema, acting = self._open(schema_name, "update")
        return documents.patch(snap, schema, doc_id, changes, acting)

    def delete(self, schema_name: str, doc_id: str) -> None:
        _, schema, acting = self._open(schema_name, "delete")
        check_permission(schema, "delete")
        documents.delete(schema, doc_id, acting)

    def _open(self, name: str, operation: str) -> tuple[Snapshot, CompiledSchema, Any]:
        snap = snapshot_having(lambda s: s.document_schema(name) is not None)
        schema = snap.document_schema(name)
        authorize_as(self.identity, schema, operation, name)
        assert schema is not None  # authorize_as answered 404 otherwise
        return snap, schema, document_access.acting(schema, self.identity)
