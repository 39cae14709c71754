"""Who a request acts as, in the terms every predicate is compiled against."""

from __future__ import annotations

from dataclasses import dataclass

from .tables import SUBJECTS, TEAMS, USERS


@dataclass(frozen=True)
class Acting:
    """Who a request acts as: a user (or nobody), the subjects it holds, and the team scope if any.

    ``subjects``: ``User:<id>``, ``User:*``, ``*`` and every ``Team:<id>`` the user belongs to (with the
    ancestors of those teams); with a scope only ``Team:<id>``. ``admin``: no predicate applies.
    """

    user_id: str | None
    subjects: tuple[str, ...]
    team_ids: tuple[str, ...] = ()
    scope: str | None = None
    admin: bool = False

    def parameters(self) -> dict[str, list[str]]:
        """The values of the predicate's bound parameters for this caller."""
        users = [self.user_id] if self.user_id is not None and self.scope is None else []
        return {SUBJECTS: list(self.subjects), USERS: users, TEAMS: list(self.team_ids)}

    @property
    def owner_subject(self) -> str | None:
        """Who owns what this caller creates: the scope team, else the user (admins: nobody)."""
        if self.scope is not None:
            return self.scope
        return f"User:{self.user_id}" if self.user_id is not None else None


ADMIN = Acting(user_id=None, subjects=(), admin=True)  # administrators and the CLI: no predicate applies
