"""The team switches of the module's config: teams at all, and invitations."""

from __future__ import annotations

from typing import Any

from trellis.errors import forbidden

from .users import config


def settings() -> dict[str, Any]:
    return config()["teams"]


def require_enabled() -> None:
    """403 on every team route while ``teams.enabled`` is false."""
    if not settings()["enabled"]:
        raise forbidden("Teams are not enabled (config teams.enabled)")


def require_invites() -> None:
    """403 on the invite routes while ``teams.invites.enabled`` is false."""
    if not settings()["invites"]["enabled"]:
        raise forbidden("Team invites are not enabled (config teams.invites.enabled)")
