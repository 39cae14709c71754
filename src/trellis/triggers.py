"""Document triggers: code that runs around a document write, between the Database module, which owns the
one write path, and the module that runs the code (the Functions module). Neither imports the other.

The runner registers a :class:`Triggers` (:func:`provide`). The write path asks :func:`watching` once per
write: None (no runner, or nothing watches this schema and kind) keeps today's write exactly, one
statement where it was one; otherwise the write calls :meth:`before` on each document and stores what it
answers, and queues the after-triggers with it, so that what runs once the write has committed is queued
with it or not at all: in the write's own statement where that is one (:meth:`queue`, PostgreSQL's
single-document writes), else in the session's transaction (:meth:`after`).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Protocol

import sqlalchemy as sa
from flask import Flask

from . import current

KINDS = ("create", "update", "delete")
_PROVIDER = "trellis_triggers"


class Triggers(Protocol):
    def watches(self, schema: str, kind: str) -> bool:
        """Whether any trigger runs on ``kind`` (create, update, delete) of ``schema``'s documents."""

    def runs_before(self, schema: str, kind: str) -> bool:
        """Whether a before-trigger runs on ``kind`` writes of ``schema`` (else only after-triggers do: the
        write stores what the client sent, as it would without triggers)."""

    def before(self, schema: str, kind: str, doc: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any]:
        """Run the before-triggers ahead of the write (what they write joins the session's transaction, which
        the write then joins too); the document to store (for a delete, ignored).
        ``doc`` is the document as it will be stored, ``previous`` as it was (updates). Raises
        :class:`trellis.errors.APIError` to refuse the write: nothing of it is stored."""

    def after(self, schema: str, kind: str, doc: dict[str, Any], previous: dict[str, Any] | None) -> None:
        """Queue the after-triggers of the written document in the write's transaction."""

    def queue(self, schema: str, kind: str) -> Queued | None:
        """The after-triggers of one document's ``kind`` write, for its single statement to queue; None when
        none watches."""


class Queued(Protocol):
    """After-triggers a single-statement write queues in that statement (PostgreSQL): rows inserted by a
    data-modifying CTE over the written row, so they commit with it, or not at all when nothing was written."""

    key: Hashable  # what the statement's shape depends on: a part of its cache key
    parameters: dict[str, Any]  # the statement's parameters for them

    def part(self, rows: sa.CTE, change: sa.ColumnElement[str]) -> sa.CTE:
        """The CTE queuing them for each row of ``rows``; ``change`` is the write's event payload (JSON text,
        ``{"document": …, "previous": …}``)."""

    def written(self, change: str, alone: bool) -> None:
        """After the statement wrote its row (``change``: the event payload's text): the runs are handed
        over once they have committed, at once when the statement committed ``alone``."""


def provide(app: Flask, triggers: Triggers) -> None:
    app.extensions[_PROVIDER] = triggers


def watching(schema: str, kind: str) -> Triggers | None:
    """The runner when a trigger watches ``kind`` writes of ``schema``, else None."""
    found: Triggers | None = current.app().extensions.get(_PROVIDER)
    return found if found is not None and found.watches(schema, kind) else None
