"""The access predicates a write carries in its WHERE: the caller may read the document and hold the
permission the write needs on it (their parameters: ``acting.parameters()``)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from trellis.access import Acting

from .. import document_access
from ..registry import CompiledSchema


def access_parts(schema: CompiledSchema, acting: Acting, permission: str) -> list[sa.ColumnElement[bool]]:
    """The caller may read the document and hold ``permission`` on it."""
    return [document_access.read_condition(schema, acting), document_access.read_condition(schema, acting, permission)]


def with_access(
    schema: CompiledSchema, condition: Any, acting: Acting | None, permission: str
) -> sa.ColumnElement[bool] | None:
    """``condition`` AND the caller may read the document AND hold ``permission`` on it."""
    if acting is None:
        return condition
    return sa.and_(*([condition] if condition is not None else []), *access_parts(schema, acting, permission))
