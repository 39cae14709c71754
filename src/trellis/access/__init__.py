"""Per-document access control between two modules that never import each other.

The Authorization module decides who may do what with a document (relation tuples, resource definitions,
teams as subjects); the Database module owns the documents' tables. This file is the whole contract
between them:

- the Database module describes each opted-in schema's table as a :class:`ResourceTable` through a
  *catalog* it registers (:func:`register_catalog`), so the Authorization module can compile predicates
  over tables it does not know;
- the Authorization module registers its :class:`AccessControl` (:func:`provide`): five small protocols,
  one per job (``protocols.py``); :func:`control` is the one function the Database module calls to reach it
  (``None`` when the module is not installed: schemas that do not opt in work as before, and opting in is
  refused).

Why a predicate and not a list of ids: lists, counts, populate, GraphQL and custom endpoints all filter in
the database, in the statement that reads the documents (no per-user view, no background index, and a
grant is in force for the next statement of any process; see ``docs/access.md``).
"""

from __future__ import annotations

from flask import Flask, current_app

from .acting import ADMIN, Acting
from .live import GRANT_EVENTS, Audience, AudienceIndex, GrantChange, Probe
from .protocols import AccessControl, Callers, Lifecycle, LiveAudiences, Predicates, Sharing
from .tables import SUBJECTS, TEAMS, USERS, Catalog, FieldRef, ResourceTable, any_of

__all__ = [
    "ADMIN",
    "GRANT_EVENTS",
    "SUBJECTS",
    "TEAMS",
    "USERS",
    "AccessControl",
    "Acting",
    "Audience",
    "AudienceIndex",
    "Callers",
    "Catalog",
    "FieldRef",
    "GrantChange",
    "Lifecycle",
    "LiveAudiences",
    "Predicates",
    "Probe",
    "ResourceTable",
    "Sharing",
    "any_of",
    "catalog",
    "control",
    "provide",
    "register_catalog",
]

_PROVIDER = "trellis_access"
_CATALOG = "trellis_access_catalog"


def provide(app: Flask, provider: AccessControl) -> None:
    app.extensions[_PROVIDER] = provider


def control(app: Flask | None = None) -> AccessControl | None:
    """The installed access control, or None (no Authorization module)."""
    return (app or current_app).extensions.get(_PROVIDER)


def register_catalog(app: Flask, catalog: Catalog) -> None:
    app.extensions[_CATALOG] = catalog


def catalog(app: Flask | None = None) -> Catalog | None:
    return (app or current_app).extensions.get(_CATALOG)
