"""Per-document access control between two modules that never import each other.

The Authorization module decides who may do what with a document (relation tuples, resource definitions,
teams as subjects); the Database module owns the documents' tables. This file is the whole contract
between them:

- the Database module describes each opted-in schema's table as a :class:`ResourceTable` through a
  *catalog* it registers (:func:`register_catalog`), so the Authorization module can compile predicates
  over tables it does not know;
- the Authorization module registers its :class:`AccessControl` (:func:`provide`); :func:`control` is the
  one function the Database module calls to reach it (``None`` when the module is not installed: schemas
  that do not opt in work as before, and opting in is refused).

Why a predicate and not a list of ids: lists, counts, populate, GraphQL and custom endpoints all filter in
the database, in the statement that reads the documents (no per-user view, no background index, and a
grant is in force for the next statement of any process; see ``docs/access.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import sqlalchemy as sa
from flask import Flask, current_app
from sqlalchemy.dialects.postgresql import ARRAY

if TYPE_CHECKING:
    from .credentials import Identity

_PROVIDER = "trellis_access"
_CATALOG = "trellis_access_catalog"

# The topics of grant and revoke events (the Authorization module records them; read them with
# AccessControl.grant_change).
GRANT_EVENTS = "authorization.*.*"

# The bound parameters of every compiled predicate (values from Acting.parameters()).
SUBJECTS, USERS, TEAMS = "acc_subjects", "acc_users", "acc_teams"


@dataclass(frozen=True)
class FieldRef:
    """A Relation field of a resource's table, as a predicate needs it.

    ``holds_any(name)``: SQL true when the field holds one of the ids of the list bound to the parameter
    ``name`` (:data:`USERS` or :data:`TEAMS`); ``refers_to(column)``: SQL true when the field holds the value of ``column`` (an id of
    the related table); ``ids(document)``: the ids a document (a dict) holds in the field.
    """

    name: str
    target: str  # the related resource type: "User", "Team" or a schema name
    holds_any: Callable[[str], sa.ColumnElement[bool]]
    refers_to: Callable[[sa.ColumnElement[Any]], sa.ColumnElement[bool]]
    ids: Callable[[Mapping[str, Any]], list[str]]


@dataclass(frozen=True)
class ResourceTable:
    """An opted-in schema's documents: its table (with an ``id`` column), its Relation fields, and the
    field-backed relations (``authorization.fields``: field → relation)."""

    name: str
    table: sa.Table
    relation_fields: Mapping[str, FieldRef]
    field_relations: Mapping[str, str] = field(default_factory=dict)
    family: str = ""  # the event family of its documents' changes (the Database module names it)

    @property
    def id_column(self) -> sa.ColumnElement[Any]:
        return self.table.c.id


class Catalog(Protocol):
    """What the Database module registers: the opted-in resources, by name."""

    def resource(self, name: str, aliased: bool = False) -> ResourceTable | None:
        """The resource called ``name``; ``aliased``: over an alias of its table (for a subquery that
        may meet the same table, e.g. a Task whose ``parent`` is a Task)."""

    def names(self) -> list[str]: ...


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


class AccessControl(Protocol):
    """What the Authorization module offers the Database module (see ``trellis_authorization.control``)."""

    def acting(self, identity: Identity | None, scope: str | None) -> Acting: ...

    def viewer(self, identity: Identity | None) -> Acting: ...

    def audiences(
        self,
        resource: ResourceTable,
        probes: list[Probe],
        connection: sa.Connection,
        permission: str = "read",
        related: Mapping[str, Mapping[str, dict[str, Any] | None]] | None = None,
    ) -> list[Audience]:
        """Who holds ``permission`` on each probed document; ``related``: the documents inherited from as
        they were at the moment asked about (by resource name and id; None: it did not exist), instead of
        their rows."""

    def viewer_of(self, user_id: str, team_ids: Iterable[str]) -> Acting:
        """Who a user acts as when it belongs to ``team_ids`` (their ancestors included): a subscriber's
        view after a change of its teams, as that change recorded it."""

    def version(self, resource: str) -> Hashable: ...

    def predicate(self, resource: ResourceTable, permission: str, dialect: str) -> sa.ColumnElement[bool]: ...

    def change_families(self, resource: ResourceTable) -> list[str]: ...

    def grant_change(self, topic: str, payload: Mapping[str, Any]) -> GrantChange | None:
        """The grant or revoke an event records (None: another event, or not a well-formed one)."""

    def allowed(
        self, resource: ResourceTable, acting: Acting, doc_id: str, permissions: Iterable[str]
    ) -> dict[str, bool] | None: ...

    def created(self, resource: str, doc_ids: list[str], acting: Acting) -> None: ...

    def deleted(self, resource: str, doc_ids: list[str]) -> dict[str, list[list[str]]]: ...

    # A single-document write in one statement (PostgreSQL, data-modifying CTEs): the same tuple writes as
    # created/deleted, as parts of the document's own statement. ``written`` is the CTE of the document's
    # INSERT or DELETE (it returns ``id``).

    def owner_grant(self, resource: str, written: sa.CTE) -> sa.Insert:
        """The INSERT … SELECT of the owner tuple of the document ``written`` creates; its bound parameters
        are :meth:`owner_parameters`' and ``now`` (the creation time)."""

    def owner_parameters(self, acting: Acting) -> dict[str, Any] | None:
        """The owner grant's parameters for this caller; None when what it creates has no owner (admins)."""

    def forget_resources(self, resource: str, written: sa.CTE) -> sa.Delete:
        """The DELETE of the tuples on the document ``written`` deletes, returning ``subject``, ``relation``."""

    def renamed(self, old: str, new: str) -> None: ...

    def dropped(self, resource: str) -> None: ...

    def check_options(self, resource: ResourceTable) -> dict[str, list[str]]:
        """Errors of the resource's field-backed relations, keyed by field name."""

    def grants(self, resource: str, doc_id: str) -> list[dict[str, str]]: ...

    def share(
        self, resource: ResourceTable, acting: Acting | None, doc_id: str, subject: object, relation: object
    ) -> dict[str, str]: ...

    def unshare(
        self, resource: ResourceTable, acting: Acting | None, doc_id: str, subject: object, relation: object
    ) -> None: ...


def any_of(column: sa.ColumnElement[Any], name: str, dialect: str) -> sa.ColumnElement[bool]:
    """``column`` equals one of the list bound to ``name``: ``= ANY(:name)`` with one array parameter on
    PostgreSQL (the SQL text stays the same whatever the list's length, so it is compiled once), an
    expanding ``IN`` on SQLite (no arrays there)."""
    if dialect == "postgresql":
        return column == sa.any_(sa.bindparam(name, type_=ARRAY(sa.String)))
    return column.in_(sa.bindparam(name, expanding=True))


def provide(app: Flask, provider: AccessControl) -> None:
    app.extensions[_PROVIDER] = provider


def control(app: Flask | None = None) -> AccessControl | None:
    """The installed access control, or None (no Authorization module)."""
    return (app or current_app).extensions.get(_PROVIDER)


def register_catalog(app: Flask, catalog: Catalog) -> None:
    app.extensions[_CATALOG] = catalog


def catalog(app: Flask | None = None) -> Catalog | None:
    return (app or current_app).extensions.get(_CATALOG)
