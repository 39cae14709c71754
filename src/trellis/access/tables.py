"""The Database module's tables as access control sees them: each opted-in schema as a
:class:`ResourceTable` (its table, its Relation fields), found through the :class:`Catalog` the Database
module registers, and the bound parameters every compiled predicate reads the caller from."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY

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


def any_of(column: sa.ColumnElement[Any], name: str, dialect: str) -> sa.ColumnElement[bool]:
    """``column`` equals one of the list bound to ``name``: ``= ANY(:name)`` with one array parameter on
    PostgreSQL (the SQL text stays the same whatever the list's length, so it is compiled once), an
    expanding ``IN`` on SQLite (no arrays there)."""
    if dialect == "postgresql":
        return column == sa.any_(sa.bindparam(name, type_=ARRAY(sa.String)))
    return column.in_(sa.bindparam(name, expanding=True))
