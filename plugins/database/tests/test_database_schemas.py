"""Schema routes: create, list (with filters), read, change (with existing documents), extend, delete,
module-owned schemas, and changes reaching another worker without a restart."""

import pytest
from sqlalchemy import inspect

from trellis import create_app
from trellis.testing.plugin import statements_run


def test_create_returns_the_record_with_defaults(dbapi):
    record = dbapi.create_schema(
        "Product", {"title": {"type": "String", "required": True}, "price": "Number", "tags": ["String"]}
    )
    assert set(record) == {
        "_id",
        "name",
        "fields",
        "modelOptions",
        "ownerModule",
        "extensions",
        "createdAt",
        "updatedAt",
        "__v",
    }
    assert record["name"] == "Product" and record["ownerModule"] == "database" and record["__v"] == 0
    assert record["fields"] == {
        "title": {"type": "String", "required": True},
        "price": {"type": "Number"},
        "tags": {"type": ["String"]},
    }
    assert record["modelOptions"] == {
        "timestamps": True,
        "search": {"language": "simple"},
        "conduit": {
            "permissions": {"extendable": True, "canCreate": True, "canModify": "Everything", "canDelete": True},
            "cms": {
                "enabled": True,
                "crudOperations": {
                    op: {"enabled": True, "authenticated": False} for op in ("create", "read", "update", "delete")
                },
            },
            "authorization": {"enabled": False, "fields": {}},
        },
    }
    assert record["extensions"] == []


def test_common_route_creates_too_and_conduit_options_alias(dbapi):
    response = dbapi.client.post(
        "/database/schemas",
        headers=dbapi.admin,
        json={
            "name": "Post",
            "fields": {"body": "String"},
            "conduitOptions": {"cms": {"crudOperations": {"delete": False, "read": {"authenticated": True}}}},
        },
    )
    assert response.status_code == 201
    crud = response.get_json()["modelOptions"]["conduit"]["cms"]["crudOperations"]
    assert crud["delete"] == {"enabled": False, "authenticated": False}
    assert crud["read"] == {"enabled": True, "authenticated": True}


@pytest.mark.parametrize(
    "body,key",
    [
        ({"name": "1abc", "fields": {}}, "name"),
        ({"name": "bad-name", "fields": {}}, "name"),
        ({"name": "schemas", "fields": {}}, "name"),
        ({"name": "Query", "fields": {}}, "name"),
        ({"name": "A", "fields": {"x": "Text"}}, "fields.x"),
        ({"name": "A", "fields": {"x": {"type": "Relation"}}}, "fields.x"),
        ({"name": "A", "fields": {"x": {"type": "Relation", "model": "Nowhere"}}}, "fields.x"),
        ({"name": "A", "fields": {"x": {"type": "String", "colour": "red"}}}, "fields.x"),
        ({"name": "A", "fields": {"x": {"type": "String", "required": "yes"}}}, "fields.x"),
        ({"name": "A", "fields": {"x": {"type": "Number", "default": "zero"}}}, "fields.x"),
        ({"name": "A", "fields": {"x": {"type": ["String"], "unique": True}}}, "fields.x"),
        ({"name": "A", "fields": {"x": ["String", "Number"]}}, "fields.x"),
        ({"name": "A", "fields": {"_id": "String"}}, "fields._id"),
        ({"name": "A", "fields": {"limit": "String"}}, "fields.limit"),
        ({"name": "A", "fields": {"bad name": "String"}}, "fields.bad name"),
        ({"name": "A", "fields": []}, "fields"),
        ({"name": "A", "fields": {}, "modelOptions": {"colour": 1}}, "modelOptions.colour"),
        (
            {"name": "A", "fields": {}, "modelOptions": {"conduit": {"permissions": {"canModify": "Some"}}}},
            "modelOptions.conduit.permissions.canModify",
        ),
        ({"name": "A", "fields": {}, "modelOptions": {"timestamps": "yes"}}, "modelOptions.timestamps"),
        ({"name": "A", "fields": {}, "extra": 1}, "extra"),
        ({"fields": {}}, "name"),
    ],
)
def test_bad_definitions_are_400_naming_the_field(dbapi, body, key):
    response = dbapi.client.post("/admin/database/schemas", json=body, headers=dbapi.admin)
    assert response.status_code == 400, response.get_json()
    assert key in response.get_json()["errors"]


def test_duplicate_names_are_409(dbapi):
    dbapi.create_schema("Thing", {})
    response = dbapi.client.post("/admin/database/schemas", json={"name": "Thing", "fields": {}}, headers=dbapi.admin)
    assert response.status_code == 409 and response.get_json()["name"] == "CONFLICT"
    response = dbapi.client.post("/admin/database/schemas", json={"name": "User", "fields": {}}, headers=dbapi.admin)
    assert response.status_code == 409  # the authentication module owns User


def test_list_filters_and_owned_schemas(dbapi, admin_token):
    dbapi.create_schema("Alpha", {"a": "String"})
    dbapi.create_schema("Beta", {"b": "String"}, modelOptions={"conduit": {"cms": {"enabled": False}}})
    body = dbapi.client.get("/admin/database/schemas", headers=dbapi.admin).get_json()
    names = {s["name"]: s for s in body["schemas"]}
    assert {"Alpha", "Beta", "User"} <= set(names) and body["count"] == len(body["schemas"])
    user = names["User"]
    assert user["ownerModule"] == "authentication"
    assert user["modelOptions"]["conduit"]["permissions"]["canModify"] == "ExtensionOnly"
    assert user["fields"]["email"]["type"] == "String"
    both = {"masterkey": dbapi.admin["masterkey"], "Authorization": f"Bearer {admin_token}"}
    common = dbapi.client.get("/database/schemas?enabled=true", headers=both).get_json()
    assert [s["name"] for s in common["schemas"]] == ["Alpha"] and common["count"] == 1
    owned = dbapi.client.get("/database/schemas?owner=authentication", headers=both).get_json()
    assert [s["name"] for s in owned["schemas"]] == ["User"]
    mixed = dbapi.client.get("/database/schemas?owner=authentication,database&enabled=false", headers=both)
    assert [s["name"] for s in mixed.get_json()["schemas"]] == ["Beta", "User"]
    page = dbapi.client.get("/admin/database/schemas?owner=database&search=a&limit=1&skip=1", headers=dbapi.admin)
    page = page.get_json()
    assert page["count"] == 2 and [s["name"] for s in page["schemas"]] == ["Beta"]
    assert dbapi.client.get("/admin/database/schemas?limit=1001", headers=dbapi.admin).status_code == 400


def test_get_by_id_or_name(dbapi):
    record = dbapi.create_schema("Gamma", {"g": "String"})
    by_id = dbapi.client.get(f"/admin/database/schemas/{record['_id']}", headers=dbapi.admin).get_json()
    assert by_id == record
    assert dbapi.client.get("/admin/database/schemas/Gamma", headers=dbapi.admin).get_json() == record
    assert dbapi.client.get("/admin/database/schemas/nothing", headers=dbapi.admin).status_code == 404


def test_change_with_existing_documents(dbapi):
    record = dbapi.create_schema("Item", {"name": "String", "size": "String", "old": "String"})
    first = dbapi.post("Item", {"name": "a", "size": "10", "old": "x"})
    dbapi.post("Item", {"name": "b", "size": "large", "old": "y"})
    changed = dbapi.update_schema(record["_id"], fields={"name": "String", "size": "Number", "colour": "String"})
    assert changed["__v"] == 1 and set(changed["fields"]) == {"name", "size", "colour"}
    docs = dbapi.list("Item", "sort=name")["documents"]
    assert [d["size"] for d in docs] == ["10", "large"]  # old values stay readable
    assert all("old" not in d for d in docs)  # a dropped field is gone from the documents
    assert dbapi.list("Item", "size[$gt]=1")["count"] == 0  # text is not a number: never matches
    dbapi.post("Item", {"name": "c", "size": 7, "colour": "red"})
    assert [d["name"] for d in dbapi.list("Item", "size[$gt]=1")["documents"]] == ["c"]
    assert dbapi.list("Item", "colour=red")["count"] == 1
    patched = dbapi.client.patch(f"/database/Item/{first['_id']}", json={"size": 12}, headers=dbapi.admin)
    assert patched.status_code == 200 and patched.get_json()["size"] == 12
    response = dbapi.client.post("/database/Item", json={"old": "x"}, headers=dbapi.admin)
    assert response.status_code == 400 and response.get_json()["errors"] == {"old": ["Unknown field"]}


def test_change_options_and_rename(dbapi):
    dbapi.create_schema("Maker", {"name": "String"})
    maker = dbapi.post("Maker", {"name": "M"})
    widget = dbapi.create_schema(
        "Widget", {"maker": {"type": "Relation", "model": "Maker"}, "parent": {"type": "Relation", "model": "Widget"}}
    )
    dbapi.post("Widget", {"maker": maker["_id"]})
    maker_record = dbapi.client.get("/admin/database/schemas/Maker", headers=dbapi.admin).get_json()
    renamed = dbapi.update_schema(
        maker_record["_id"],
        name="Manufacturer",
        modelOptions={"conduit": {"cms": {"crudOperations": {"read": {"authenticated": True}}}}},
    )
    assert renamed["name"] == "Manufacturer"
    assert renamed["modelOptions"]["conduit"]["cms"]["crudOperations"]["read"]["authenticated"] is True
    assert renamed["modelOptions"]["conduit"]["cms"]["crudOperations"]["create"]["enabled"] is True  # merged
    assert dbapi.client.get("/database/Maker", headers=dbapi.admin).status_code == 404
    assert dbapi.list("Manufacturer")["count"] == 1
    widget_now = dbapi.client.get(f"/admin/database/schemas/{widget['_id']}", headers=dbapi.admin).get_json()
    assert widget_now["fields"]["maker"]["model"] == "Manufacturer" and widget_now["__v"] == 1
    populated = dbapi.list("Widget", "populate=maker")["documents"][0]
    assert populated["maker"]["name"] == "M"
    self_renamed = dbapi.update_schema(widget["_id"], name="Gadget")
    assert self_renamed["fields"]["parent"]["model"] == "Gadget"


def test_adding_unique_over_duplicates_is_409_and_changes_nothing(dbapi):
    record = dbapi.create_schema("Tag", {"label": "String"})
    dbapi.post("Tag", {"label": "x"})
    dbapi.post("Tag", {"label": "x"})
    response = dbapi.client.put(
        f"/admin/database/schemas/{record['_id']}",
        headers=dbapi.admin,
        json={"fields": {"label": {"type": "String", "unique": True}, "more": "String"}},
    )
    assert response.status_code == 409
    again = dbapi.client.get(f"/admin/database/schemas/{record['_id']}", headers=dbapi.admin).get_json()
    assert again["__v"] == 0 and again["fields"] == {"label": {"type": "String"}}
    assert dbapi.list("Tag")["count"] == 2


def test_delete_schema(dbapi, app):
    record = dbapi.create_schema("Temp", {"a": "String"})
    dbapi.post("Temp", {"a": "x"})
    response = dbapi.client.delete(f"/admin/database/schemas/{record['_id']}", headers=dbapi.admin)
    assert response.status_code == 409
    response = dbapi.client.delete(f"/admin/database/schemas/{record['_id']}?deleteData=true", headers=dbapi.admin)
    assert response.status_code == 200 and response.get_json() == {"_id": record["_id"], "deleted": True}
    assert dbapi.client.get("/database/Temp", headers=dbapi.admin).status_code == 404
    from trellis import db

    assert f"dbdoc_{record['_id']}" not in inspect(db.session.connection()).get_table_names()
    empty = dbapi.create_schema("Empty", {})
    assert dbapi.client.delete(f"/admin/database/schemas/{empty['_id']}", headers=dbapi.admin).status_code == 200
    assert dbapi.client.delete(f"/admin/database/schemas/{empty['_id']}", headers=dbapi.admin).status_code == 404


def test_delete_refuses_referenced_and_owned_schemas(dbapi):
    target = dbapi.create_schema("Target", {})
    dbapi.create_schema("Pointer", {"t": {"type": "Relation", "model": "Target"}})
    assert dbapi.client.delete(f"/admin/database/schemas/{target['_id']}", headers=dbapi.admin).status_code == 409
    user = dbapi.client.get("/admin/database/schemas/User", headers=dbapi.admin).get_json()
    assert dbapi.client.delete(f"/admin/database/schemas/{user['_id']}", headers=dbapi.admin).status_code == 403


def test_extensions_of_an_owned_schema(dbapi):
    user = dbapi.client.get("/admin/database/schemas/User", headers=dbapi.admin).get_json()
    response = dbapi.client.put(f"/admin/database/schemas/{user['_id']}", json={"fields": {}}, headers=dbapi.admin)
    assert response.status_code == 403  # ExtensionOnly
    url = f"/admin/database/schemas/{user['_id']}/extensions"
    response = dbapi.client.post(url, json={"fields": {"nickname": "String", "age": "Number"}}, headers=dbapi.admin)
    assert response.status_code == 200
    extended = response.get_json()
    assert extended["_id"] == user["_id"] and extended["__v"] == 1
    assert extended["extensions"][0]["ownerModule"] == "database"
    assert extended["extensions"][0]["fields"] == {"nickname": {"type": "String"}, "age": {"type": "Number"}}
    assert dbapi.client.get("/admin/database/schemas/User", headers=dbapi.admin).get_json() == extended
    clash = dbapi.client.post(url, json={"fields": {"email": "String"}}, headers=dbapi.admin)
    assert clash.status_code == 400
    removed = dbapi.client.post(url, json={"fields": {}}, headers=dbapi.admin).get_json()
    assert removed["extensions"] == [] and removed["__v"] == 2


def test_extensions_of_an_admin_schema_are_document_fields(dbapi):
    record = dbapi.create_schema("Card", {"title": "String"})
    url = f"/admin/database/schemas/{record['_id']}/extensions"
    assert dbapi.client.post(url, json={"fields": {"score": "Number"}}, headers=dbapi.admin).status_code == 200
    dbapi.post("Card", {"title": "a", "score": 3})
    dbapi.post("Card", {"title": "b", "score": 9})
    assert [d["title"] for d in dbapi.list("Card", "score[$gt]=5")["documents"]] == ["b"]
    locked = dbapi.create_schema("Locked", {}, modelOptions={"conduit": {"permissions": {"extendable": False}}})
    response = dbapi.client.post(
        f"/admin/database/schemas/{locked['_id']}/extensions", json={"fields": {"x": "String"}}, headers=dbapi.admin
    )
    assert response.status_code == 403


def test_fields_used_by_a_custom_endpoint_cannot_be_dropped(dbapi):
    record = dbapi.create_schema("Task", {"title": "String", "done": "Boolean"})
    response = dbapi.client.post(
        "/admin/database/customEndpoints",
        headers=dbapi.admin,
        json={
            "name": "openTasks",
            "operation": "GET",
            "selectedSchema": record["_id"],
            "query": {
                "AND": [
                    {"schemaField": "done", "operation": "eq", "comparisonField": {"type": "Custom", "value": False}}
                ]
            },
        },
    )
    assert response.status_code == 201, response.get_json()
    response = dbapi.client.put(
        f"/admin/database/schemas/{record['_id']}", json={"fields": {"title": "String"}}, headers=dbapi.admin
    )
    assert response.status_code == 409 and "openTasks" in response.get_json()["message"]


def test_schema_changes_reach_another_worker_without_restart(app, app_config, dbapi):
    other = create_app(app_config)  # a second process: its own caches, the same database
    other_client = other.test_client()
    assert other_client.get("/database/Fresh", headers=dbapi.admin).status_code == 404
    record = dbapi.create_schema("Fresh", {"a": "String"})
    dbapi.post("Fresh", {"a": "x"})
    assert other_client.get("/database/Fresh", headers=dbapi.admin).get_json()["count"] == 1
    dbapi.update_schema(record["_id"], fields={"a": "String", "b": "Number"})
    created = other_client.post("/database/Fresh", json={"a": "y", "b": 2}, headers=dbapi.admin)
    assert created.status_code == 201, created.get_json()
    graph = other_client.post("/graphql", json={"query": "{ Fresh(where: {b_gt: 1}) { a b } }"}, headers=dbapi.admin)
    assert graph.get_json() == {"data": {"Fresh": [{"a": "y", "b": 2.0}]}}


def test_no_schema_query_per_request_while_nothing_changes(app, dbapi):
    dbapi.create_schema("Cached", {"a": "String"})
    dbapi.list("Cached")  # builds this process's snapshot
    with statements_run(app.extensions["trellis"].engine) as seen:
        for _ in range(3):
            dbapi.list("Cached", headers={})
    assert not [s for s in seen if "database_schemas" in s or "database_custom_endpoints" in s], seen


def test_owned_schema_whose_module_allows_changes(app, app_config, db, admin_headers):
    from trellis import Module, OwnedSchema

    owned = OwnedSchema(
        name="Gadget",
        fields={"serial": {"type": "String", "unique": True}, "odd": {"type": "Weird"}},
        owner_module="gadgets",
        can_modify="Everything",
        extendable=False,
    )
    modules = [*app.extensions["trellis"].modules, Module("gadgets", owned_schemas=(owned,))]
    client = create_app(app_config, modules=modules).test_client()
    listed = client.get("/admin/database/schemas?owner=gadgets", headers=admin_headers).get_json()
    record = listed["schemas"][0]
    assert record["ownerModule"] == "gadgets" and record["fields"]["odd"] == {"type": "Weird"}  # shown as declared
    url = f"/admin/database/schemas/{record['_id']}"
    changed = client.put(url, json={"modelOptions": {"timestamps": False}}, headers=admin_headers)
    assert changed.status_code == 200 and changed.get_json()["modelOptions"]["timestamps"] is False
    assert changed.get_json()["_id"] == record["_id"] and changed.get_json()["__v"] == 1
    assert client.put(url, json={"fields": {}}, headers=admin_headers).status_code == 403
    assert client.put(url, json={"name": "Other"}, headers=admin_headers).status_code == 403
    assert client.post(f"{url}/extensions", json={"fields": {"x": "String"}}, headers=admin_headers).status_code == 403
    assert client.get("/database/Gadget", headers=admin_headers).status_code == 404  # its documents live elsewhere
