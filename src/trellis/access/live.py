"""What live delivery asks of access control: who could read a document at a given moment
(:class:`Probe` in, :class:`Audience` out), and the grant and revoke events read back (:class:`GrantChange`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .acting import Acting

# The topics of grant and revoke events (the Authorization module records them; read them with
# LiveAudiences.grant_change).
GRANT_EVENTS = "authorization.*.*"
T = TypeVar("T")


@dataclass(frozen=True)
class Probe:
    """One document whose audience a live subscription needs (see :meth:`AccessControl.audiences`).

    ``document``: the document (with ``_id``) as it was or is: its Relation fields name the users, teams
    and related documents that field-backed relations and inheritance read. ``plus``/``minus``: tuples
    ``(resource, subject, relation)`` (``resource`` is ``<Schema>:<id>``, the document's own or a related
    one) counted although no longer stored (a revoke, a deleted document's grants), or left out although
    stored (before a grant).
    """

    document: Mapping[str, Any]
    plus: tuple[tuple[str, str, str], ...] = ()
    minus: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class GrantChange:
    """A grant or revoke as its event records it (the Authorization module parses its own payloads)."""

    resource: str  # <Schema>:<documentId>
    subject: str
    relation: str
    granted: bool  # False: revoked

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.resource, self.subject, self.relation)


@dataclass(frozen=True)
class Audience:
    """Who holds a permission on one document, in the terms of the predicate's three parameters: the
    tuples' subjects (matched against ``Acting.subjects``), the users and the teams its fields name
    (matched against the acting user and ``Acting.team_ids``). Deciding for one more subscriber is a set
    intersection in memory, never a query."""

    subjects: frozenset[str] = frozenset()
    users: frozenset[str] = frozenset()
    teams: frozenset[str] = frozenset()

    def admits(self, acting: Acting) -> bool:
        """Exactly what the predicate answers for ``acting`` (admins: always)."""
        if acting.admin and acting.scope is None:
            return True
        if not self.subjects.isdisjoint(acting.subjects):
            return True
        if acting.user_id is not None and acting.scope is None and acting.user_id in self.users:
            return True
        return not self.teams.isdisjoint(acting.team_ids)

    def __or__(self, other: Audience) -> Audience:
        return Audience(self.subjects | other.subjects, self.users | other.users, self.teams | other.teams)


class AudienceIndex(Generic[T]):
    """Items (live subscriptions) by the ``Acting`` each reads as, in the order given. ``candidates`` finds,
    from an audience's few names, every item the audience may admit, instead of asking each item: a
    superset (``Audience.admits`` still decides for each), so an event read by a tenth of 2,000
    subscribers costs the tenth. ``None`` for an item that reads everything (administrators)."""

    def __init__(self, items: Iterable[tuple[T, Acting | None]]) -> None:
        self._everyone: list[tuple[int, T]] = []
        self._by_name: dict[tuple[int, str], list[tuple[int, T]]] = {}
        self.restricted = False  # some item is judged by its access
        for position, (item, acting) in enumerate(items):
            entry = (position, item)
            if acting is None or (acting.admin and acting.scope is None):
                self._everyone.append(entry)
                continue
            self.restricted = True
            names = [(_SUBJECT, subject) for subject in acting.subjects]
            names += [(_TEAM, team) for team in acting.team_ids]
            if acting.user_id is not None and acting.scope is None:
                names.append((_USER, acting.user_id))
            for name in names:
                self._by_name.setdefault(name, []).append(entry)

    def candidates(self, audiences: Iterable[Audience]) -> list[T]:
        """The items any of ``audiences`` may admit (what ``admits`` compares: subjects, users, teams), and
        every item that reads everything, in the order given."""
        found: dict[int, T] = dict(self._everyone)
        by_name = self._by_name
        for audience in audiences:
            for kind, names in ((_SUBJECT, audience.subjects), (_USER, audience.users), (_TEAM, audience.teams)):
                for name in names:
                    found.update(by_name.get((kind, name), ()))
        return [found[position] for position in sorted(found)]


_SUBJECT, _USER, _TEAM = range(3)
