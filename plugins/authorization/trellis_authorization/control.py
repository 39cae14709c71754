"""The module's side of ``trellis.access``: what the Database module calls (through
``trellis.access.control()``), one class per protocol of ``trellis.access.protocols``, and the hooks that
keep tuples in step with users and teams."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import sqlalchemy as sa

from trellis.access import Acting, Audience, GrantChange, Probe, ResourceTable, catalog
from trellis.credentials import Identity
from trellis.errors import forbidden, not_found
from trellis.hooks import hookimpl

from . import audience, decisions, definitions, subjects, tuples
from .predicate import condition, held


class Callers:
    """``trellis.access.Callers`` (see there for each method's contract)."""

    def acting(self, identity: Identity | None, scope: str | None) -> Acting:
        return subjects.acting(identity, scope)

    def viewer(self, identity: Identity | None) -> Acting:
        """Who a live subscriber acts as, read now: never the per-request memo, since a subscription
        outlives requests and is read again when its user's teams change."""
        return subjects.read_acting(identity, None)

    def viewer_of(self, user_id: str, team_ids: Iterable[str]) -> Acting:
        return subjects.user_acting(user_id, list(team_ids))


class Predicates:
    """``trellis.access.Predicates``."""

    def version(self, resource: str) -> Hashable:
        """Changes whenever a definition changes: part of the key of statements built with a predicate."""
        return definitions.of().stamp

    def predicate(
        self, resource: ResourceTable, permission: str, dialect: str, membership: bool = False
    ) -> sa.ColumnElement[bool]:
        return condition(resource, permission, dialect, membership=membership)

    def held(self, resource: ResourceTable, permission: str, dialect: str) -> sa.Select:
        return held(resource, permission, dialect)

    def change_families(self, resource: ResourceTable) -> list[str]:
        """The event families whose change numbers key a count under access: the resource's grants, and
        the documents and grants of every resource it inherits from."""
        families = [tuples.family(resource.name)]
        found = definitions.definition(resource.name)
        for permission in found.permissions:
            for field_name, _ in found.inherited(permission):
                ref = resource.relation_fields.get(field_name)
                registered = catalog()
                target = registered.resource(ref.target) if ref is not None and registered is not None else None
                if target is not None:  # a target outside access control grants nothing
                    families += [target.family, tuples.family(target.name)]
        return sorted({family for family in families if family})

    def allowed(
        self, resource: ResourceTable, acting: Acting, doc_id: str, permissions: Iterable[str]
    ) -> dict[str, bool] | None:
        return decisions.allowed(resource, acting, doc_id, permissions)

    def check_options(self, resource: ResourceTable) -> dict[str, list[str]]:
        """Errors of a schema's field-backed relations against its definition, by field name (the Database
        module says where its schemas keep them)."""
        found = definitions.definition(resource.name)
        errors: dict[str, list[str]] = {}
        for field_name, relation in resource.field_relations.items():
            key = field_name
            ref = resource.relation_fields.get(field_name)
            if ref is None or ref.target not in ("User", "Team"):
                errors[key] = ["A field-backed relation needs a Relation field to User or Team"]
            elif relation not in found.relations:
                errors[key] = [
                    f"Unknown relation {relation!r}; {resource.name} has {', '.join(sorted(found.relations))}"
                ]
        return errors


class Lifecycle:
    """``trellis.access.Lifecycle``."""

    def created(self, resource: str, doc_ids: list[str], acting: Acting) -> None:
        owner = acting.owner_subject
        if owner is not None and doc_ids:
            tuples.created(resource, doc_ids, owner)

    def deleted(self, resource: str, doc_ids: list[str]) -> dict[str, list[list[str]]]:
        """Remove the deleted documents' tuples; returns them (``{id: [[subject, relation], …]}``) so the
        deletion's event can say who could read the documents (live subscribers get ``delete``)."""
        return tuples.forget_resources(resource, doc_ids) if doc_ids else {}

    def owner_grant(self, resource: str, written: sa.CTE) -> sa.Insert:
        return tuples.owner_insert(resource, written)

    def owner_parameters(self, acting: Acting) -> dict[str, Any] | None:
        owner = acting.owner_subject
        return None if owner is None else tuples.owner_parameters(owner)

    def forget_resources(self, resource: str, written: sa.CTE) -> sa.Delete:
        return tuples.forget_written(resource, written)

    def renamed(self, old: str, new: str) -> None:
        tuples.rename_type(old, new)
        definitions.rename(old, new)

    def dropped(self, resource: str) -> None:
        tuples.forget_type(resource)
        definitions.drop(resource)


class Sharing:
    """``trellis.access.Sharing``."""

    def grants(self, resource: str, doc_id: str) -> list[dict[str, str]]:
        return tuples.on_resource(resource, doc_id)

    def share(
        self, resource: ResourceTable, acting: Acting | None, doc_id: str, subject: Any, relation: Any
    ) -> dict[str, str]:
        """A user shares a document (the caller checked ``share``): 400 for an unknown relation or subject,
        403 for a relation the caller does not hold (owners may grant any), 409 when it exists."""
        self._check_grant(resource, acting, doc_id, subject, relation)
        row = tuples.grant(subject, relation, resource.name, [doc_id])[0]
        return {"subject": row["subject"], "relation": row["relation"], "resource": row["resource"]}

    def unshare(self, resource: ResourceTable, acting: Acting | None, doc_id: str, subject: Any, relation: Any) -> None:
        """Revoke a grant: any subject the document's grants name (a team the caller has left included);
        a subject holding nothing is the 404 of a missing grant, whether or not it exists."""
        self._check_grant(resource, acting, doc_id, subject, relation, granting=False)
        if not tuples.revoke(resource.name, doc_id, subject, relation):
            raise not_found(f"{subject} holds no {relation} on {resource.name}:{doc_id}")

    @staticmethod
    def _check_grant(
        resource: ResourceTable,
        acting: Acting | None,
        doc_id: str,
        subject: Any,
        relation: Any,
        granting: bool = True,
    ) -> None:
        subjects.parse(subject)
        tuples.check_relation(resource.name, relation, subject)
        if granting:
            if acting is not None and not acting.admin:
                subjects.check_grantable(subject, acting)  # before existence: no oracle of team ids
            subjects.check_exists([subject])
        if acting is None:
            return  # administrators
        held = decisions.roles(resource, acting, doc_id)
        if "owner" not in held and relation not in held:
            raise forbidden(f"You may only grant relations you hold on this document ({', '.join(held) or 'none'})")


class LiveAudiences:
    """``trellis.access.LiveAudiences``."""

    def audiences(
        self,
        resource: ResourceTable,
        probes: list[Probe],
        connection: sa.Connection,
        permission: str = "read",
        related: audience.Related | None = None,
    ) -> list[Audience]:
        return audience.audiences(resource, probes, connection, permission, related=related)

    def grant_change(self, topic: str, payload: Mapping[str, Any]) -> GrantChange | None:
        return tuples.change_of(topic, payload)


class Control(Callers, Predicates, Lifecycle, Sharing, LiveAudiences):
    """``trellis.access.AccessControl``: the five together, what the module registers."""


class Hooks:
    """Tuples naming a deleted user or team go in the same transaction as the deletion."""

    @hookimpl
    def trellis_user_deleted(self, user_id: str) -> None:
        tuples.forget_subjects([f"User:{user_id}"])

    @hookimpl
    def trellis_team_deleted(self, team_ids: list[str]) -> None:
        tuples.forget_subjects([f"Team:{team_id}" for team_id in team_ids])
