"""Documents: validation against the schema, reads (Core rows, no ORM) and writes.

A document is ``{"_id", <fields>…, "createdAt", "updatedAt", "__v"}``; the fields are stored in ``data``,
the rest in columns. Its modules, in the order a request meets them:

- :mod:`.validation`, :mod:`.uniqueness`, :mod:`.relation_checks`: a body checked against the schema;
- :mod:`.by_id`: a document by its id; :mod:`.lists`: a page and its count, through
  :mod:`.list_statements` and, under access control, :mod:`.list_access` (with :mod:`.broad_callers` and
  :mod:`.caller_hints`); :mod:`.populate`: related documents in place of their ids;
- :mod:`.create`, :mod:`.update`, :mod:`.delete`, :mod:`.matching`: the writes, on the connection
  :mod:`.connections` chooses, recording :mod:`.change_events`, guarded by :mod:`.write_access`;
- underneath: :mod:`.json_text` (a row ↔ its JSON), :mod:`.json_sql` (the same JSON made by PostgreSQL in a
  write), :mod:`.statement_cache` (statements built once per schema version and shape).
"""

from __future__ import annotations

from .by_id import get, get_json
from .create import MAX_MANY, create, create_json
from .delete import delete
from .json_text import columns, document_json, project, serialise, stamp, text_columns, to_document
from .lists import find, find_json
from .matching import delete_matching, denied_matching, locked_matching
from .populate import populate
from .relation_checks import check_relations
from .statement_cache import cached_statement, dialect
from .uniqueness import unique_conflict
from .update import patch, update, update_json
from .validation import SERVER_FIELDS, validate

# The names the aggregates module has imported from here since before the package.
_stamp = stamp
_statement = cached_statement

__all__ = [
    "MAX_MANY",
    "SERVER_FIELDS",
    "cached_statement",
    "check_relations",
    "columns",
    "create",
    "create_json",
    "delete",
    "delete_matching",
    "denied_matching",
    "dialect",
    "document_json",
    "find",
    "find_json",
    "get",
    "get_json",
    "locked_matching",
    "patch",
    "populate",
    "project",
    "serialise",
    "stamp",
    "text_columns",
    "to_document",
    "unique_conflict",
    "update",
    "update_json",
    "validate",
]
