"""HTTP routes of the Authorization module (Conduit's paths; ``docs/access.md``).

Users ask about themselves: ``GET /authorization/check`` and ``GET /authorization/role/{resource}``
answer ``false`` / ``[]`` for a document they cannot reach, exactly as for one that does not exist (no
existence leak). Administrators read and change resource definitions, write and remove relation tuples,
and ask ``can`` / ``evaluate`` on anybody's behalf. Every grant, revoke and definition change is audited
(tuples: in ``tuples.grant`` / ``tuples.revoke``; definitions: in ``definitions.update``; whoever calls them).
"""

from __future__ import annotations

from typing import Any

from trellis import db
from trellis.access import ResourceTable, catalog
from trellis.credentials import admin_required, require_user, user_required
from trellis.errors import ErrorSchema, bad_request, not_found
from trellis.http import Blueprint, DeletedSchema, deleted

from . import decisions, definitions, subjects, tuples
from .schemas import (
    AllowedSchema,
    CheckArgs,
    EvaluationSchema,
    PermissionArgs,
    RelationBody,
    RelationListArgs,
    RelationListSchema,
    RelationManyBody,
    RelationSchema,
    ResourceListArgs,
    ResourceListSchema,
    ResourcePatchSchema,
    ResourceSchema,
    RolesSchema,
    ScopeArgs,
)

blp = Blueprint(
    "authorization",
    __name__,
    description="Access control: a caller's checks; resource definitions, relation tuples and decisions (admin)",
)

BAD_INPUT = "Validation; a resource type that is not under access control; an unknown permission or scope"
NOT_MEMBER = "scope names a team the caller is not a member of"
UNKNOWN_RESOURCE = "No schema of this name is under access control"


def _resource(name: str) -> ResourceTable:
    """The opted-in schema called ``name`` (404 otherwise)."""
    found = catalog()
    resource = found.resource(name) if found is not None else None
    if resource is None:
        raise not_found(f"{name!r} is not a schema under access control")
    return resource


def _permission(resource: ResourceTable, action: str) -> str:
    permissions = definitions.definition(resource.name).permissions
    if action not in permissions:
        raise bad_request(
            f"{resource.name} has no permission {action!r}; it has {', '.join(sorted(permissions))}",
            {"action": ["Unknown permission"]},
        )
    return action


def _allowed(resource: ResourceTable, acting: Any, doc_id: str, action: str) -> bool:
    """The decision a request gets (one SELECT); false for a document that does not exist."""
    flags = decisions.allowed(resource, acting, doc_id, [action])
    return bool(flags and flags[action])


# ---- users ------------------------------------------------------------------------------------------------


@blp.route("/authorization/check", methods=["GET"])
@user_required
@blp.arguments(CheckArgs, location="query")
@blp.response(200, AllowedSchema)
@blp.alt_response(400, schema=ErrorSchema, description=BAD_INPUT)
@blp.alt_response(403, schema=ErrorSchema, description=NOT_MEMBER + "; or administrator credentials")
def check(args: dict[str, Any]):
    """Whether the caller (or the team of `scope`, which it must belong to) holds `action` on `resource`:
    `false` for a document it cannot reach or that does not exist."""
    acting = subjects.acting(require_user(), args.get("scope"))
    resource, doc_id = tuples.parse_resource(args["resource"])
    return {"allowed": _allowed(resource, acting, doc_id, _permission(resource, args["action"]))}


@blp.route("/authorization/role/<string:resource>", methods=["GET"])
@user_required
@blp.arguments(ScopeArgs, location="query")
@blp.response(200, RolesSchema)
@blp.alt_response(400, schema=ErrorSchema, description=BAD_INPUT)
@blp.alt_response(403, schema=ErrorSchema, description=NOT_MEMBER + "; or administrator credentials")
def role(args: dict[str, Any], resource: str):
    """The relations the caller (or the team of `scope`) holds on `resource` (`Schema:id`), through tuples
    and field-backed relations: `[]` for a document it cannot reach or that does not exist."""
    acting = subjects.acting(require_user(), args.get("scope"))
    table, doc_id = tuples.parse_resource(resource)
    return {"roles": decisions.roles(table, acting, doc_id)}


# ---- resource definitions -----------------------------------------------------------------------------------


@blp.route("/admin/authorization/resources", methods=["GET"])
@admin_required
@blp.arguments(ResourceListArgs, location="query")
@blp.response(200, ResourceListSchema)
def list_resources(args: dict[str, Any]):
    """The schemas under access control with their definitions, by name; `search` matches part of it."""
    found = catalog()
    names = sorted(found.names()) if found is not None else []
    if args.get("search"):
        names = [name for name in names if args["search"].lower() in name.lower()]
    page = names[args["skip"] : args["skip"] + args["limit"]]
    return {"resources": [definitions.definition(name).record() for name in page], "count": len(names)}


@blp.route("/admin/authorization/resources/<string:name>", methods=["GET"])
@admin_required
@blp.response(200, ResourceSchema)
@blp.alt_response(404, schema=ErrorSchema, description=UNKNOWN_RESOURCE)
def get_resource(name: str):
    """A schema's definition: its relations (with the subject types each admits) and permissions."""
    return definitions.definition(_resource(name).name).record()


@blp.route("/admin/authorization/resources/<string:name>", methods=["PATCH"])
@admin_required
@blp.arguments(ResourcePatchSchema)
@blp.response(200, ResourceSchema)
@blp.alt_response(400, schema=ErrorSchema, description="An unknown relation, field or permission; nothing is saved")
@blp.alt_response(404, schema=ErrorSchema, description=UNKNOWN_RESOURCE)
def update_resource(body: dict[str, Any], name: str):
    """Replace the keys sent (`relations`, `permissions`); in force for the next request of every process.
    Tuples of a relation that is removed stay, and grant nothing while it is absent."""
    return definitions.update(_resource(name), body).record()


# ---- relation tuples ---------------------------------------------------------------------------------------


def _grant(subject: str, relation: str, resources: list[str], key: str) -> list[dict[str, Any]]:
    """Grant ``relation`` to ``subject`` on every resource, all or nothing: 400 for an unknown resource
    type, relation or subject, a subject or document that does not exist, or a resource named twice; 409
    when one of the tuples exists."""
    subjects.parse(subject)
    if len(set(resources)) != len(resources):
        raise bad_request("A resource is named twice", {key: ["Repeated resource"]})
    by_type: dict[str, tuple[ResourceTable, list[str]]] = {}
    for text in resources:
        table, doc_id = tuples.parse_resource(text, key)
        by_type.setdefault(table.name, (table, []))[1].append(doc_id)
    for name in by_type:
        tuples.check_relation(name, relation, subject)
    subjects.check_exists([subject])
    for name, (table, doc_ids) in by_type.items():
        missing = set(doc_ids) - tuples.existing_documents(table, doc_ids)
        if missing:
            raise bad_request(f"No {name} document with id {min(missing)!r}", {key: ["Unknown document"]})
    granted: list[dict[str, Any]] = []
    for name, (_, doc_ids) in by_type.items():
        granted += tuples.grant(subject, relation, name, doc_ids)
    db.session.commit()
    return granted


@blp.route("/admin/authorization/relations", methods=["POST"])
@admin_required
@blp.arguments(RelationBody)
@blp.response(201, RelationSchema)
@blp.alt_response(
    400, schema=ErrorSchema, description="Unknown relation, subject or resource; no such subject or document"
)
@blp.alt_response(409, schema=ErrorSchema, description="The subject already holds this relation on the document")
def create_relation(body: dict[str, Any]):
    """Grant `relation` on `resource` (`Schema:id`) to `subject`; in force for the next request."""
    return _grant(body["subject"], body["relation"], [body["resource"]], "resource")[0]


@blp.route("/admin/authorization/relations/many", methods=["POST"])
@admin_required
@blp.arguments(RelationManyBody)
@blp.response(201, RelationListSchema)
@blp.alt_response(
    400, schema=ErrorSchema, description="As for one relation, for any of the resources; nothing is written"
)
@blp.alt_response(409, schema=ErrorSchema, description="The subject already holds this relation on one of them")
def create_relations(body: dict[str, Any]):
    """Grant `relation` to `subject` on every one of `resources`, all or nothing."""
    granted = _grant(body["subject"], body["relation"], body["resources"], "resources")
    return {"relations": granted, "count": len(granted)}


@blp.route("/admin/authorization/relations", methods=["GET"])
@admin_required
@blp.arguments(RelationListArgs, location="query")
@blp.response(200, RelationListSchema)
def list_relations(args: dict[str, Any]):
    """Relation tuples, newest first; the filters combine (AND)."""
    skip, limit = args.pop("skip"), args.pop("limit")
    found, count = tuples.find(args, skip, limit)
    return {"relations": found, "count": count}


@blp.route("/admin/authorization/relations/<string:relationId>", methods=["DELETE"])
@admin_required
@blp.response(200, DeletedSchema)
@blp.alt_response(404, schema=ErrorSchema, description="No relation with this id")
def delete_relation(relationId: str):
    """Remove a relation tuple; in force for the next request."""
    tuples.remove(relationId)
    db.session.commit()
    return deleted(relationId)


# ---- decisions on anybody's behalf ---------------------------------------------------------------------------


def _asked(args: dict[str, Any]) -> tuple[Any, ResourceTable, str, str]:
    acting = decisions.acting_as(args["subject"])
    resource, doc_id = tuples.parse_resource(args["resource"])
    return acting, resource, doc_id, _permission(resource, args["action"])


@blp.route("/admin/authorization/permissions/can", methods=["GET"])
@admin_required
@blp.arguments(PermissionArgs, location="query")
@blp.response(200, AllowedSchema)
@blp.alt_response(400, schema=ErrorSchema, description=BAD_INPUT + "; a subject that does not exist")
def can(args: dict[str, Any]):
    """Whether `subject` holds `action` on `resource`: a user with its teams (and their ancestors), a team
    as itself (as `scope=Team:<id>` does), a wildcard as itself."""
    acting, resource, doc_id, action = _asked(args)
    return {"allowed": _allowed(resource, acting, doc_id, action)}


@blp.route("/admin/authorization/permissions/evaluate", methods=["GET"])
@admin_required
@blp.arguments(PermissionArgs, location="query")
@blp.response(200, EvaluationSchema)
@blp.alt_response(400, schema=ErrorSchema, description=BAD_INPUT + "; a subject that does not exist")
def evaluate(args: dict[str, Any]):
    """`can`, with why: every chain of tuples, team memberships and field relations that grants it (none
    when denied). `allowed` is the decision requests get; the chains explain it."""
    acting, resource, doc_id, action = _asked(args)
    return {
        "allowed": _allowed(resource, acting, doc_id, action),
        "paths": decisions.evaluate(resource, acting, doc_id, action),
    }
