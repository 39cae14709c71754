"""Cross-module hooks (pluggy). The manager lives on the app, created in ``create_app``.

A module contributes implementations through ``Module.hooks``; callers use
``trellis.hooks.call()`` (the current app's hook relay).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pluggy

from . import current

hookspec = pluggy.HookspecMarker("trellis")
hookimpl = pluggy.HookimplMarker("trellis")


class Specs:
    @hookspec(firstresult=True)
    def trellis_user_from_claims(self, claims: dict[str, Any]) -> Mapping[str, Any] | None:
        """Turn verified user-token claims into the user (a mapping with ``_id``; the rest may be read
        when first asked for).

        Raise ``APIError`` 401/403 for a revoked session or a blocked user. The Authentication
        module implements it; without it user tokens are refused.
        """

    @hookspec
    def trellis_user_signing_up(self, user: dict[str, Any]) -> None:
        """Someone signs up as ``user`` (``{email}``), before the account is made: raise ``APIError`` to
        refuse it. The Functions module runs its ``before_sign_up`` triggers here."""

    @hookspec
    def trellis_user_signed_up(self, user: dict[str, Any]) -> None:
        """A sign-up made ``user`` (as the API shows users), in the transaction that creates it: work queued
        here commits with the account or not at all (the Functions module's ``after_sign_up`` triggers)."""

    @hookspec
    def trellis_user_blocked(self, user_id: str) -> None:
        """A user was blocked: drop live connections (the Chat module disconnects sockets)."""

    @hookspec
    def trellis_user_deleted(self, user_id: str) -> None:
        """A user was deleted: modules remove what belongs only to that user."""

    @hookspec
    def trellis_team_deleted(self, team_ids: list[str]) -> None:
        """Teams were deleted (a team and all its sub-teams), in the caller's transaction: modules remove
        what refers to them (the Authorization module: the teams' relation tuples)."""

    @hookspec
    def trellis_backup_tables(self, connection: Any) -> list[Any]:  # type: ignore[empty-body]  # a hookspec: no body
        """The tables the module creates at run time (not in the shared metadata), as ``connection`` sees
        them: a list of :class:`trellis.backups.parts.RuntimeTable`. A backup copies them beside the
        metadata's tables; a restore drops the current ones and creates those the restored rows describe."""

    @hookspec
    def trellis_backup_blobs(self, rows: Any) -> list[Any]:  # type: ignore[empty-body]  # a hookspec: no body
        """The stored files the backed-up rows reference: :class:`trellis.backups.parts.Blob` objects.
        ``rows(table_name)`` iterates the snapshot's rows of a table (dicts)."""

    @hookspec
    def trellis_project_parts(self) -> list[Any]:  # type: ignore[empty-body]  # a hookspec: no body
        """The module's share of project as code: a :class:`trellis.project.parts.ProjectPart` (or a list of
        them) that exports, plans and applies the state administrators make in the module."""

    @hookspec(firstresult=True)
    def trellis_backup_store(self) -> Any:
        """Where archives are kept with the config ``backups.storage: s3``: an object with ``writer(key,
        content_type)`` (``write``, ``commit``, ``abort``, ``close``), ``read(key)`` (an iterable of chunks
        with ``close``) and ``delete(key)``; None when the module has no such store configured."""

    @hookspec
    def trellis_restore_blobs(self, rows: Any, blob: Any) -> Any:
        """How to put back the stored files of the restored rows (``rows(table_name)``; ``blob(name)`` opens
        one as a binary file): a :class:`trellis.backups.parts.BlobRestore`, or None when the module keeps
        no files. Called before the restore's transaction begins."""

    @hookspec
    def trellis_client_types(self, lang: str) -> str | None:
        """Type declarations of the data the module serves, for API clients written in ``lang`` (``ts``:
        TypeScript), as source text; None when the module has none in that language. ``flask trellis
        types`` prints every module's text, so names a module declares should not clash with another's."""


def make_manager() -> pluggy.PluginManager:
    manager = pluggy.PluginManager("trellis")
    manager.add_hookspecs(Specs)
    return manager


def call() -> Any:
    """The hook relay of the current app: ``call().trellis_user_blocked(user_id=...)``."""
    return current.app().extensions["trellis"].hooks.hook  # every user request: no proxy read
