"""What a change of teams tells other modules: the users whose teams it changed and, where it recorded
them, each one's teams once it was made. The payloads are this module's (``team_memory.record``); other modules
read them through :func:`team_change`, never by hand."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

FAMILY = "authentication.team"
PATTERN = "authentication.team.*"


@dataclass(frozen=True)
class TeamChange:
    """``users``: whose teams (and so whose ``Team:<id>`` subjects) changed; ``teams``: each one's teams
    (ancestors included) once the change was made, for the users it recorded them for."""

    users: tuple[str, ...]
    teams: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def team_change(topic: str, payload: Mapping[str, Any]) -> TeamChange | None:
    """The change an ``authentication.team.*`` event records (None: another event)."""
    if not topic.startswith(FAMILY + "."):
        return None
    kind = topic.rsplit(".", 1)[1]
    users: list[str] = []
    if kind in ("join", "leave"):
        user = payload.get("userId")
        role_change = kind == "join" and payload.get("previousRole") is not None  # the same teams
        users = [user] if isinstance(user, str) and not role_change else []
    elif kind in ("delete", "update"):
        users = [user for user in payload.get("userIds") or () if isinstance(user, str)]
    recorded = payload.get("teams")
    teams: dict[str, tuple[str, ...]] = {}
    if isinstance(recorded, Mapping):
        for user, held in recorded.items():
            if isinstance(user, str) and isinstance(held, list) and all(isinstance(team, str) for team in held):
                teams[user] = tuple(held)
    return TeamChange(tuple(users), teams)
