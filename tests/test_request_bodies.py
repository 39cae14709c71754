"""What every JSON request body shares: arrays bounded (and documented as maxItems), booleans that are JSON
booleans, PUT/PATCH that need a body, and the 415/409 answers and media types routes give, in /openapi.json."""

from __future__ import annotations

from typing import Any

import pytest


def _resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    return doc["components"]["schemas"][ref.rsplit("/", 1)[1]] if ref else schema


def _unbounded_arrays(doc: dict[str, Any], schema: dict[str, Any], where: str, seen: set[str]) -> list[str]:
    ref = schema.get("$ref")
    if ref:
        if ref in seen:
            return []
        seen = seen | {ref}
    schema = _resolve(doc, schema)
    found = []
    if schema.get("type") == "array":
        if "maxItems" not in schema:
            found.append(where)
        found += _unbounded_arrays(doc, schema.get("items", {}), where + "[]", seen)
    for name, inner in (schema.get("properties") or {}).items():
        found += _unbounded_arrays(doc, inner, f"{where}.{name}", seen)
    return found


def _operations(doc: dict[str, Any]):
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if isinstance(operation, dict) and "responses" in operation:
                yield path, method, operation


def test_every_array_in_a_json_request_body_declares_max_items(client):
    doc = client.get("/openapi.json").get_json()
    unbounded = []
    for path, method, operation in _operations(doc):
        content = (operation.get("requestBody") or {}).get("content", {})
        if "application/json" in content:
            unbounded += _unbounded_arrays(
                doc, content["application/json"]["schema"], f"{method.upper()} {path}", set()
            )
    assert unbounded == []


def test_json_bodies_document_415_and_database_writes_document_409(client):
    doc = client.get("/openapi.json").get_json()
    missing = [
        f"{method.upper()} {path}"
        for path, method, operation in _operations(doc)
        if "application/json" in (operation.get("requestBody") or {}).get("content", {})
        and "415" not in operation["responses"]
    ]
    assert missing == []
    paths = doc["paths"]
    for path, method in [
        ("/admin/database/schemas", "post"),
        ("/database/schemas", "post"),
        ("/admin/database/schemas/{schemaId}", "put"),
        ("/admin/database/schemas/{schemaId}", "delete"),
        ("/admin/database/customEndpoints", "post"),
        ("/admin/database/customEndpoints/{endpointId}", "put"),
        ("/admin/database/customEndpoints/{endpointId}", "patch"),
        ("/admin/database/schemas/{schemaId}/extensions", "post"),
        ("/database/function/{endpointName}", "post"),
    ]:
        assert "409" in paths[path][method]["responses"], (method, path)


def test_graphql_documents_both_media_types(client):
    graphql = client.get("/openapi.json").get_json()["paths"]["/graphql"]
    for method, statuses in (("post", ("200", "400", "401", "415")), ("get", ("200", "400", "401", "405"))):
        for status in statuses:
            content = graphql[method]["responses"][status]["content"]
            assert {"application/json", "application/graphql-response+json"} <= set(content), (method, status)
            assert content["application/json"]["schema"] == {"$ref": "#/components/schemas/GraphQLResponse"}


@pytest.fixture()
def records(client, admin_headers):
    """One record behind each kind of PUT/PATCH route that takes a JSON body."""
    schema = client.post(
        "/admin/database/schemas", json={"name": "Kept", "fields": {"title": "String"}}, headers=admin_headers
    ).get_json()
    doc = client.post("/database/Kept", json={"title": "stays"}, headers=admin_headers).get_json()
    endpoint = client.post(
        "/admin/database/customEndpoints",
        json={"name": "keptList", "operation": "GET", "selectedSchema": "Kept"},
        headers=admin_headers,
    ).get_json()
    form = client.post(
        "/admin/forms", json={"name": "kept", "fields": [{"name": "a", "type": "text"}]}, headers=admin_headers
    ).get_json()
    return {"schema": schema["_id"], "doc": doc["_id"], "endpoint": endpoint["_id"], "form": form["_id"]}


def test_put_and_patch_without_a_body_are_a_400(client, admin_headers, records):
    for method, path in [
        ("PUT", "/config/chat"),
        ("PUT", f"/admin/database/schemas/{records['schema']}"),
        ("PUT", f"/database/Kept/{records['doc']}"),
        ("PATCH", f"/database/Kept/{records['doc']}"),
        ("PUT", f"/admin/database/customEndpoints/{records['endpoint']}"),
        ("PATCH", f"/admin/database/customEndpoints/{records['endpoint']}"),
        ("PUT", f"/admin/forms/{records['form']}"),
    ]:
        response = client.open(path, method=method, headers=admin_headers)
        assert response.status_code == 400, (method, path, response.get_json())
        assert response.get_json()["name"] == "INVALID_ARGUMENTS"
    kept = client.get(f"/database/Kept/{records['doc']}", headers=admin_headers).get_json()
    assert kept["title"] == "stays"
    # An empty object is a body: a PATCH that changes nothing.
    assert client.patch(f"/database/Kept/{records['doc']}", json={}, headers=admin_headers).status_code == 200


@pytest.mark.parametrize("value", ["true", 1, "yes", 0, "false"])
def test_booleans_in_bodies_are_json_booleans(client, admin_headers, records, value):
    for method, path, body in [
        ("PUT", "/config/chat", {"active": value}),
        ("PUT", "/config/chat", {"allowMessageDelete": value}),
        ("PUT", f"/admin/forms/{records['form']}", {"enabled": value}),
        ("PATCH", f"/admin/database/customEndpoints/{records['endpoint']}", {"paginated": value}),
        ("POST", "/admin/webhooks", {"url": "https://example.com/hook", "events": ["*"], "active": value}),
    ]:
        response = client.open(path, method=method, json=body, headers=admin_headers)
        assert response.status_code == 400, (method, path, body, response.get_json())
        assert body.keys() - {"url", "events"} <= set(response.get_json()["errors"])
    assert client.put("/config/chat", json={"allowMessageDelete": False}, headers=admin_headers).status_code == 200


@pytest.mark.parametrize("body", ["[1, 2]", '"text"', "3", "null"])
def test_a_free_form_body_that_is_not_an_object_is_a_400(client, admin_headers, records, body):
    """Documents and form submissions take any object (their route checks the keys); the parser takes an
    object as it is and sends anything else through marshmallow, whose answer names ``_schema``."""
    for method, path in [
        ("POST", "/database/Kept"),
        ("PUT", f"/database/Kept/{records['doc']}"),
        ("PATCH", f"/database/Kept/{records['doc']}"),
        ("POST", f"/forms/submit/{records['form']}"),
    ]:
        response = client.open(path, method=method, data=body, content_type="application/json", headers=admin_headers)
        assert response.status_code == 400, (method, path, response.get_json())
        assert response.get_json()["errors"] == {"_schema": ["Invalid input type."]}
    assert client.get(f"/database/Kept/{records['doc']}", headers=admin_headers).get_json()["title"] == "stays"
    # An object reaches the route with its keys as sent: an unknown one is named, a known one is written.
    unknown = client.patch(f"/database/Kept/{records['doc']}", json={"nope": 1}, headers=admin_headers)
    assert unknown.status_code == 400 and "nope" in unknown.get_json()["errors"]
    changed = client.patch(f"/database/Kept/{records['doc']}", json={"title": "new"}, headers=admin_headers)
    assert changed.get_json()["title"] == "new"
