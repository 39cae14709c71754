"""GraphQL over HTTP as third-party clients speak it: POST with ``extensions``, GET for queries (never
mutations), ``application/graphql-response+json``, ``extensions.code`` on every error, a GraphQL-shaped
401, non-null required fields; and a GraphQL schema that no odd admin schema can break."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from graphql import build_client_schema, get_introspection_query

GRAPHQL_RESPONSE = "application/graphql-response+json"


@pytest.fixture()
def notes(dbapi):
    dbapi.create_schema("Note", {"title": {"type": "String", "required": True}, "stars": "Number", "tags": ["String"]})
    dbapi.post("Note", {"title": "first", "stars": 3})
    return dbapi


def test_post_accepts_extensions_and_ignores_their_keys(notes):
    response = notes.client.post(
        "/graphql",
        headers=notes.admin,
        json={
            "query": "query Titles { Note { title } }",
            "operationName": "Titles",
            "variables": {},
            "extensions": {"clientLibrary": {"name": "@apollo/client", "version": "4"}, "persistedQuery": None},
        },
    )
    assert response.status_code == 200, response.get_json()
    assert response.get_json() == {"data": {"Note": [{"title": "first"}]}}
    assert response.mimetype == "application/json"


def test_get_serves_queries_with_variables(notes):
    query = "query Rated($min: Float) { Note(where: {stars_gte: $min}) { title stars } }"
    response = notes.client.get(
        "/graphql",
        headers=notes.admin,
        query_string={"query": query, "variables": json.dumps({"min": 2}), "operationName": "Rated"},
    )
    assert response.status_code == 200, response.get_json()
    assert response.get_json() == {"data": {"Note": [{"title": "first", "stars": 3.0}]}}
    none = notes.client.get(
        "/graphql", headers=notes.admin, query_string={"query": query, "variables": json.dumps({"min": 4})}
    )
    assert none.get_json() == {"data": {"Note": []}}


def test_mutation_over_get_is_405_and_not_executed(notes):
    for query, name in (
        ('mutation { createNote(data: {title: "sneaky"}) { _id } }', None),
        ('query A { Note { title } } mutation B { createNote(data: {title: "b"}) { _id } }', "B"),
    ):
        params = {"query": query, **({"operationName": name} if name else {})}
        response = notes.client.get("/graphql", headers=notes.admin, query_string=params)
        assert response.status_code == 405
        assert response.headers["Allow"] == "POST"
        assert response.get_json()["errors"][0]["extensions"]["code"] == "METHOD_NOT_ALLOWED"
    assert notes.list("Note")["count"] == 1


def test_get_with_bad_variables_is_a_graphql_error(notes):
    for variables in ("{not json", "[1, 2]"):
        response = notes.client.get(
            "/graphql", headers=notes.admin, query_string={"query": "{ Note { title } }", "variables": variables}
        )
        assert response.status_code == 400
        error = response.get_json()["errors"][0]
        assert error["extensions"]["code"] == "INVALID_ARGUMENTS" and "variables" in error["message"]


def test_graphql_response_media_type_and_status(notes):
    accept = {"Accept": f"{GRAPHQL_RESPONSE}, application/json;q=0.9", **notes.admin}
    ok = notes.client.post("/graphql", headers=accept, json={"query": "{ Note { title } }"})
    assert ok.status_code == 200 and ok.mimetype == GRAPHQL_RESPONSE
    cases = [
        ("{ Note { title ", "GRAPHQL_PARSE_FAILED"),
        ("{ Note { nothing } }", "GRAPHQL_VALIDATION_FAILED"),
        ("query ($n: Float!) { Note(where: {stars: $n}) { title } }", "INVALID_ARGUMENTS"),
    ]
    for query, code in cases:
        response = notes.client.post("/graphql", headers=accept, json={"query": query})
        assert response.status_code == 400 and response.mimetype == GRAPHQL_RESPONSE, query
        body = response.get_json()
        assert "data" not in body and body["errors"][0]["extensions"]["code"] == code, body
        # The legacy media type keeps 200 for the same request (what older clients expect).
        legacy = notes.client.post("/graphql", headers=notes.admin, json={"query": query})
        assert legacy.status_code == 200 and legacy.get_json()["errors"][0]["extensions"]["code"] == code
    executed = notes.client.post("/graphql", headers=accept, json={"query": "{ Note(limit: 0) { title } }"})
    assert executed.status_code == 200 and executed.get_json()["data"] is None  # execution started


def test_every_error_has_a_code(notes):
    queries = [
        "{ Note(limit: 5000) { title } }",
        '{ Note(sort: "nothing") { title } }',
        'mutation { deleteNote(_id: "missing") { _id } }',
        "{ Note { title ",
        "{ " + " ".join(f"a{i}: Note {{ title }}" for i in range(31)) + " }",
    ]
    for query in queries:
        body = notes.graphql(query, expect=200)
        assert body["errors"] and all(
            isinstance(e["message"], str) and e["extensions"]["code"] for e in body["errors"]
        ), (query, body)
    unknown_operation = notes.client.post(
        "/graphql", headers=notes.admin, json={"query": "query A { _schemas }", "operationName": "B"}
    ).get_json()
    assert unknown_operation["errors"][0]["extensions"]["code"] == "INVALID_ARGUMENTS"


def test_bad_credentials_and_bad_requests_answer_graphql_shaped(notes):
    for headers in ({"Authorization": "Bearer junk"}, {"masterkey": "wrong"}):
        for call in (
            lambda h: notes.client.post("/graphql", headers=h, json={"query": "{ _schemas }"}),
            lambda h: notes.client.get("/graphql", headers=h, query_string={"query": "{ _schemas }"}),
        ):
            response = call(headers)
            assert response.status_code == 401
            body = response.get_json()
            assert set(body) == {"errors"}
            assert body["errors"][0]["extensions"]["code"] == "UNAUTHORIZED" and body["errors"][0]["message"]
    for bad in ({}, {"query": 5}, {"query": "{ _schemas }", "extra": 1}):
        response = notes.client.post("/graphql", headers=notes.admin, json=bad)
        assert response.status_code == 400
        assert response.get_json()["errors"][0]["extensions"]["code"] == "INVALID_ARGUMENTS"
    missing = notes.client.get("/graphql", headers=notes.admin)
    assert missing.status_code == 400 and missing.get_json()["errors"][0]["extensions"]["code"]


def _type_of(types: dict[str, Any], type_name: str, field: str, kind: str = "fields") -> str:
    def show(ref: dict[str, Any]) -> str:
        if ref["kind"] == "NON_NULL":
            return show(ref["ofType"]) + "!"
        if ref["kind"] == "LIST":
            return "[" + show(ref["ofType"]) + "]"
        return ref["name"]

    return next(show(f["type"]) for f in types[type_name][kind] if f["name"] == field)


def test_required_fields_are_non_null_in_outputs_and_create_inputs(dbapi):
    dbapi.create_schema("Person", {"name": {"type": "String", "required": True}})
    dbapi.create_schema(
        "Card",
        {
            "title": {"type": "String", "required": True},
            "note": "String",
            "rank": {"type": "Number", "required": True, "default": 1},
            "labels": {"type": ["String"], "required": True},
            "owner": {"type": "Relation", "model": "Person", "required": True},
        },
    )
    types = {t["name"]: t for t in dbapi.graphql(get_introspection_query())["data"]["__schema"]["types"]}
    assert _type_of(types, "Card", "title") == "String!"
    assert _type_of(types, "Card", "note") == "String"
    assert _type_of(types, "Card", "rank") == "Float!"
    assert _type_of(types, "Card", "labels") == "[String!]!"
    assert _type_of(types, "Card", "owner") == "Person"  # a deleted target resolves to null
    assert _type_of(types, "Card__Input", "title", "inputFields") == "String!"
    assert _type_of(types, "Card__Input", "rank", "inputFields") == "Float"  # the default fills it
    assert _type_of(types, "Card__Input", "note", "inputFields") == "String"
    assert _type_of(types, "Card__Patch", "title", "inputFields") == "String"  # update merges


# ---- a GraphQL schema no admin schema can break -------------------------------------------------------

TYPES = ("String", "Number", "Boolean", "Date", "ObjectId", "JSON")


def odd_schemas() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Every kind of schema the admin API accepts that is odd for GraphQL: (name, fields, extra body)."""
    out: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
        ("Empty", {}, {}),
        ("EmptyNoTimestamps", {}, {"modelOptions": {"timestamps": False}}),
        ("OnlyJson", {"a": "JSON", "b": ["JSON"]}, {}),
        ("RequiredJson", {"a": {"type": "JSON", "required": True}}, {}),
        ("Groups", {"AND": "String", "OR": ["Number"], "a": "Number", "a_ne": "Number", "a_in": "String"}, {}),
        ("Query", {"a": "String"}, {}),
        ("Mutation", {"a": "String"}, {}),
        ("Subscription", {"a": "String"}, {}),
        ("JSON", {"a": "String"}, {}),
        ("String", {"a": "String"}, {}),
        ("ID", {"a": "String"}, {}),
        ("Int", {}, {}),
        ("Float", {"x": "Number"}, {}),
        ("Boolean", {"a": "Boolean"}, {}),
        ("Deleted__Result", {"a": "String"}, {}),
        ("Healthy", {"a": "String"}, {}),
        ("Healthy__Where", {"a": "String"}, {}),
        ("Healthy__Input", {}, {}),
        ("Healthy__Patch", {"b": "String"}, {}),
        ("X" * 63, {"y" * 60: "String"}, {}),
        (
            "SelfRef",
            {
                "parent": {"type": "Relation", "model": "SelfRef", "required": True},
                "children": [{"type": "Relation", "model": "SelfRef"}],
            },
            {},
        ),
        ("Hidden", {"a": "String"}, {"modelOptions": {"conduit": {"cms": {"enabled": False}}}}),
        ("ToHidden", {"h": {"type": "Relation", "model": "Hidden"}}, {}),
        ("ToUser", {"u": {"type": "Relation", "model": "User"}}, {}),
        (
            "Closed",
            {"a": "String"},
            {
                "modelOptions": {
                    "conduit": {
                        "cms": {
                            "crudOperations": {op: {"enabled": False} for op in ("create", "read", "update", "delete")}
                        }
                    }
                }
            },
        ),
    ]
    # Every type, alone, as an array, required, unique, with a default: one schema each.
    defaults = {"String": "d", "Number": 1, "Boolean": True, "Date": "2024-01-01", "ObjectId": "abc", "JSON": {}}
    for kind, array, required in itertools.product(TYPES, (False, True), (False, True)):
        definition: dict[str, Any] = {"type": [kind] if array else kind, "required": required}
        name = f"T{kind}{'Many' if array else ''}{'Req' if required else ''}"
        out.append((name, {"v": definition}, {}))
        if not array:
            out.append((name + "Def", {"v": {**definition, "default": defaults[kind]}}, {}))
    return out


def test_odd_schemas_never_break_another_schemas_api(dbapi):
    created = []
    for name, fields, extra in odd_schemas():
        response = dbapi.client.post(
            "/admin/database/schemas", json={"name": name, "fields": fields, **extra}, headers=dbapi.admin
        )
        assert response.status_code in (201, 400, 409), (name, response.get_json())
        if response.status_code == 201:
            created.append(name)
        # After every single schema, the API of a healthy schema still works.
        body = dbapi.graphql("{ _schemas }")
        assert "errors" not in body, (name, body)
    assert {
        "Empty",
        "OnlyJson",
        "Groups",
        "SelfRef",
        "ToHidden",
        "Healthy",
        "Healthy__Where",
        "Healthy__Input",
        "Healthy__Patch",
        "Deleted__Result",
    } <= set(created)
    dbapi.post("Healthy", {"a": "still here"})
    assert dbapi.graphql("{ Healthy { a } }") == {"data": {"Healthy": [{"a": "still here"}]}}
    served = set(dbapi.graphql("{ _schemas }")["data"]["_schemas"])
    assert {
        "Query",
        "Mutation",
        "JSON",
        "String",
        "Deleted__Result",
        "Hidden",
        "Healthy__Where",
        "Healthy__Input",
        "Healthy__Patch",
    }.isdisjoint(served)
    assert {"Empty", "OnlyJson", "Groups", "SelfRef", "ToHidden", "X" * 63, "TJSONManyReq"} <= served
    # The whole schema is valid for a client: introspection rebuilds it.
    build_client_schema(dbapi.graphql(get_introspection_query())["data"])
    # Each served schema answers a list query and its mutations exist.
    for name in served:
        body = dbapi.graphql(f"{{ {name} {{ _id }} }}")
        assert body == {"data": {name: []}} or body["data"][name] is not None, (name, body)


def test_stubbed_types_work(dbapi):
    dbapi.create_schema("Empty", {})
    dbapi.create_schema("Groups", {"AND": "String", "a": "Number", "a_ne": "Number"})
    made = dbapi.graphql("mutation { createEmpty { _id createdAt } }")
    assert made["data"]["createEmpty"]["_id"]
    assert dbapi.graphql("{ Empty { _id } }")["data"]["Empty"] == [{"_id": made["data"]["createEmpty"]["_id"]}]
    assert "errors" in dbapi.graphql('mutation { updateEmpty(_id: "x", data: {}) { _id } }')  # nothing to update
    dbapi.post("Groups", {"AND": "x", "a": 1, "a_ne": 5})
    dbapi.post("Groups", {"AND": "y", "a": 5, "a_ne": 1})
    # `a_ne` is the field of that name, never the operator on `a`.
    assert dbapi.graphql("{ Groups(where: {a_ne: 5}) { a } }")["data"]["Groups"] == [{"a": 1}]
    assert dbapi.graphql('{ Groups(where: {OR: [{a: 5}, {a_ne: 5}]}, sort: "a") { a } }')["data"]["Groups"] == [
        {"a": 1},
        {"a": 5},
    ]
