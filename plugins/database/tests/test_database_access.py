"""Access to documents: admin credentials do everything; others follow crudOperations (disabled → 404,
authenticated → user token, 401 without); the schema's permissions bind everyone."""


def test_public_schema_is_open_to_anonymous_callers(dbapi):
    dbapi.create_schema("Note", {"text": "String"})
    doc = dbapi.post("Note", {"text": "hi"}, headers={})
    assert dbapi.list("Note", headers={})["count"] == 1
    assert dbapi.client.get(f"/database/Note/{doc['_id']}").status_code == 200
    assert dbapi.client.patch(f"/database/Note/{doc['_id']}", json={"text": "yo"}).status_code == 200
    assert dbapi.client.delete(f"/database/Note/{doc['_id']}").status_code == 200


def test_authenticated_operations_need_a_user_token(dbapi, make_user):
    dbapi.crud(
        "Secret", {"text": "String"}, create=(True, True), read=(True, True), update=(True, False), delete=(True, True)
    )
    user = make_user()
    response = dbapi.client.post("/database/Secret", json={"text": "x"})
    assert response.status_code == 401 and response.get_json()["name"] == "UNAUTHORIZED"
    doc = dbapi.post("Secret", {"text": "x"}, headers=user.headers)
    assert dbapi.client.get("/database/Secret").status_code == 401
    assert dbapi.client.get(f"/database/Secret/{doc['_id']}").status_code == 401
    assert dbapi.list("Secret", headers=user.headers)["count"] == 1
    assert dbapi.client.patch(f"/database/Secret/{doc['_id']}", json={"text": "y"}).status_code == 200
    assert dbapi.client.delete(f"/database/Secret/{doc['_id']}").status_code == 401
    bad = {"Authorization": "Bearer not-a-token"}
    assert dbapi.client.get("/database/Secret", headers=bad).status_code == 401
    assert dbapi.client.delete(f"/database/Secret/{doc['_id']}", headers=user.headers).status_code == 200


def test_disabled_operations_do_not_exist_except_for_admins(dbapi, user, admin_token):
    dbapi.crud("ReadOnly", {"text": "String"}, create=(False, False), update=(False, False), delete=(False, False))
    response = dbapi.client.post("/database/ReadOnly", json={"text": "x"}, headers=user.headers)
    assert response.status_code == 404 and response.get_json()["name"] == "NOT_FOUND"
    doc = dbapi.post("ReadOnly", {"text": "by admin"})  # masterkey
    by_token = dbapi.post("ReadOnly", {"text": "by admin token"}, headers={"Authorization": f"Bearer {admin_token}"})
    assert dbapi.list("ReadOnly", headers={})["count"] == 2
    for method in ("put", "patch", "delete"):
        kwargs = {"json": {"text": "z"}} if method != "delete" else {}
        assert getattr(dbapi.client, method)(f"/database/ReadOnly/{doc['_id']}", **kwargs).status_code == 404
    assert dbapi.client.post("/database/ReadOnly/many", json={"docs": [{"text": "x"}]}).status_code == 404
    assert dbapi.client.delete(f"/database/ReadOnly/{by_token['_id']}", headers=dbapi.admin).status_code == 200


def test_cms_disabled_schema_has_no_public_routes(dbapi, user):
    dbapi.create_schema("Internal", {"text": "String"}, modelOptions={"conduit": {"cms": {"enabled": False}}})
    assert dbapi.client.get("/database/Internal", headers=user.headers).status_code == 404
    assert dbapi.client.post("/database/Internal", json={"text": "x"}).status_code == 404
    dbapi.post("Internal", {"text": "admin may"})
    assert dbapi.list("Internal")["count"] == 1


def test_module_owned_schema_has_no_document_routes(dbapi):
    assert dbapi.client.get("/database/User", headers=dbapi.admin).status_code == 404


def test_permissions_bind_admins_too(dbapi):
    dbapi.create_schema("Ledger", {"amount": "Number"}, conduitOptions={"permissions": {"canDelete": False}})
    doc = dbapi.post("Ledger", {"amount": 5})
    response = dbapi.client.delete(f"/database/Ledger/{doc['_id']}", headers=dbapi.admin)
    assert response.status_code == 403 and response.get_json()["name"] == "FORBIDDEN"
    dbapi.create_schema("Frozen", {"amount": "Number"}, modelOptions={"conduit": {"permissions": {"canCreate": False}}})
    assert dbapi.client.post("/database/Frozen", json={"amount": 1}, headers=dbapi.admin).status_code == 403
    assert (
        dbapi.client.post("/database/Frozen/many", json={"docs": [{"amount": 1}]}, headers=dbapi.admin).status_code
        == 403
    )


def test_populate_follows_the_related_schema_read_rule(dbapi, user):
    dbapi.crud("Owner", {"name": "String"}, read=(True, True))
    owner = dbapi.post("Owner", {"name": "Zed"})
    dbapi.create_schema("Pet", {"name": "String", "owner": {"type": "Relation", "model": "Owner"}})
    dbapi.post("Pet", {"name": "Rex", "owner": owner["_id"]})
    assert dbapi.list("Pet", headers={})["documents"][0]["owner"] == owner["_id"]
    assert dbapi.client.get("/database/Pet?populate=owner").status_code == 401
    populated = dbapi.list("Pet", "populate=owner", headers=user.headers)["documents"][0]
    assert populated["owner"]["name"] == "Zed"


def test_schema_routes_are_administrative(dbapi, user):
    assert dbapi.client.get("/admin/database/schemas").status_code == 401
    assert dbapi.client.get("/database/schemas", headers=user.headers).status_code == 403
    assert dbapi.client.post("/database/schemas", json={"name": "X", "fields": {}}).status_code == 401
    assert dbapi.client.get("/admin/database/customEndpoints", headers=user.headers).status_code == 403
