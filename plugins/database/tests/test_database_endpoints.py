"""Custom endpoints: admin CRUD with Conduit's body, and each operation served at /database/function/{name}
(inputs from body, query and URL; AND/OR trees with every operator; Context; assignments; pagination)."""

import pytest


@pytest.fixture()
def shop(dbapi):
    schema = dbapi.create_schema(
        "Order",
        {
            "item": {"type": "String", "required": True},
            "qty": {"type": "Number", "default": 1},
            "status": "String",
            "buyer": "String",
            "labels": ["String"],
            "paid": "Boolean",
        },
    )
    for doc in [
        {"item": "Red Apple", "qty": 3, "status": "open", "buyer": "ann", "labels": ["fruit"], "paid": True},
        {"item": "Green apple", "qty": 1, "status": "open", "buyer": "bob", "labels": ["fruit", "green"]},
        {"item": "Pear", "qty": 7, "status": "closed", "buyer": "ann", "labels": []},
        {"item": "Plum", "qty": 5, "status": "open", "buyer": "cid", "labels": ["fruit"], "paid": False},
    ]:
        dbapi.post("Order", doc)
    return schema


def make(dbapi, expect=201, **body):
    response = dbapi.client.post("/admin/database/customEndpoints", json=body, headers=dbapi.admin)
    assert response.status_code == expect, response.get_json()
    return response.get_json()


def cond(field, operation, kind, value, **extra):
    return {"schemaField": field, "operation": operation, "comparisonField": {"type": kind, "value": value, **extra}}


def items(response):
    assert response.status_code == 200, response.get_json()
    return sorted(doc["item"] for doc in response.get_json()["documents"])


def test_admin_crud(dbapi, shop):
    created = make(
        dbapi,
        name="openOrders",
        operation=0,
        selectedSchema=shop["_id"],
        query={"AND": [cond("status", 0, "Custom", "open")]},
    )
    assert created["operation"] == "GET" and created["selectedSchemaName"] == "Order"
    assert created["path"] == "/database/function/openOrders" and created["__v"] == 0
    assert created["query"]["AND"][0]["operation"] == "eq"
    listed = dbapi.client.get("/admin/database/customEndpoints", headers=dbapi.admin).get_json()
    assert listed["count"] == 1 and listed["customEndpoints"][0] == created
    assert (
        dbapi.client.get(f"/admin/database/customEndpoints/{created['_id']}", headers=dbapi.admin).get_json() == created
    )
    changed = dbapi.client.put(
        f"/admin/database/customEndpoints/{created['_id']}",
        headers=dbapi.admin,
        json={"query": {"AND": [cond("status", "eq", "Custom", "closed")]}},
    ).get_json()
    assert changed["__v"] == 1 and changed["name"] == "openOrders"
    assert items(dbapi.client.get("/database/function/openOrders")) == ["Pear"]
    make(dbapi, expect=409, name="openOrders", operation="GET", selectedSchema="Order")
    deleted = dbapi.client.delete(f"/admin/database/customEndpoints/{created['_id']}", headers=dbapi.admin)
    assert deleted.get_json() == {"_id": created["_id"], "deleted": True}
    assert dbapi.client.get("/database/function/openOrders").status_code == 404


@pytest.mark.parametrize(
    "body,key",
    [
        ({"name": "bad name", "operation": "GET", "selectedSchema": "Order"}, "name"),
        ({"name": "x", "operation": "FETCH", "selectedSchema": "Order"}, "operation"),
        ({"name": "x", "operation": 9, "selectedSchema": "Order"}, "operation"),
        ({"name": "x", "operation": "GET", "selectedSchema": "Nope"}, "selectedSchema"),
        (
            {
                "name": "x",
                "operation": "GET",
                "selectedSchema": "Order",
                "query": {"AND": [cond("nope", 0, "Custom", 1)]},
            },
            "query.AND.0.schemaField",
        ),
        (
            {
                "name": "x",
                "operation": "GET",
                "selectedSchema": "Order",
                "query": {"AND": [cond("qty", 0, "Custom", "x")]},
            },
            "query.AND.0.comparisonField.value",
        ),
        (
            {
                "name": "x",
                "operation": "GET",
                "selectedSchema": "Order",
                "query": {"AND": [cond("qty", 0, "Input", "q")]},
            },
            "query.AND.0.comparisonField.value",
        ),
        (
            {
                "name": "x",
                "operation": "GET",
                "selectedSchema": "Order",
                "query": {"AND": [cond("qty", 8, "Custom", 1)]},
            },
            "query.AND.0.operation",
        ),
        (
            {
                "name": "x",
                "operation": "GET",
                "selectedSchema": "Order",
                "query": {"AND": [cond("paid", "lt", "Custom", 1)]},
            },
            "query.AND.0.operation",
        ),
        (
            {
                "name": "x",
                "operation": "GET",
                "selectedSchema": "Order",
                "query": {"AND": [cond("buyer", "eq", "Context", "admin.key")]},
            },
            "query.AND.0.comparisonField.value",
        ),
        ({"name": "x", "operation": "GET", "selectedSchema": "Order", "query": {"XOR": []}}, "query"),
        ({"name": "x", "operation": "DELETE", "selectedSchema": "Order"}, "query"),
        ({"name": "x", "operation": "POST", "selectedSchema": "Order"}, "assignments"),
        (
            {
                "name": "x",
                "operation": "POST",
                "selectedSchema": "Order",
                "paginated": True,
                "assignments": [
                    {"schemaField": "item", "action": "set", "assignmentField": {"type": "Custom", "value": "a"}}
                ],
            },
            "paginated",
        ),
        (
            {
                "name": "x",
                "operation": "PUT",
                "selectedSchema": "Order",
                "query": {"AND": [cond("item", 0, "Custom", "a")]},
                "assignments": [
                    {"schemaField": "item", "action": "increment", "assignmentField": {"type": "Custom", "value": 1}}
                ],
            },
            "assignments.0.action",
        ),
        (
            {
                "name": "x",
                "operation": "GET",
                "selectedSchema": "Order",
                "inputs": [{"name": "skip", "type": "Number", "location": "query"}],
            },
            "inputs.0.name",
        ),
        (
            {
                "name": "x",
                "operation": "GET",
                "selectedSchema": "Order",
                "inputs": [{"name": "a", "type": "Text", "location": "query"}],
            },
            "inputs.0.type",
        ),
        (
            {
                "name": "x",
                "operation": "GET",
                "selectedSchema": "Order",
                "inputs": [{"name": "a", "type": "String", "location": 7}],
            },
            "inputs.0.location",
        ),
    ],
)
def test_bad_definitions_are_400(dbapi, shop, body, key):
    response = dbapi.client.post("/admin/database/customEndpoints", json=body, headers=dbapi.admin)
    assert response.status_code == 400, response.get_json()
    assert key in response.get_json()["errors"]


def test_get_with_inputs_from_query_and_url_and_or_tree(dbapi, shop):
    make(
        dbapi,
        name="search",
        operation="GET",
        selectedSchema="Order",
        inputs=[
            {"name": "buyer", "type": "String", "location": "urlParams"},
            {"name": "minQty", "type": "Number", "location": "query", "optional": True},
            {"name": "statuses", "type": "String", "location": 1, "array": True, "optional": True},
        ],
        query={
            "AND": [
                cond("buyer", "eq", "Input", "buyer"),
                {"OR": [cond("qty", "gte", "Input", "minQty"), cond("status", "in", "Input", "statuses")]},
            ]
        },
    )
    assert items(dbapi.client.get("/database/function/search/ann?minQty=5")) == ["Pear"]
    assert items(dbapi.client.get("/database/function/search/ann?minQty=10&statuses=open,pending")) == ["Red Apple"]
    assert items(dbapi.client.get("/database/function/search/ann")) == ["Pear", "Red Apple"]  # optional: dropped
    assert dbapi.client.get("/database/function/search/ann?minQty=lots").status_code == 400
    assert dbapi.client.get("/database/function/search/ann?other=1").status_code == 400
    assert dbapi.client.get("/database/function/search").status_code == 404  # the URL parameter is missing
    assert dbapi.client.post("/database/function/search/ann").status_code == 405


OPERATOR_CASES = [
    ("eq", "qty", 3, ["Red Apple"]),
    ("ne", "qty", 3, ["Green apple", "Pear", "Plum"]),
    ("gt", "qty", 3, ["Pear", "Plum"]),
    ("gte", "qty", 3, ["Pear", "Plum", "Red Apple"]),
    ("lt", "qty", 3, ["Green apple"]),
    ("lte", "qty", 3, ["Green apple", "Red Apple"]),
    ("in", "qty", [1, 7], ["Green apple", "Pear"]),
    ("nin", "qty", [1, 7], ["Plum", "Red Apple"]),
    ("contains", "item", "APPLE", ["Green apple", "Red Apple"]),
    ("contains", "labels", "green", ["Green apple"]),
    ("eq", "paid", True, ["Red Apple"]),
]


def test_every_operator(dbapi, shop):
    for index, (operation, field, value, expected) in enumerate(OPERATOR_CASES):
        name = f"op{index}"
        make(
            dbapi,
            name=name,
            operation="GET",
            selectedSchema="Order",
            query={"OR": [cond(field, operation, "Custom", value)]},
        )
        assert items(dbapi.client.get(f"/database/function/{name}")) == expected, (operation, field)


def test_like_flag_means_case_insensitive_substring(dbapi, shop):
    make(
        dbapi,
        name="like",
        operation="GET",
        selectedSchema="Order",
        inputs=[{"name": "q", "type": "String", "location": "query"}],
        query={"AND": [cond("item", "eq", "Input", "q", like=True)]},
    )
    assert items(dbapi.client.get("/database/function/like?q=PL")) == ["Green apple", "Plum", "Red Apple"]


def test_context_user_and_authentication(dbapi, shop, make_user):
    user = make_user()
    make(
        dbapi,
        name="mine",
        operation="GET",
        selectedSchema="Order",
        authentication=True,
        query={"AND": [cond("buyer", "eq", "Context", "user._id")]},
    )
    assert dbapi.client.get("/database/function/mine").status_code == 401
    assert items(dbapi.client.get("/database/function/mine", headers=user.headers)) == []
    dbapi.post("Order", {"item": "Kiwi", "buyer": user.id})
    assert items(dbapi.client.get("/database/function/mine", headers=user.headers)) == ["Kiwi"]
    make(
        dbapi,
        name="byEmail",
        operation="GET",
        selectedSchema="Order",
        query={"AND": [cond("buyer", "eq", "Context", "user.email")]},
    )
    assert dbapi.client.get("/database/function/byEmail").status_code == 401  # no caller to read from


def test_pagination_and_sorting(dbapi, shop):
    make(dbapi, name="pages", operation="GET", selectedSchema="Order", paginated=True, sorted=True)
    body = dbapi.client.get("/database/function/pages?sort=-qty&skip=1&limit=2").get_json()
    assert [d["item"] for d in body["documents"]] == ["Plum", "Red Apple"] and body["count"] == 4
    assert dbapi.client.get("/database/function/pages?limit=1001").status_code == 400
    assert dbapi.client.get("/database/function/pages?sort=nothing").status_code == 400
    make(dbapi, name="unsorted", operation="GET", selectedSchema="Order")
    assert dbapi.client.get("/database/function/unsorted?sort=qty").status_code == 400  # not a sorted endpoint
    assert dbapi.client.get("/database/function/unsorted").get_json()["count"] == 4


def test_post_creates_from_assignments(dbapi, shop, make_user):
    user = make_user()
    make(
        dbapi,
        name="order",
        operation="POST",
        selectedSchema="Order",
        authentication=True,
        inputs=[
            {"name": "item", "type": "String", "location": "body"},
            {"name": "qty", "type": "Number", "location": "body", "optional": True},
        ],
        assignments=[
            {"schemaField": "item", "action": "set", "assignmentField": {"type": "Input", "value": "item"}},
            {"schemaField": "qty", "action": 0, "assignmentField": {"type": "Input", "value": "qty"}},
            {"schemaField": "buyer", "action": "set", "assignmentField": {"type": "Context", "value": "user._id"}},
            {"schemaField": "status", "action": "set", "assignmentField": {"type": "Custom", "value": "new"}},
        ],
    )
    response = dbapi.client.post("/database/function/order", json={"item": "Fig"}, headers=user.headers)
    assert response.status_code == 201, response.get_json()
    doc = response.get_json()
    assert doc["item"] == "Fig" and doc["qty"] == 1 and doc["buyer"] == user.id and doc["status"] == "new"
    response = dbapi.client.post("/database/function/order", json={"qty": 2}, headers=user.headers)
    assert response.status_code == 400 and "item" in response.get_json()["errors"]
    response = dbapi.client.post("/database/function/order", json={"item": "x", "price": 2}, headers=user.headers)
    assert response.status_code == 400 and "price" in response.get_json()["errors"]
    assert dbapi.client.post("/database/function/order", json={"item": "x"}).status_code == 401


def test_put_and_patch_apply_every_assignment(dbapi, shop):
    make(
        dbapi,
        name="restock",
        operation="PUT",
        selectedSchema="Order",
        inputs=[
            {"name": "buyer", "type": "String", "location": "urlParams"},
            {"name": "by", "type": "Number", "location": "body"},
        ],
        query={"AND": [cond("buyer", "eq", "Input", "buyer")]},
        assignments=[
            {"schemaField": "qty", "action": "increment", "assignmentField": {"type": "Input", "value": "by"}},
            {"schemaField": "labels", "action": "append", "assignmentField": {"type": "Custom", "value": "restocked"}},
            {"schemaField": "labels", "action": "remove", "assignmentField": {"type": "Custom", "value": "fruit"}},
        ],
    )
    response = dbapi.client.put("/database/function/restock/ann", json={"by": 2})
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    assert body["count"] == 2
    by_item = {d["item"]: d for d in body["documents"]}
    assert by_item["Red Apple"]["qty"] == 5 and by_item["Red Apple"]["labels"] == ["restocked"]
    assert by_item["Pear"]["qty"] == 9 and by_item["Pear"]["__v"] == 1
    make(
        dbapi,
        name="settle",
        operation="PATCH",
        selectedSchema="Order",
        query={"AND": [cond("status", "eq", "Custom", "open")]},
        assignments=[
            {"schemaField": "qty", "action": "decrement", "assignmentField": {"type": "Custom", "value": 1}},
            {"schemaField": "status", "action": "set", "assignmentField": {"type": "Custom", "value": "done"}},
        ],
    )
    response = dbapi.client.patch("/database/function/settle")
    assert response.status_code == 200 and response.get_json()["count"] == 3
    assert dbapi.list("Order", "status=done")["count"] == 3
    assert [d["qty"] for d in dbapi.list("Order", "item=Green apple")["documents"]] == [0]


def test_put_that_fails_half_way_changes_nothing(dbapi):
    dbapi.create_schema("Seat", {"code": {"type": "String", "unique": True}, "row": "Number"})
    for code, row in (("a1", 1), ("a2", 1), ("b1", 2)):
        dbapi.post("Seat", {"code": code, "row": row})
    make(
        dbapi,
        name="merge",
        operation="PUT",
        selectedSchema="Seat",
        inputs=[{"name": "code", "type": "String", "location": "body"}],
        query={"AND": [cond("row", "eq", "Custom", 1)]},
        assignments=[{"schemaField": "code", "action": "set", "assignmentField": {"type": "Input", "value": "code"}}],
    )
    response = dbapi.client.put("/database/function/merge", json={"code": "zz"})
    assert response.status_code == 409  # the second seat of row 1 cannot take the same code
    assert sorted(d["code"] for d in dbapi.list("Seat")["documents"]) == ["a1", "a2", "b1"]
    response = dbapi.client.put("/database/function/merge", json={"code": 5})
    assert response.status_code == 400


def test_delete_removes_matching_documents(dbapi, shop):
    make(
        dbapi,
        name="purge",
        operation=3,
        selectedSchema="Order",
        inputs=[{"name": "status", "type": "String", "location": "query"}],
        query={"AND": [cond("status", "eq", "Input", "status")]},
    )
    response = dbapi.client.delete("/database/function/purge?status=closed")
    assert response.status_code == 200 and response.get_json() == {"deleted": True, "count": 1}
    assert dbapi.list("Order")["count"] == 3
    assert dbapi.client.delete("/database/function/purge").status_code == 400  # required input missing


def test_disabled_endpoint_is_404(dbapi, shop):
    created = make(dbapi, name="off", operation="GET", selectedSchema="Order", enabled=False)
    assert dbapi.client.get("/database/function/off").status_code == 404
    dbapi.client.patch(f"/admin/database/customEndpoints/{created['_id']}", json={"enabled": True}, headers=dbapi.admin)
    assert dbapi.client.get("/database/function/off").status_code == 200


def test_populate_on_a_get_endpoint(dbapi):
    dbapi.create_schema("Shelf", {"label": "String"})
    shelf = dbapi.post("Shelf", {"label": "A1"})
    dbapi.create_schema("Box", {"shelf": {"type": "Relation", "model": "Shelf"}})
    dbapi.post("Box", {"shelf": shelf["_id"]})
    make(dbapi, name="boxes", operation="GET", selectedSchema="Box")
    body = dbapi.client.get("/database/function/boxes?populate=shelf").get_json()
    assert body["documents"][0]["shelf"]["label"] == "A1"
