"""Project as code, the Database module's share: schemas and custom endpoints exported, planned, applied."""

from __future__ import annotations

from typing import Any

import pytest


class Project:
    def __init__(self, client: Any, admin: dict[str, str]) -> None:
        self.client, self.admin = client, admin

    def export(self) -> dict[str, Any]:
        response = self.client.get("/admin/project", headers=self.admin)
        assert response.status_code == 200, response.get_json()
        return response.get_json()

    def plan(self, project: dict[str, Any], expect: int = 200, prune: bool = False) -> dict[str, Any]:
        response = self.client.post(
            "/admin/project/plan", json={"project": project, "prune": prune}, headers=self.admin
        )
        assert response.status_code == expect, response.get_json()
        return response.get_json()

    def apply(self, project: dict[str, Any], expect: int = 200, prune: bool = False) -> dict[str, Any]:
        response = self.client.post(
            "/admin/project/apply", json={"project": project, "prune": prune}, headers=self.admin
        )
        assert response.status_code == expect, response.get_json()
        return response.get_json()


@pytest.fixture()
def project(client, admin_headers) -> Project:
    return Project(client, admin_headers)


def database(schemas: dict[str, Any] | None = None, endpoints: dict[str, Any] | None = None) -> dict[str, Any]:
    section: dict[str, Any] = {}
    if schemas is not None:
        section["schemas"] = schemas
    if endpoints is not None:
        section["customEndpoints"] = endpoints
    return {"version": 1, "modules": {"database": section}}


TASK = {"fields": {"title": {"type": "String", "required": True}, "done": "Boolean"}}


def test_export_shows_admin_schemas_and_endpoints_without_ids(project, dbapi):
    dbapi.create_schema("Task", TASK["fields"], modelOptions={"conduit": {"cms": {"enabled": False}}})
    response = dbapi.client.post(
        "/admin/database/customEndpoints",
        json={
            "name": "openTasks",
            "operation": "GET",
            "selectedSchema": "Task",
            "query": {
                "schemaField": "done",
                "operation": "eq",
                "comparisonField": {"type": "Custom", "value": "false"},
            },
        },
        headers=dbapi.admin,
    )
    assert response.status_code == 201, response.get_json()
    exported = project.export()
    task = exported["modules"]["database"]["schemas"]["Task"]
    assert task["fields"] == {"title": {"type": "String", "required": True}, "done": {"type": "Boolean"}}
    assert task["modelOptions"]["conduit"]["cms"]["enabled"] is False
    assert "User" not in exported["modules"]["database"]["schemas"]  # owned by Authentication, not admin-made
    endpoint = exported["modules"]["database"]["customEndpoints"]["openTasks"]
    assert endpoint["selectedSchema"] == "Task" and endpoint["operation"] == "GET"
    text = dbapi.client.get("/admin/project", headers=dbapi.admin).get_data(as_text=True)
    assert "_id" not in text and "createdAt" not in text and '"__v"' not in text
    assert text == dbapi.client.get("/admin/project", headers=dbapi.admin).get_data(as_text=True)
    assert project.plan(exported) == {"changes": [], "count": 0}


def test_a_written_project_applies_once_and_then_plans_nothing(project, dbapi):
    wanted = database(
        {
            "Project": {"fields": {"name": "String"}},
            "Task": {"fields": {**TASK["fields"], "project": {"type": "Relation", "model": "Project"}}},
        },
        {
            "byProject": {
                "operation": "GET",
                "selectedSchema": "Task",
                "inputs": [{"name": "p", "type": "String", "location": "query"}],
                "query": {
                    "schemaField": "project",
                    "operation": "eq",
                    "comparisonField": {"type": "Input", "value": "p"},
                },
            }
        },
    )
    planned = project.plan(wanted)
    assert [(c["kind"], c["name"], c["action"]) for c in planned["changes"]] == [
        ("schema", "Project", "create"),
        ("schema", "Task", "create"),
        ("customEndpoint", "byProject", "create"),
    ]
    assert (
        dbapi.client.get("/admin/database/schemas/Task", headers=dbapi.admin).status_code == 404
    )  # a plan keeps nothing
    assert project.apply(wanted) == planned
    dbapi.post("Task", {"title": "write docs"})
    dbapi.post("Task", {"done": True}, expect=400)  # title is required, as the project says
    assert project.apply(wanted) == {"changes": [], "count": 0}
    assert project.plan(project.export()) == {"changes": [], "count": 0}


def test_an_update_says_what_changes(project, dbapi):
    project.apply(database({"Task": TASK}))
    changed = {
        "fields": {
            "title": {"type": "String", "required": True, "maxLength": 200},
            "priority": {"type": "Number", "default": 1},
        },
        "modelOptions": {"conduit": {"cms": {"crudOperations": {"delete": {"enabled": False}}}}},
    }
    planned = project.plan(database({"Task": changed}))
    assert planned["count"] == 1
    (change,) = planned["changes"]
    assert (change["kind"], change["name"], change["action"]) == ("schema", "Task", "update")
    detail = {(d["op"], d["path"]): d for d in change["detail"]}
    assert detail[("add", "fields.priority")]["to"] == {"type": "Number", "default": 1}
    assert detail[("remove", "fields.done")]["from"] == {"type": "Boolean"}
    assert ("add", "fields.title.maxLength") in detail
    options = detail[("change", "modelOptions.conduit.cms.crudOperations.delete.enabled")]
    assert (options["from"], options["to"]) == (True, False)
    project.apply(database({"Task": changed}))
    schema = dbapi.client.get("/admin/database/schemas/Task", headers=dbapi.admin).get_json()
    assert set(schema["fields"]) == {"title", "priority"}


def test_a_change_stored_documents_would_not_survive_is_409_naming_schema_and_field(project, dbapi):
    project.apply(database({"Task": {"fields": {"title": "String", "note": "String", "code": "String"}}}))
    dbapi.post("Task", {"title": "a", "note": "not a number", "code": "x"})
    dbapi.post("Task", {"note": "12", "code": "x"})
    cases = [
        ({"title": {"type": "String", "required": True}, "note": "String", "code": "String"}, "title"),
        ({"title": "String", "note": "Number", "code": "String"}, "note"),
        ({"title": "String", "note": "String", "code": {"type": "String", "unique": True}}, "code"),
    ]
    before = project.export()
    for fields, field in cases:
        for call in (project.plan, project.apply):
            refused = call(database({"Task": {"fields": fields}, "Other": {"fields": {"x": "String"}}}), expect=409)
            assert "Task" in refused["message"] and field in refused["message"], refused
            assert f"modules.database.schemas.Task.fields.{field}" in refused["errors"], refused
    assert project.export() == before  # nothing applied: not even the schema Other
    assert len(dbapi.list("Task")["documents"]) == 2


def test_prune_never_deletes_a_schema_with_documents(project, dbapi):
    project.apply(database({"Keep": {"fields": {"x": "String"}}, "Empty": {"fields": {"x": "String"}}}))
    dbapi.post("Keep", {"x": "1"})
    unnamed = {"version": 1, "modules": {"database": {}}}
    assert project.plan(unnamed, prune=True)["count"] == 0  # a kind the project does not name is left alone
    refused = project.apply(database({"Other": {"fields": {}}}), expect=409, prune=True)
    assert "Keep" in refused["message"] and "document" in refused["message"]
    assert dbapi.client.get("/admin/database/schemas/Other", headers=dbapi.admin).status_code == 404
    assert dbapi.client.get("/admin/database/schemas/Empty", headers=dbapi.admin).status_code == 200
    assert project.plan(database({"Keep": {"fields": {"x": "String"}}}), prune=True)["changes"] == [
        {"module": "database", "kind": "schema", "name": "Empty", "action": "delete"}
    ]
    project.apply(database({"Keep": {"fields": {"x": "String"}}}), prune=True)
    assert dbapi.client.get("/admin/database/schemas/Empty", headers=dbapi.admin).status_code == 404


@pytest.mark.parametrize(
    ("wanted", "path"),
    [
        ({"version": 2, "modules": {}}, "version"),
        ({"version": 1, "modules": {"nosuch": {}}}, "modules.nosuch"),
        ({"version": 1, "modules": {"database": {"tables": {}}}}, "modules.database.tables"),
        ({"version": 1, "modules": {"database": {"schemas": []}}}, "modules.database.schemas"),
        (database({"1bad": {"fields": {}}}), "modules.database.schemas.1bad.name"),
        (database({"Task": {"fields": {"x": "Colour"}}}), "modules.database.schemas.Task.fields.x"),
        (database({"Task": {"fields": {}, "indexes": []}}), "modules.database.schemas.Task.indexes"),
        (
            database({"Task": {"fields": {}, "modelOptions": {"timestamps": "yes"}}}),
            "modules.database.schemas.Task.modelOptions.timestamps",
        ),
        (
            database({"Task": {"fields": {"p": {"type": "Relation", "model": "Nowhere"}}}}),
            "modules.database.schemas.Task.fields.p.model",
        ),
        (
            database({}, {"e": {"operation": "GET", "selectedSchema": "Nowhere"}}),
            "modules.database.customEndpoints.e.selectedSchema",
        ),
        (
            database({}, {"e": {"operation": "FETCH", "selectedSchema": "Task"}}),
            "modules.database.customEndpoints.e.operation",
        ),
    ],
)
def test_an_invalid_project_is_400_naming_the_path(project, dbapi, wanted, path):
    for call in (project.plan, project.apply):
        refused = call(wanted, expect=400)
        assert path in refused["message"] and path in refused["errors"], refused
    assert (
        "schemas" not in project.export()["modules"]["database"]
        or not project.export()["modules"]["database"]["schemas"]
    )


def test_an_endpoint_on_a_schema_the_project_prunes_is_400(project, dbapi):
    project.apply(database({"Task": TASK}, {"all": {"operation": "GET", "selectedSchema": "Task"}}))
    refused = project.plan(
        database({}, {"all": {"operation": "GET", "selectedSchema": "Task"}}), expect=400, prune=True
    )
    assert "modules.database.customEndpoints.all.selectedSchema" in refused["message"]
