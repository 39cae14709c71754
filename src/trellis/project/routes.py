"""The admin routes of project as code: export, plan, apply."""

from __future__ import annotations

from typing import Any

from flask import Response
from marshmallow import Schema, fields

from trellis.credentials import admin_required
from trellis.errors import ErrorSchema
from trellis.fields import JsonBoolean
from trellis.http import Blueprint, FreeFormSchema

from . import runner

blp = Blueprint("project", __name__, description="Project as code: export what administrators built, plan, apply")


class ProjectSchema(FreeFormSchema):
    """A project: `{version: 1, modules: {<module>: {config, <kind>: {<name>: thing}}}}`."""


class ProjectRequestSchema(Schema):
    project = fields.Dict(required=True, metadata={"description": "a project, as `GET /admin/project` gives it"})
    prune = JsonBoolean(
        load_default=False, metadata={"description": "delete the things of a named kind that the project lacks"}
    )


class DifferenceSchema(Schema):
    op = fields.String(required=True, metadata={"description": "add | remove | change"})
    path = fields.String(required=True, metadata={"description": "where in the thing (`fields.title.required`)"})
    from_ = fields.Raw(
        data_key="from", attribute="from", metadata={"description": "the stored value (secrets as `********`)"}
    )
    to = fields.Raw(metadata={"description": "the value the project gives (secrets as `********`)"})


class ChangeSchema(Schema):
    module = fields.String(required=True)
    kind = fields.String(required=True, metadata={"description": "schema, customEndpoint, resource, template, …"})
    name = fields.String(required=True)
    action = fields.String(required=True, metadata={"description": "create | update | delete"})
    detail = fields.List(fields.Nested(DifferenceSchema), metadata={"description": "what an update changes"})


class PlanSchema(Schema):
    changes = fields.List(fields.Nested(ChangeSchema), required=True)
    count = fields.Integer(required=True)


def _answer(changes: list[Any]) -> dict[str, Any]:
    return {"changes": runner.shown(changes), "count": len(changes)}


@blp.route("/admin/project", methods=["GET"])
@admin_required
@blp.response(200, ProjectSchema)
def export_project():
    """The project this server holds, as one stable JSON document (sorted keys: two exports of an unchanged
    server are byte-identical), secrets as `********`."""
    return Response(runner.dumps(runner.export()), mimetype="application/json")


@blp.route("/admin/project/plan", methods=["POST"])
@admin_required
@blp.arguments(ProjectRequestSchema)
@blp.response(200, PlanSchema)
@blp.alt_response(400, schema=ErrorSchema, description="The project is not valid; the message names the path")
@blp.alt_response(409, schema=ErrorSchema, description="Stored data would not survive a change; nothing changes")
def plan_project(body: dict[str, Any]):
    """What applying the project would change; nothing is changed."""
    return _answer(runner.plan(body["project"], body["prune"]))


@blp.route("/admin/project/apply", methods=["POST"])
@admin_required
@blp.arguments(ProjectRequestSchema)
@blp.response(200, PlanSchema)
@blp.alt_response(400, schema=ErrorSchema, description="The project is not valid; the message names the path")
@blp.alt_response(
    409, schema=ErrorSchema, description="Stored data would not survive a change, or another apply ran at once"
)
def apply_project(body: dict[str, Any]):
    """Apply the project in one transaction, all or nothing; answers the changes made (`count: 0` when the
    server already is what the project says)."""
    return _answer(runner.apply(body["project"], body["prune"]))
