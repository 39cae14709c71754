"""Request and response bodies of the module's routes (validation and OpenAPI come from these).

They check shape and size only; what a subject, a relation or a resource means is checked against the
current definitions and documents by the routes (``subjects``, ``tuples``, ``definitions.check``), so a
schema never has to know the opted-in schemas.
"""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from trellis.fields import BoundedList
from trellis.http import ListArgs, list_schema

# Sizes: a subject is "User:" or "Team:" and a 64-character id; a resource "<Schema>:<id>" (63 + 1 + 64).
SUBJECT = validate.Length(min=1, max=100)
RESOURCE = validate.Length(min=3, max=128)
NAME = validate.Length(min=1, max=63)
MAX_RESOURCES_PER_CALL = 1000
# A definition is a handful of names; these bounds only stop a body from being huge.
MAX_NAMES = 50


def _subject(**kwargs: Any) -> fields.String:
    return fields.String(
        validate=SUBJECT, metadata={"description": "`User:<id>`, `Team:<id>`, `User:*` or `*`"}, **kwargs
    )


def _resource(**kwargs: Any) -> fields.String:
    return fields.String(validate=RESOURCE, metadata={"description": "`<Schema>:<documentId>`"}, **kwargs)


def _action(**kwargs: Any) -> fields.String:
    return fields.String(
        validate=validate.Length(min=1, max=32),
        metadata={"description": "a permission of the resource: `read`, `edit`, `delete`, `share` or one it adds"},
        **kwargs,
    )


# ---- user checks -----------------------------------------------------------------------------------------


class ScopeArgs(Schema):
    scope = fields.String(
        validate=SUBJECT, metadata={"description": "`Team:<id>`: act as that team (the caller must be a member)"}
    )


class CheckArgs(ScopeArgs):
    action = _action(required=True)
    resource = _resource(required=True)


class AllowedSchema(Schema):
    allowed = fields.Boolean(required=True)


class RolesSchema(Schema):
    roles = fields.List(fields.String(), required=True, metadata={"description": "relations the caller holds"})


# ---- resource definitions --------------------------------------------------------------------------------


_relations = fields.Dict(
    keys=fields.String(validate=validate.Length(min=1, max=32)),
    values=BoundedList(fields.String(validate=validate.Length(min=1, max=8)), max_items=3),
    validate=validate.Length(max=MAX_NAMES),
    metadata={"description": "relation → subject types it admits (`User`, `Team`, `*`)"},
)
_permissions = fields.Dict(
    keys=fields.String(validate=validate.Length(min=1, max=32)),
    values=BoundedList(fields.String(validate=validate.Length(min=1, max=100)), max_items=MAX_NAMES),
    validate=validate.Length(max=MAX_NAMES),
    metadata={"description": "permission → relations granting it, or `<field>-><permission>` (one hop)"},
)


class ResourceSchema(Schema):
    name = fields.String(required=True)
    relations = fields.Dict(keys=fields.String(), values=fields.List(fields.String()), required=True)
    permissions = fields.Dict(keys=fields.String(), values=fields.List(fields.String()), required=True)


ResourceListSchema = list_schema("AuthorizationResourceList", "resources", ResourceSchema)


class ResourceListArgs(ListArgs):
    search = fields.String(validate=validate.Length(max=63), metadata={"description": "part of the name"})


class ResourcePatchSchema(Schema):
    relations = _relations
    permissions = _permissions

    @validates_schema
    def _something(self, data: dict[str, Any], **_kwargs: Any) -> None:
        if not data:
            raise ValidationError("Send relations, permissions or both.", "_schema")


# ---- relations -------------------------------------------------------------------------------------------


class RelationBody(Schema):
    subject = _subject(required=True)
    relation = fields.String(required=True, validate=validate.Length(min=1, max=32))
    resource = _resource(required=True)


class RelationManyBody(Schema):
    subject = _subject(required=True)
    relation = fields.String(required=True, validate=validate.Length(min=1, max=32))
    resources = BoundedList(_resource(), required=True, min_items=1, max_items=MAX_RESOURCES_PER_CALL)


class RelationSchema(Schema):
    _id = fields.String(required=True)
    subject = fields.String(required=True)
    relation = fields.String(required=True)
    resource = fields.String(required=True)
    createdAt = fields.String(required=True)


RelationListSchema = list_schema("AuthorizationRelationList", "relations", RelationSchema)


class RelationListArgs(ListArgs):
    subject = _subject()
    relation = fields.String(validate=validate.Length(min=1, max=32))
    resource = _resource()
    subjectType = fields.String(validate=validate.OneOf(["User", "Team", "*"]))
    resourceType = fields.String(validate=NAME, metadata={"description": "a schema name"})


# ---- administrators' checks ------------------------------------------------------------------------------


class PermissionArgs(Schema):
    subject = _subject(required=True)
    action = _action(required=True)
    resource = _resource(required=True)


class EvaluationSchema(Schema):
    allowed = fields.Boolean(required=True)
    paths = fields.List(
        fields.List(fields.String()),
        required=True,
        metadata={"description": "each chain of tuples, team memberships and field relations that grants it"},
    )
