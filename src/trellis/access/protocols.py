"""What the Authorization module offers the Database module, as five jobs: who a request acts as
(:class:`Callers`), the predicates reads are filtered by (:class:`Predicates`), tuples that follow the
documents' lives (:class:`Lifecycle`), sharing one document (:class:`Sharing`) and the audiences of live
delivery (:class:`LiveAudiences`). :class:`AccessControl` is all five: what the module registers."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import sqlalchemy as sa

from .acting import Acting
from .live import Audience, GrantChange, Probe
from .tables import ResourceTable

if TYPE_CHECKING:
    from ..credentials import Identity


class Callers(Protocol):
    """Who a request or a live subscriber acts as."""

    def acting(self, identity: Identity | None, scope: str | None) -> Acting:
        """The caller of this request (``scope``: the team it acts for, ``X-Trellis-Team``)."""

    def viewer(self, identity: Identity | None) -> Acting:
        """Who a live subscriber acts as, read now (a subscription outlives the request's memo)."""

    def viewer_of(self, user_id: str, team_ids: Iterable[str]) -> Acting:
        """Who a user acts as when it belongs to ``team_ids`` (their ancestors included): a subscriber's
        view after a change of its teams, as that change recorded it."""


class Predicates(Protocol):
    """Reads filtered in the statement that reads the documents, and what their answers depend on."""

    def predicate(
        self, resource: ResourceTable, permission: str, dialect: str, membership: bool = False
    ) -> sa.ColumnElement[bool]:
        """SQL true for the rows the caller bound as ``Acting.parameters()`` holds ``permission`` on.
        ``membership``: the same rows, the caller's grants tested as membership of the set :meth:`held`
        reads (cheaper per row, dearer per statement: for a caller who holds few)."""

    def held(self, resource: ResourceTable, permission: str, dialect: str) -> sa.Select:
        """The ids of the resource's documents on which the caller's grants give ``permission`` (its
        field-backed and inherited relations aside)."""

    def allowed(
        self, resource: ResourceTable, acting: Acting, doc_id: str, permissions: Iterable[str]
    ) -> dict[str, bool] | None:
        """Which of ``permissions`` the caller holds on one document (None: no such document)."""

    def version(self, resource: str) -> Hashable:
        """Changes whenever a definition changes: part of the key of statements built with a predicate."""

    def change_families(self, resource: ResourceTable) -> list[str]:
        """The event families whose changes can change who reads the resource's documents."""

    def check_options(self, resource: ResourceTable) -> dict[str, list[str]]:
        """Errors of the resource's field-backed relations, keyed by field name."""


class Lifecycle(Protocol):
    """Tuples follow the documents and schemas they name: created, deleted, renamed, dropped."""

    def created(self, resource: str, doc_ids: list[str], acting: Acting) -> None:
        """The creator's owner tuples of new documents (none for administrators)."""

    def deleted(self, resource: str, doc_ids: list[str]) -> dict[str, list[list[str]]]:
        """Remove the deleted documents' tuples; returns them (``{id: [[subject, relation], …]}``)."""

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

    def renamed(self, old: str, new: str) -> None:
        """A schema was renamed: its tuples and definition follow."""

    def dropped(self, resource: str) -> None:
        """A schema was deleted: its tuples and definition go."""


class Sharing(Protocol):
    """The grants of one document, as its users share it."""

    def grants(self, resource: str, doc_id: str) -> list[dict[str, str]]: ...

    def share(
        self, resource: ResourceTable, acting: Acting | None, doc_id: str, subject: object, relation: object
    ) -> dict[str, str]:
        """Grant ``relation`` to ``subject`` (``acting`` None: an administrator); 400, 403 or 409 when refused."""

    def unshare(
        self, resource: ResourceTable, acting: Acting | None, doc_id: str, subject: object, relation: object
    ) -> None:
        """Revoke a grant; 404 when ``subject`` holds no such grant."""


class LiveAudiences(Protocol):
    """Who may receive a live change: audiences computed once per change, grant events read back."""

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

    def grant_change(self, topic: str, payload: Mapping[str, Any]) -> GrantChange | None:
        """The grant or revoke an event records (None: another event, or not a well-formed one)."""


class AccessControl(Callers, Predicates, Lifecycle, Sharing, LiveAudiences, Protocol):
    """All five jobs: what the Authorization module registers (``trellis.access.provide``)."""
