"""Custom endpoint definitions checked by marshmallow: errors keyed by path (every one at once), the
enumerations (names or Conduit's numbers), rules between fields on create and on a merged update, and
the nested definition in /openapi.json."""

import pytest

ENDPOINTS = "/admin/database/customEndpoints"


@pytest.fixture()
def order(dbapi):
    return dbapi.create_schema(
        "Order",
        {"item": {"type": "String", "required": True}, "qty": "Number", "labels": ["String"], "paid": "Boolean"},
    )


def post(dbapi, body):
    return dbapi.client.post(ENDPOINTS, json=body, headers=dbapi.admin)


def refused(response):
    """The errors of a 400 INVALID_ARGUMENTS, which are an object of field path → reasons."""
    payload = response.get_json()
    assert response.status_code == 400, payload
    assert payload["name"] == "INVALID_ARGUMENTS" and payload["status"] == 400
    errors = payload["errors"]
    assert isinstance(errors, dict) and all(isinstance(reasons, list) and reasons for reasons in errors.values())
    return errors


def cond(field, operation, kind, value, **extra):
    return {"schemaField": field, "operation": operation, "comparisonField": {"type": kind, "value": value, **extra}}


def get_endpoint(**extra):
    return {"name": "e", "operation": "GET", "selectedSchema": "Order", **extra}


def test_nested_errors_are_keyed_by_path_all_at_once(dbapi, order):
    body = get_endpoint(
        inputs=[
            {"name": "ok", "type": "String", "location": "query"},
            {"name": "bad", "type": "Text", "location": "cookie", "color": "red"},
        ],
        query={
            "AND": [
                cond("item", "eq", "Input", "ok"),
                {"OR": [cond("qty", "between", "Custom", 1), cond("item", "eq", "Guess", 1)]},
                {"schemaField": "item", "operation": "eq"},
            ]
        },
    )
    errors = refused(post(dbapi, body))
    assert set(errors) == {
        "inputs.1.type",
        "inputs.1.location",
        "inputs.1.color",
        "query.AND.1.OR.0.operation",
        "query.AND.1.OR.1.comparisonField.type",
        "query.AND.2.comparisonField",
    }
    assert errors["inputs.1.color"] == ["Unknown field."]
    assert errors["query.AND.2.comparisonField"] == ["Missing data for required field."]


@pytest.mark.parametrize(
    "change,key,choices",
    [
        ({"operation": "FETCH"}, "operation", "GET, POST, PUT, DELETE, PATCH (or 0..4)"),
        ({"operation": 5}, "operation", "GET, POST, PUT, DELETE, PATCH (or 0..4)"),
        ({"operation": True}, "operation", "GET, POST, PUT, DELETE, PATCH (or 0..4)"),
        ({"operation": -1}, "operation", "GET, POST, PUT, DELETE, PATCH (or 0..4)"),
        ({"inputs": [{"name": "a", "type": "String", "location": 3}]}, "inputs.0.location", "body, query, urlParams"),
        ({"inputs": [{"name": "a", "type": "Relation", "location": "query"}]}, "inputs.0.type", "String"),
        ({"query": {"AND": [cond("qty", 9, "Custom", 1)]}}, "query.AND.0.operation", "eq, ne, gt"),
        ({"query": {"AND": [cond("qty", "eq", "Constant", 1)]}}, "query.AND.0.comparisonField.type", "Input"),
        (
            {
                "operation": "PATCH",
                "query": {"AND": [cond("qty", "eq", "Custom", 1)]},
                "assignments": [{"schemaField": "qty", "action": "multiply", "assignmentField": {"type": "Custom"}}],
            },
            "assignments.0.action",
            "set, increment, decrement, append, remove",
        ),
    ],
)
def test_enumerations_refuse_what_is_not_among_them(dbapi, order, change, key, choices):
    errors = refused(post(dbapi, get_endpoint(**change)))
    assert list(errors) == [key]
    assert choices in errors[key][0]


def test_names_in_any_case_and_conduit_numbers_are_stored_as_names(dbapi, order):
    response = post(
        dbapi,
        {
            "name": "bump",
            "operation": 4,
            "selectedSchema": "Order",
            "inputs": [
                {"name": "id", "type": "ObjectId", "location": 2},
                {"name": "tag", "type": "String", "location": 0},
            ],
            "query": {"AND": [cond("_id", 0, "Input", "id"), {"OR": [cond("qty", "GTE", "Custom", 0)]}]},
            "assignments": [
                {"schemaField": "qty", "action": 1, "assignmentField": {"type": "Custom", "value": 1}},
                {"schemaField": "labels", "action": "Append", "assignmentField": {"type": "Input", "value": "tag"}},
            ],
        },
    )
    assert response.status_code == 201, response.get_json()
    created = response.get_json()
    assert created["operation"] == "PATCH" and created["path"] == "/database/function/bump/{id}"
    assert [i["location"] for i in created["inputs"]] == ["urlParams", "body"]
    assert created["inputs"][1] == {
        "name": "tag",
        "type": "String",
        "location": "body",
        "optional": False,
        "array": False,
    }
    assert created["query"]["AND"][0]["operation"] == "eq" and created["query"]["AND"][1]["OR"][0]["operation"] == "gte"
    assert [a["action"] for a in created["assignments"]] == ["increment", "append"]
    doc = dbapi.post("Order", {"item": "pear", "qty": 1, "labels": []})
    response = dbapi.client.patch(f"/database/function/bump/{doc['_id']}", json={"tag": "ripe"})
    assert response.status_code == 200, response.get_json()
    assert response.get_json()["documents"][0]["qty"] == 2 and response.get_json()["documents"][0]["labels"] == ["ripe"]


@pytest.mark.parametrize(
    "change,key",
    [
        ({"query": {"AND": [], "OR": []}}, "query"),
        ({"query": {"AND": [{"AND": [], "schemaField": "qty"}]}}, "query.AND.0"),
        ({"query": {"AND": [{"NOT": []}]}}, "query.AND.0"),
        ({"query": {"AND": ["item"]}}, "query.AND.0"),
        ({"query": {"AND": [cond("qty", "eq", "Context", "caller.id")]}}, "query.AND.0.comparisonField.value"),
        ({"query": {"AND": [cond("qty", "eq", "Input", "nothing")]}}, "query.AND.0.comparisonField.value"),
        ({"query": {"OR": [cond("qty", "eq", "Custom", i) for i in range(100)]}}, "query"),
        (
            {"inputs": [{"name": "a", "type": "String", "location": "query"}] * 2},
            "inputs.1.name",
        ),
        ({"inputs": [{"name": "a", "type": "String", "location": "urlParams", "optional": True}]}, "inputs.0.optional"),
        ({"inputs": [{"name": "limit", "type": "Number", "location": "query"}]}, "inputs.0.name"),
        ({"operation": "DELETE", "query": {}}, "query"),
        ({"sorted": True, "operation": "DELETE", "query": {"AND": [cond("qty", "eq", "Custom", 1)]}}, "sorted"),
    ],
)
def test_rules_of_the_body_itself(dbapi, order, change, key):
    assert key in refused(post(dbapi, get_endpoint(**change)))


def test_a_query_node_of_the_wrong_kind_is_refused_at_its_path(dbapi, order):
    errors = refused(
        post(
            dbapi,
            get_endpoint(
                operation="PUT",
                query={"AND": [cond("qty", "eq", "Custom", 1)]},
                assignments=[
                    {
                        "schemaField": "qty",
                        "action": "set",
                        "assignmentField": {"type": "Custom", "value": 1, "like": True},
                    }
                ],
            ),
        )
    )
    assert errors == {"assignments.0.assignmentField.like": ["Unknown field."]}


def test_checks_against_the_schema_report_every_field(dbapi, order):
    errors = refused(
        post(
            dbapi,
            get_endpoint(
                operation="PUT",
                query={"AND": [cond("nope", "eq", "Custom", 1), cond("labels", "lt", "Custom", "a")]},
                assignments=[
                    {"schemaField": "paid", "action": "increment", "assignmentField": {"type": "Custom", "value": 1}},
                    {"schemaField": "qty", "action": "set", "assignmentField": {"type": "Custom", "value": "many"}},
                ],
            ),
        )
    )
    assert set(errors) == {
        "query.AND.0.schemaField",
        "query.AND.1.operation",
        "assignments.0.action",
        "assignments.1.assignmentField.value",
    }


def test_an_update_is_checked_merged_over_the_current_definition(dbapi, order):
    created = post(dbapi, get_endpoint(query={"AND": [cond("qty", "gt", "Custom", 1)]})).get_json()
    url = f"{ENDPOINTS}/{created['_id']}"
    # Alone, {"operation": "DELETE"} has no query: merged over the current one, it does.
    response = dbapi.client.put(url, json={"operation": "DELETE"}, headers=dbapi.admin)
    assert response.status_code == 200 and response.get_json()["operation"] == "DELETE", response.get_json()
    errors = refused(dbapi.client.put(url, json={"operation": 2}, headers=dbapi.admin))
    assert errors == {"assignments": ["A PUT endpoint needs at least one assignment"]}
    errors = refused(
        dbapi.client.patch(url, json={"query": {"AND": [cond("qty", "eq", "Input", "q")]}}, headers=dbapi.admin)
    )
    assert errors == {"query.AND.0.comparisonField.value": ["No input named 'q'"]}
    errors = refused(dbapi.client.patch(url, json={"inputs": [{"name": "q", "type": 1}]}, headers=dbapi.admin))
    assert set(errors) == {"inputs.0.type", "inputs.0.location"}
    assert dbapi.client.get(url, headers=dbapi.admin).get_json()["__v"] == 1  # the refused changes left it alone


def test_openapi_documents_the_nested_definition(client):
    doc = client.get("/openapi.json").get_json()
    components = doc["components"]["schemas"]
    body = doc["paths"][ENDPOINTS]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/EndpointBody"}
    definition = components["EndpointBody"]["properties"]
    assert definition["operation"]["enum"] == ["GET", "POST", "PUT", "DELETE", "PATCH"]
    assert definition["inputs"]["items"] == {"$ref": "#/components/schemas/EndpointInput"}
    assert definition["assignments"]["items"] == {"$ref": "#/components/schemas/EndpointAssignment"}
    assert {"$ref": "#/components/schemas/EndpointQueryNode"} in definition["query"]["anyOf"]
    assert components["EndpointInput"]["properties"]["location"]["enum"] == ["body", "query", "urlParams"]
    assert set(components["EndpointInput"]["required"]) == {"name", "type", "location"}
    node = components["EndpointQueryNode"]["properties"]
    assert node["AND"]["items"] == node["OR"]["items"] == {"$ref": "#/components/schemas/EndpointQueryNode"}
    assert "contains" in node["operation"]["enum"]
    assert node["comparisonField"] == {"$ref": "#/components/schemas/EndpointComparedValue"}
    assert components["EndpointComparedValue"]["properties"]["type"]["enum"] == ["Input", "Context", "Custom"]
    assert "like" in components["EndpointComparedValue"]["properties"]
    assert "like" not in components["EndpointAssignedValue"]["properties"]
    assert components["EndpointAssignment"]["properties"]["action"]["enum"][0] == "set"
    record = components["EndpointRecord"]["properties"]
    assert record["inputs"]["items"] == {"$ref": "#/components/schemas/EndpointInput"}


@pytest.mark.parametrize("value", [[], ["qty"], {}, {"name": "qty"}, 1, None])
@pytest.mark.parametrize("where", ["query", "assignment"])
def test_an_input_reference_that_is_not_a_name_is_refused_on_create_and_update(dbapi, order, value, where):
    """A list or an object where an input's name belongs used to answer 500 (it was looked up in a set)."""
    inputs = [{"name": "qty", "type": "Number", "location": "body"}]
    source = {"type": "Input", "value": value}
    query = {"AND": [cond("qty", "eq", "Custom", 1)]}
    assignment = {"schemaField": "qty", "action": "set", "assignmentField": {"type": "Input", "value": "qty"}}
    if where == "query":
        query = {"AND": [{"schemaField": "qty", "operation": "eq", "comparisonField": source}]}
        key = "query.AND.0.comparisonField.value"
    else:
        assignment = {**assignment, "assignmentField": source}
        key = "assignments.0.assignmentField.value"
    body = {"name": "bump", "operation": "PATCH", "selectedSchema": "Order", "inputs": inputs, "query": query}
    errors = refused(post(dbapi, {**body, "assignments": [assignment]}))
    assert key in errors

    valid = {"schemaField": "qty", "action": "set", "assignmentField": {"type": "Custom", "value": 2}}
    created = post(dbapi, {**body, "query": {"AND": [cond("qty", "eq", "Custom", 1)]}, "assignments": [valid]})
    assert created.status_code == 201, created.get_json()
    url = f"{ENDPOINTS}/{created.get_json()['_id']}"
    changes = {"query": query} if where == "query" else {"assignments": [assignment]}
    for method in (dbapi.client.patch, dbapi.client.put):
        assert key in refused(method(url, json=changes, headers=dbapi.admin))
    stored = dbapi.client.get(url, headers=dbapi.admin).get_json()
    assert stored["__v"] == 0 and stored["assignments"] == [valid]  # nothing half-written
