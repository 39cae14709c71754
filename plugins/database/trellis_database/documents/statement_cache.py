"""Statements built once per compiled schema (i.e. per schema version) and query shape: a request only
binds its values. The cache is the compiled schema's, so a change to the schemas drops it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trellis import db

from ..registry import CompiledSchema

MAX_CACHED_SHAPES = 256


def dialect() -> str:
    return db.engine().dialect.name


def cached_statement(schema: CompiledSchema, key: Any, build: Callable[[], Any]) -> Any:
    """The statement of ``key`` on ``schema``, built by ``build`` the first time."""
    statement = schema.statements.get(key)
    if statement is None:
        if len(schema.statements) >= MAX_CACHED_SHAPES:  # clients choose shapes: keep the cache bounded
            schema.statements.clear()
        statement = schema.statements[key] = build()
    return statement
