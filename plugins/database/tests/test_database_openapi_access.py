"""The per-schema OpenAPI paths of a schema under access control: ``scope`` on its document routes and
custom endpoints, its sharing routes with their bodies and errors, 403 on PUT/PATCH/DELETE; schemas that
do not opt in are unchanged. Then schemathesis over those paths as an administrator, a user and an
anonymous caller: no 5xx, and answers that match what is documented."""

from __future__ import annotations

import schemathesis

from trellis.testing.fuzzing import conformance
from trellis.testing.plugin import TEST_MASTER_KEY

ACCESS = {"conduit": {"authorization": {"enabled": True}}}
EXAMPLES_PER_OPERATION = 5


def _schemas(dbapi) -> None:
    dbapi.create_schema("Secret", {"title": {"type": "String", "required": True}, "n": "Number"}, modelOptions=ACCESS)
    dbapi.create_schema("Plain", {"title": "String"})
    by_n = {
        "inputs": [{"name": "n", "type": "Number", "location": "query"}],
        "query": {"AND": [{"schemaField": "n", "operation": "eq", "comparisonField": {"type": "Input", "value": "n"}}]},
    }
    for name, operation in (("secretFind", "GET"), ("secretDrop", "DELETE")):
        response = dbapi.client.post(
            "/admin/database/customEndpoints",
            json={"name": name, "operation": operation, "selectedSchema": "Secret", **by_n},
            headers=dbapi.admin,
        )
        assert response.status_code == 201, response.get_json()


def _parameter_names(operation: dict) -> set[str]:
    return {p["name"] for p in operation.get("parameters", [])}


def test_opted_in_schema_paths_show_scope_grants_and_403(dbapi):
    _schemas(dbapi)
    paths = dbapi.client.get("/openapi.json").get_json()["paths"]
    for path, methods in (
        ("/database/Secret", ("get", "post")),
        ("/database/Secret/many", ("post",)),
        ("/database/Secret/{id}", ("get", "put", "patch", "delete")),
        ("/database/function/secretFind", ("get",)),
    ):
        for method in methods:
            assert "scope" in _parameter_names(paths[path][method]), (path, method)
            assert "403" in paths[path][method]["responses"], (path, method)
    for method in ("put", "patch", "delete"):
        described = paths["/database/Secret/{id}"][method]["responses"]["403"]["description"]
        assert "may read" in described
    grants = paths["/database/Secret/{id}/grants"]
    assert set(grants) >= {"get", "post", "delete", "parameters"}
    assert grants["post"]["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/DatabaseGrantInput"
    }
    assert {"subject", "relation", "scope"} <= _parameter_names(grants["delete"])
    for method in ("get", "post", "delete"):
        assert {"401", "403", "404"} <= set(grants[method]["responses"]), method
    assert grants["post"]["responses"]["201"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/DatabaseGrant"
    }
    # not opted in: no scope, no grants, the generic grants route stands for none
    assert "scope" not in _parameter_names(paths["/database/Plain"]["get"])
    assert "403" not in paths["/database/Plain/{id}"]["put"]["responses"]
    assert "/database/Plain/{id}/grants" not in paths
    assert "/database/{schemaName}/{docId}/grants" not in paths


def test_schemathesis_over_the_paths_of_an_opted_in_schema(app, dbapi, make_user):
    _schemas(dbapi)
    user = make_user()
    dbapi.post("Secret", {"title": "seed", "n": 1}, headers=user.headers)
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app).include(
        path_regex=r"^/database/(Secret(/many|/\{id\}|/\{id\}/grants)?|function/secret\w+)$"
    )
    failures: dict[str, str] = {}
    labels = []
    for result in schema.get_all_operations():
        operation = result.ok()
        labels.append(operation.label)
        for headers in ({"masterkey": TEST_MASTER_KEY}, user.headers, {}):
            try:
                conformance(operation, headers, EXAMPLES_PER_OPERATION)()
            except Exception as exc:  # noqa: BLE001  (collect every failing operation, report them together)
                failures[f"{operation.label} {sorted(headers)}"] = str(exc)[:1500]
    assert len(labels) == 12, labels
    assert not failures, "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())
