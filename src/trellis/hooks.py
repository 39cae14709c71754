"""Cross-module hooks (pluggy). The manager lives on the app, created in ``create_app``.

A module contributes implementations through ``Module.hooks``; callers use
``trellis.hooks.call()`` (the current app's hook relay).
"""

from __future__ import annotations

from typing import Any

import pluggy
from flask import current_app

hookspec = pluggy.HookspecMarker("trellis")
hookimpl = pluggy.HookimplMarker("trellis")


class Specs:
    @hookspec(firstresult=True)
    def trellis_user_from_claims(self, claims: dict[str, Any]) -> dict[str, Any] | None:
        """Turn verified user-token claims into the user (a dict with ``_id``).

        Raise ``APIError`` 401/403 for a revoked session or a blocked user. The Authentication
        module implements it; without it user tokens are refused.
        """

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


def make_manager() -> pluggy.PluginManager:
    manager = pluggy.PluginManager("trellis")
    manager.add_hookspecs(Specs)
    return manager


def call() -> Any:
    """The hook relay of the current app: ``call().trellis_user_blocked(user_id=...)``."""
    return current_app.extensions["trellis"].hooks.hook
