"""The reference model of the access-control test: who may read which document, written straight from the
contract's rules with plain sets and dicts, and nothing of the code under test.

Two schemas: ``Project`` and ``Task``. A Task reads through its ``project`` (``project->read``), its
``assignee`` (a User) holds ``editor`` and its ``crew`` (a Team) holds ``reader`` (field-backed relations).
A viewer is a user id, :data:`ANONYMOUS`, :data:`ADMIN`, or ``("scope", user id, team id)``: a user acting
as one of its teams, which then holds that team's grants only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ANONYMOUS = "anonymous"
ADMIN = "admin"
READ = {"reader", "editor", "owner"}
EDIT = {"editor", "owner"}
FIELD_RELATIONS = {"assignee": "editor", "crew": "reader"}  # Task's field-backed relations
Key = tuple[str, str]  # (schema, document id)
Viewer = Any  # a user id, ANONYMOUS, ADMIN or ("scope", user id, team id)


@dataclass
class Reference:
    users: set[str] = field(default_factory=set)
    parent: dict[str, str | None] = field(default_factory=dict)  # team → its parent team
    members: dict[str, dict[str, str]] = field(default_factory=dict)  # team → {user: owner|member}
    tuples: set[tuple[str, str, Key]] = field(default_factory=set)  # (subject, relation, document)
    docs: dict[Key, dict[str, Any]] = field(default_factory=dict)  # the document as the server shows it

    # teams

    def ancestors(self, team: str) -> list[str]:
        """The team and every team above it."""
        found = []
        current: str | None = team
        while current is not None and current in self.parent:
            found.append(current)
            current = self.parent[current]
        return found

    def teams_of(self, user: str) -> set[str]:
        """The teams whose members the user counts among: its own and every team above them."""
        return {above for team, people in self.members.items() if user in people for above in self.ancestors(team)}

    def authority(self, team: str, user: str) -> str | None:
        """``owner`` when the user owns the team or a team above it, ``member`` when in either, else None."""
        roles = {self.members[t].get(user) for t in self.ancestors(team)} - {None}
        return "owner" if "owner" in roles else "member" if roles else None

    def subtree(self, team: str) -> set[str]:
        return {t for t in self.parent if team in self.ancestors(t)}

    def delete_team(self, team: str) -> None:
        """A team goes with its sub-teams, their memberships and every tuple naming them."""
        gone = self.subtree(team)
        for t in gone:
            del self.parent[t]
            del self.members[t]
        self.tuples = {t for t in self.tuples if t[0] not in {f"Team:{g}" for g in gone}}

    # access

    def subjects(self, viewer: Viewer) -> set[str]:
        if viewer == ANONYMOUS:
            return {"*"}
        if isinstance(viewer, tuple):
            return {f"Team:{viewer[2]}"}
        return {"*", "User:*", f"User:{viewer}"} | {f"Team:{t}" for t in self.teams_of(viewer)}

    def relations(self, viewer: Viewer, key: Key) -> set[str]:
        """The relations the viewer holds on the document: its tuples and Task's field-backed ones."""
        subjects = self.subjects(viewer)
        held = {relation for subject, relation, on in self.tuples if on == key and subject in subjects}
        doc = self.docs.get(key)
        if doc is not None and key[0] == "Task":
            if doc.get("assignee") is not None and f"User:{doc['assignee']}" in subjects:
                held.add(FIELD_RELATIONS["assignee"])
            if doc.get("crew") is not None and f"Team:{doc['crew']}" in subjects:
                held.add(FIELD_RELATIONS["crew"])
        return held

    def may(self, viewer: Viewer, permission: str, key: Key) -> bool:
        if key not in self.docs:
            return False
        if viewer == ADMIN:
            return True
        held = self.relations(viewer, key)
        if permission == "read":
            if held & READ:
                return True
            project = self.docs[key].get("project") if key[0] == "Task" else None
            return project is not None and self.may(viewer, "read", ("Project", project))
        if permission == "edit":
            return bool(held & EDIT)
        return "owner" in held  # delete, share

    def visible(self, viewer: Viewer) -> dict[Key, dict[str, Any]]:
        """Every document the viewer may read, as it is now."""
        return {key: doc for key, doc in self.docs.items() if self.may(viewer, "read", key)}


def live_events(
    before: dict[Key, dict[str, Any]], after: dict[Key, dict[str, Any]], written: dict[Key, str]
) -> list[tuple[Key, str, dict[str, Any]]]:
    """The events one subscriber must receive for one committed change, from what it could read before
    and after it (the commit-time rule). ``written``: the documents the change wrote (create, update or
    delete); every other document whose readability changed is an ``enter`` or a ``leave``."""
    found = []
    for key in sorted(set(before) | set(after) | set(written)):
        was, now = key in before, key in after
        kind = written.get(key)
        if kind == "create":
            event = "create" if now else None
        elif kind == "delete":
            event = "delete" if was else None
        elif kind == "update" and was and now:
            event = "update"
        else:
            event = "enter" if now and not was else "leave" if was and not now else None
        if event is not None:
            found.append((key, event, after[key] if event in ("create", "update", "enter") else {"_id": key[1]}))
    return found
