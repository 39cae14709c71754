"""/openapi.json documents the generated routes of every CMS-enabled schema and every custom endpoint,
computed per request so it follows admin changes."""

from __future__ import annotations

from typing import Any

from openapi_schema_validator import OAS30Validator, oas30_format_checker


def spec(client):
    response = client.get("/openapi.json")
    assert response.status_code == 200
    return response.get_json()


def test_schema_routes_appear_with_field_derived_schemas(dbapi):
    before = spec(dbapi.client)
    assert "/database/Gizmo" not in before["paths"]
    # The generic family is documented per schema instead (typed, one operation per schema).
    assert "/database/{schemaName}" not in before["paths"]
    dbapi.create_schema(
        "Gizmo",
        {
            "name": {"type": "String", "required": True},
            "price": "Number",
            "tags": ["String"],
            "maker": {"type": "Relation", "model": "Gizmo"},
        },
        modelOptions={"conduit": {"cms": {"crudOperations": {"delete": {"authenticated": True}}}}},
    )
    doc = spec(dbapi.client)
    paths = doc["paths"]
    assert set(paths["/database/Gizmo"]) == {"get", "post"}
    assert set(paths["/database/Gizmo/{id}"]) == {"parameters", "get", "put", "patch", "delete"}
    assert "post" in paths["/database/Gizmo/many"]
    schemas = doc["components"]["schemas"]
    document = schemas["DatabaseGizmoDocument"]
    assert document["properties"]["price"] == {"type": "number"}
    assert document["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}
    assert document["required"] == ["_id", "name"]
    assert schemas["DatabaseGizmoInput"]["additionalProperties"] is False
    post = paths["/database/Gizmo"]["post"]
    assert post["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/DatabaseGizmoInput"
    }
    assert "201" in post["responses"] and "409" in post["responses"]
    assert paths["/database/Gizmo/{id}"]["delete"]["security"] == [{"bearerAuth": []}, {"masterkey": []}]
    assert paths["/database/Gizmo"]["post"]["security"] == [{}, {"bearerAuth": []}, {"masterkey": []}]
    params = {p["name"]: p for p in paths["/database/Gizmo"]["get"]["parameters"]}
    assert {"skip", "limit", "sort", "select", "populate", "name", "price", "tags"} <= set(params)
    # Query operators are declared parameters (a generator makes arguments of them).
    assert params["price[$lt]"]["schema"] == {"type": "number"}
    assert {"price[$gte]", "price[$in]", "name[$contains]", "tags[$contains]", "maker[$exists]"} <= set(params)
    assert params["price[$in]"]["explode"] is False and params["price[$in]"]["schema"]["type"] == "array"
    assert "tags[$lt]" not in params  # arrays compare by membership only
    ids = {op["operationId"] for item in paths.values() for key, op in item.items() if key != "parameters"}
    assert {
        "listGizmo",
        "createGizmo",
        "createManyGizmo",
        "getGizmo",
        "replaceGizmo",
        "updateGizmo",
        "deleteGizmo",
    } <= ids
    for ref in ("Error", "Deleted"):
        assert ref in schemas  # the generated paths point at the static components


def test_custom_endpoints_appear_with_their_inputs(dbapi):
    dbapi.create_schema("Lamp", {"watts": "Number", "room": "String"})
    dbapi.client.post(
        "/admin/database/customEndpoints",
        headers=dbapi.admin,
        json={
            "name": "lampsIn",
            "operation": "GET",
            "selectedSchema": "Lamp",
            "paginated": True,
            "inputs": [
                {"name": "room", "type": "String", "location": "urlParams"},
                {"name": "minWatts", "type": "Number", "location": "query", "optional": True},
            ],
            "query": {
                "AND": [
                    {"schemaField": "room", "operation": "eq", "comparisonField": {"type": "Input", "value": "room"}},
                    {
                        "schemaField": "watts",
                        "operation": "gte",
                        "comparisonField": {"type": "Input", "value": "minWatts"},
                    },
                ]
            },
        },
    )
    dbapi.client.post(
        "/admin/database/customEndpoints",
        headers=dbapi.admin,
        json={
            "name": "addLamp",
            "operation": "POST",
            "selectedSchema": "Lamp",
            "authentication": True,
            "inputs": [{"name": "watts", "type": "Number", "location": "body"}],
            "assignments": [
                {"schemaField": "watts", "action": "set", "assignmentField": {"type": "Input", "value": "watts"}}
            ],
        },
    )
    paths = spec(dbapi.client)["paths"]
    get = paths["/database/function/lampsIn/{room}"]["get"]
    params = {p["name"]: p for p in get["parameters"]}
    assert params["room"]["in"] == "path" and params["minWatts"]["required"] is False
    assert {"skip", "limit", "populate"} <= set(params)
    post = paths["/database/function/addLamp"]["post"]
    assert post["security"] == [{"bearerAuth": []}, {"masterkey": []}]
    assert post["operationId"] == "customEndpointAddLamp"
    body = post["requestBody"]["content"]["application/json"]["schema"]
    assert body["properties"] == {"watts": {"type": "number"}} and body["required"] == ["watts"]


def test_custom_endpoints_are_one_swagger_group(dbapi):
    """The admin routes, the generic callers' paths and each endpoint's own path share one declared tag."""
    dbapi.create_schema("Lamp", {"watts": "Number"})
    response = dbapi.client.post(
        "/admin/database/customEndpoints",
        headers=dbapi.admin,
        json={"name": "lamps", "operation": "GET", "selectedSchema": "Lamp"},
    )
    assert response.status_code == 201, response.get_json()
    doc = spec(dbapi.client)
    tags = {
        path: operation["tags"]
        for path, item in doc["paths"].items()
        if path.startswith(("/admin/database/customEndpoints", "/database/function/"))
        for method, operation in item.items()
        if method != "parameters"
    }
    assert "/database/function/lamps" in tags and "/admin/database/customEndpoints" in tags
    assert {tuple(names) for names in tags.values()} == {("database-custom-endpoints",)}
    declared = [tag["name"] for tag in doc["tags"]]
    assert declared.count("database-custom-endpoints") == 1
    assert not [name for name in declared if "custom endpoints" in name.lower()]


def test_disabled_cms_schemas_are_left_out(dbapi):
    dbapi.create_schema("Quiet", {"a": "String"}, modelOptions={"conduit": {"cms": {"enabled": False}}})
    assert "/database/Quiet" not in spec(dbapi.client)["paths"]


def _response_validator(doc: dict[str, Any], path: str, status: str = "200") -> OAS30Validator:
    """What a client generated from the document expects of ``GET path``: its response schema, ``$ref``s
    resolved in the document."""
    schema = doc["paths"][path]["get"]["responses"][status]["content"]["application/json"]["schema"]
    return OAS30Validator({**schema, "components": doc["components"]}, format_checker=oas30_format_checker)


def test_a_relation_is_an_id_or_the_populated_document(dbapi, make_user):
    """A Relation field of a document is its id, or with ``?populate=`` the related document (a user's public
    fields; null for a deleted target); the bodies a client writes take ids only."""
    user = make_user()
    dbapi.create_schema("Board", {"name": {"type": "String", "required": True}})
    dbapi.create_schema(
        "Card",
        {
            "title": "String",
            "board": {"type": "Relation", "model": "Board", "required": True},
            "parent": {"type": "Relation", "model": "Card"},
            "links": {"type": ["Relation"], "model": "Card"},
            "author": {"type": "Relation", "model": "User"},
            "team": {"type": "Relation", "model": "Team"},
        },
    )
    board = dbapi.post("Board", {"name": "Roadmap"})
    gone = dbapi.post("Card", {"title": "gone", "board": board["_id"]})
    card = dbapi.post(
        "Card",
        {"title": "types", "board": board["_id"], "parent": gone["_id"], "links": [gone["_id"]], "author": user.id},
    )
    linked = dbapi.post("Card", {"title": "linked", "board": board["_id"], "links": [card["_id"]]})
    assert dbapi.client.delete(f"/database/Card/{gone['_id']}", headers=dbapi.admin).status_code == 200

    doc = spec(dbapi.client)
    schemas = doc["components"]["schemas"]
    board_ref = {"$ref": "#/components/schemas/DatabaseBoardDocument"}
    properties = schemas["DatabaseCardDocument"]["properties"]
    assert properties["board"]["oneOf"][1] == board_ref
    assert properties["board"]["oneOf"][0]["type"] == "string" and properties["board"]["oneOf"][0]["nullable"]
    assert properties["links"]["items"]["oneOf"][1] == {"$ref": "#/components/schemas/DatabaseCardDocument"}
    assert "nullable" not in properties["links"]["items"]["oneOf"][0]  # a deleted one is left out of an array
    assert properties["author"]["oneOf"][1] == {"$ref": "#/components/schemas/DatabasePublicUser"}
    assert schemas["DatabasePublicUser"]["required"] == ["_id", "email"]
    assert properties["team"] == {"type": "string", "description": "id of a Team document"}  # never populated
    # A client writes ids: create, replace and update bodies and the filters are unchanged.
    assert schemas["DatabaseCardInput"]["properties"]["board"] == {
        "type": "string",
        "description": "id of a Board document",
    }
    patch = doc["paths"]["/database/Card/{id}"]["patch"]["requestBody"]["content"]["application/json"]["schema"]
    assert patch["properties"]["links"] == {
        "type": "array",
        "items": {"type": "string", "description": "id of a Card document"},
    }

    one = _response_validator(doc, "/database/Card/{id}")
    plain = dbapi.client.get(f"/database/Card/{card['_id']}", headers=dbapi.admin).get_json()
    populated = dbapi.client.get(
        f"/database/Card/{card['_id']}?populate=board,parent,links,author", headers=dbapi.admin
    ).get_json()
    assert plain["board"] == board["_id"] and populated["board"]["name"] == "Roadmap"
    assert populated["parent"] is None and populated["links"] == []  # the deleted card
    assert populated["author"] == {"_id": user.id, "email": user.email}
    one.validate(plain)
    one.validate(populated)
    nested = dbapi.client.get(
        f"/database/Card/{linked['_id']}?populate=links,links.author,links.board", headers=dbapi.admin
    ).get_json()
    assert nested["links"][0]["author"]["email"] == user.email
    one.validate(nested)
    listing = dbapi.client.get("/database/Card?populate=board,author", headers=dbapi.admin).get_json()
    _response_validator(doc, "/database/Card").validate(listing)
    # Neither a number nor a document of another shape passes for a Relation.
    for wrong in (
        {**plain, "board": 5},
        {**populated, "board": {"name": "no id"}},
        {**plain, "links": [None]},
        {**populated, "author": {"email": user.email}},
    ):
        assert not one.is_valid(wrong), wrong
