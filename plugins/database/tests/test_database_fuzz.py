"""Schemathesis over the generated OpenAPI paths of a real schema and custom endpoints: whatever the
fuzzer sends (admin or anonymous), no 5xx and responses that match the documented schemas."""

import pytest
import schemathesis

from trellis.testing.fuzzing import conformance
from trellis.testing.plugin import TEST_MASTER_KEY

EXAMPLES_PER_OPERATION = 6


@pytest.mark.long
def test_generated_routes_never_fail(app, dbapi):
    dbapi.create_schema("FuzzMaker", {"name": {"type": "String", "required": True}})
    maker = dbapi.post("FuzzMaker", {"name": "m"})
    dbapi.create_schema(
        "Fuzz",
        {
            "title": {"type": "String", "required": True},
            "price": "Number",
            "code": {"type": "String", "unique": True},
            "when": "Date",
            "ok": "Boolean",
            "tags": ["String"],
            "meta": "JSON",
            "maker": {"type": "Relation", "model": "FuzzMaker"},
        },
    )
    dbapi.post("Fuzz", {"title": "seed", "price": 1, "code": "c1", "maker": maker["_id"]})
    response = dbapi.client.post(
        "/admin/database/customEndpoints",
        headers=dbapi.admin,
        json={
            "name": "fuzzFind",
            "operation": "GET",
            "selectedSchema": "Fuzz",
            "paginated": True,
            "sorted": True,
            "inputs": [
                {"name": "minPrice", "type": "Number", "location": "query", "optional": True},
                {"name": "code", "type": "String", "location": "urlParams"},
            ],
            "query": {
                "OR": [
                    {
                        "schemaField": "price",
                        "operation": "gte",
                        "comparisonField": {"type": "Input", "value": "minPrice"},
                    },
                    {"schemaField": "code", "operation": "eq", "comparisonField": {"type": "Input", "value": "code"}},
                ]
            },
        },
    )
    assert response.status_code == 201, response.get_json()
    response = dbapi.client.post(
        "/admin/database/customEndpoints",
        headers=dbapi.admin,
        json={
            "name": "fuzzAdd",
            "operation": "POST",
            "selectedSchema": "Fuzz",
            "inputs": [
                {"name": "title", "type": "String", "location": "body"},
                {"name": "price", "type": "Number", "location": "body", "optional": True},
            ],
            "assignments": [
                {"schemaField": "title", "action": "set", "assignmentField": {"type": "Input", "value": "title"}},
                {"schemaField": "price", "action": "set", "assignmentField": {"type": "Input", "value": "price"}},
            ],
        },
    )
    assert response.status_code == 201, response.get_json()

    schema = schemathesis.openapi.from_wsgi("/openapi.json", app).include(
        path_regex=r"^/(database/(Fuzz|function/fuzz|\{schemaName\})|graphql|admin/database/)"
    )
    failures: dict[str, str] = {}
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1
        for headers in ({"masterkey": TEST_MASTER_KEY}, {}):
            try:
                conformance(operation, headers, EXAMPLES_PER_OPERATION)()
            except Exception as exc:  # noqa: BLE001  (collect every failing operation, report them together)
                failures[f"{operation.label} {sorted(headers)}"] = str(exc)[:1500]
    assert operations >= 15
    assert not failures, "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())
