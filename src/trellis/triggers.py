"""Document triggers: code that runs around a document write, between the Database module, which owns the
one write path, and the module that runs the code (the Functions module). Neither imports the other.

The runner registers a :class:`Triggers` (:func:`provide`). The write path asks :func:`watching` once per
write: None (no runner, or nothing watches this schema and kind) keeps today's write exactly, one
statement where it was one; otherwise the write runs in the session's transaction, calls :meth:`before`
on each document and stores what it answers, then :meth:`after`, still in that transaction, so that what
runs once the write has committed is queued with it or not at all.
"""

from __future__ import annotations

from typing import Any, Protocol

from flask import Flask

from . import current

KINDS = ("create", "update", "delete")
_PROVIDER = "trellis_triggers"


class Triggers(Protocol):
    def watches(self, schema: str, kind: str) -> bool:
        """Whether any trigger runs on ``kind`` (create, update, delete) of ``schema``'s documents."""

    def before(self, schema: str, kind: str, doc: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any]:
        """Run the before-triggers in the write's transaction; the document to store (for a delete, ignored).
        ``doc`` is the document as it will be stored, ``previous`` as it was (updates). Raises
        :class:`trellis.errors.APIError` to refuse the write: nothing of it is stored."""

    def after(self, schema: str, kind: str, doc: dict[str, Any], previous: dict[str, Any] | None) -> None:
        """Queue the after-triggers of the written document in the write's transaction."""


def provide(app: Flask, triggers: Triggers) -> None:
    app.extensions[_PROVIDER] = triggers


def watching(schema: str, kind: str) -> Triggers | None:
    """The runner when a trigger watches ``kind`` writes of ``schema``, else None."""
    found: Triggers | None = current.app().extensions.get(_PROVIDER)
    return found if found is not None and found.watches(schema, kind) else None
