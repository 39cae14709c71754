"""Document routes: create, read, replace, merge, delete, /many (all or nothing), and validation."""

import re

import pytest

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@pytest.fixture()
def books(dbapi):
    dbapi.create_schema("Author", {"name": {"type": "String", "required": True}})
    return dbapi.create_schema(
        "Book",
        {
            "title": {"type": "String", "required": True},
            "isbn": {"type": "String", "unique": True},
            "pages": {"type": "Number", "default": 100},
            "published": "Date",
            "available": "Boolean",
            "tags": ["String"],
            "extra": "JSON",
            "ref": "ObjectId",
            "author": {"type": "Relation", "model": "Author"},
            "editors": {"type": ["Relation"], "model": "Author"},
        },
    )


def test_create_sets_server_fields_and_defaults(dbapi, books):
    doc = dbapi.post(
        "Book",
        {
            "title": "Dune",
            "published": "1965-08-01T10:00:00+02:00",
            "tags": ["sf"],
            "extra": {"nested": [1, None, {"a": True}]},
            "ref": "abc-123",
        },
    )
    assert re.fullmatch(r"[0-9a-f]{32}", doc["_id"])
    assert doc["pages"] == 100  # default
    assert doc["published"] == "1965-08-01T08:00:00.000000Z"  # normalised to UTC
    assert doc["extra"] == {"nested": [1, None, {"a": True}]}
    assert ISO.match(doc["createdAt"]) and doc["createdAt"] == doc["updatedAt"]
    assert doc["__v"] == 0
    fetched = dbapi.client.get(f"/database/Book/{doc['_id']}", headers=dbapi.admin)
    assert fetched.status_code == 200 and fetched.get_json() == doc


def test_server_fields_in_the_body_are_ignored(dbapi, books):
    doc = dbapi.post("Book", {"title": "X", "_id": "mine", "createdAt": "2000-01-01T00:00:00Z", "__v": 7})
    assert doc["_id"] != "mine" and doc["__v"] == 0 and not doc["createdAt"].startswith("2000")


@pytest.mark.parametrize(
    "body,errors",
    [
        ({}, {"title": ["Missing data for required field."]}),
        ({"title": 5}, {"title": ["Not a string"]}),
        ({"title": "x", "pages": "many"}, {"pages": ["Not a number"]}),
        ({"title": "x", "pages": True}, {"pages": ["Not a number"]}),
        ({"title": "x", "available": "yes"}, {"available": ["Not a boolean"]}),
        ({"title": "x", "published": "last week"}, {"published": ["Not an ISO 8601 date"]}),
        ({"title": "x", "tags": "sf"}, {"tags": ["Must be an array of String"]}),
        ({"title": "x", "tags": ["ok", 3]}, {"tags": ["Not a string"]}),
        ({"title": "x", "ref": "not an id!"}, {"ref": ["Not an id (1-64 letters, digits, - or _)"]}),
        ({"title": "x", "colour": "red"}, {"colour": ["Unknown field"]}),
        ({"title": "x", "pages": 2**70}, {"pages": ["Integer out of range (64-bit)"]}),
    ],
)
def test_validation_errors_name_the_fields(dbapi, books, body, errors):
    response = dbapi.client.post("/database/Book", json=body, headers=dbapi.admin)
    assert response.status_code == 400
    assert response.get_json()["errors"] == errors


def test_nul_characters_are_refused(dbapi, books):
    for body in ({"title": "x\u0000y"}, {"title": "x", "extra": {"k": "\u0000"}}):
        assert dbapi.client.post("/database/Book", json=body, headers=dbapi.admin).status_code == 400
    assert dbapi.list("Book")["count"] == 0


def test_non_finite_numbers_are_refused(dbapi, books):
    response = dbapi.client.post(
        "/database/Book",
        data='{"title": "x", "pages": NaN}',
        headers={**dbapi.admin, "Content-Type": "application/json"},
    )
    assert response.status_code == 400


def test_absurdly_nested_json_is_400(dbapi, books):
    nested = '{"title": "x", "extra": ' + "[" * 100_000 + "]" * 100_000 + "}"
    for url in ("/database/Book", "/graphql"):
        response = dbapi.client.post(url, data=nested, headers={**dbapi.admin, "Content-Type": "application/json"})
        body = response.get_json()
        name = body["errors"][0]["extensions"]["code"] if url == "/graphql" else body["name"]  # GraphQL-shaped there
        assert response.status_code == 400 and name == "INVALID_ARGUMENTS"
    response = dbapi.client.post(
        "/database/Book", json={"title": "x", "extra": [[[[[[[[[[1]]]]]]]]]]}, headers=dbapi.admin
    )
    assert response.status_code == 201
    too_deep = {"title": "x", "extra": 1}
    for _ in range(40):
        too_deep["extra"] = [too_deep["extra"]]
    response = dbapi.client.post("/database/Book", json=too_deep, headers=dbapi.admin)
    assert response.status_code == 400 and "extra" in response.get_json()["errors"]


def test_body_must_be_a_json_object(dbapi, books):
    assert dbapi.client.post("/database/Book", json=[1, 2], headers=dbapi.admin).status_code == 400
    response = dbapi.client.post(
        "/database/Book", data="title=x", headers=dbapi.admin, content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 415


def test_unique_field_conflict_is_409(dbapi, books):
    dbapi.post("Book", {"title": "A", "isbn": "123"})
    response = dbapi.client.post("/database/Book", json={"title": "B", "isbn": "123"}, headers=dbapi.admin)
    assert response.status_code == 409
    assert response.get_json()["errors"] == {"isbn": ["Already taken"]}
    other = dbapi.post("Book", {"title": "C", "isbn": "456"})
    response = dbapi.client.patch(f"/database/Book/{other['_id']}", json={"isbn": "123"}, headers=dbapi.admin)
    assert response.status_code == 409
    assert dbapi.list("Book", "isbn=456")["count"] == 1  # nothing changed
    dbapi.post("Book", {"title": "D"})  # missing values never conflict
    dbapi.post("Book", {"title": "E"})


def test_relations_must_exist(dbapi, books):
    author = dbapi.post("Author", {"name": "Frank"})
    dbapi.post("Book", {"title": "Dune", "author": author["_id"], "editors": [author["_id"]]})
    response = dbapi.client.post("/database/Book", json={"title": "X", "author": "0" * 32}, headers=dbapi.admin)
    assert response.status_code == 400
    assert "author" in response.get_json()["errors"]
    response = dbapi.client.post(
        "/database/Book", json={"title": "X", "editors": [author["_id"], "nope"]}, headers=dbapi.admin
    )
    assert response.status_code == 400 and "editors" in response.get_json()["errors"]
    # a populated document sent back counts as its id
    doc = dbapi.post("Book", {"title": "Y", "author": {"_id": author["_id"], "name": "Frank"}})
    assert doc["author"] == author["_id"]


def test_get_unknown_is_404(dbapi, books):
    for method in ("get", "put", "patch", "delete"):
        kwargs = {"json": {"title": "x"}} if method in ("put", "patch") else {}
        response = getattr(dbapi.client, method)("/database/Book/nothing", headers=dbapi.admin, **kwargs)
        assert response.status_code == 404, method
        assert response.get_json()["name"] == "NOT_FOUND"
    assert dbapi.client.get("/database/Nothing", headers=dbapi.admin).status_code == 404
    assert dbapi.client.get("/database/Nothing/abc", headers=dbapi.admin).status_code == 404


def test_put_replaces_and_patch_merges(dbapi, books):
    doc = dbapi.post("Book", {"title": "Dune", "pages": 412, "tags": ["sf"], "available": True})
    url = f"/database/Book/{doc['_id']}"
    merged = dbapi.client.patch(url, json={"pages": 500, "available": None}, headers=dbapi.admin).get_json()
    assert merged["pages"] == 500 and merged["tags"] == ["sf"] and "available" not in merged
    assert merged["__v"] == 1 and merged["createdAt"] == doc["createdAt"] and merged["updatedAt"] >= doc["updatedAt"]
    replaced = dbapi.client.put(url, json={"title": "Dune Messiah"}, headers=dbapi.admin).get_json()
    assert replaced["title"] == "Dune Messiah" and replaced["pages"] == 100 and "tags" not in replaced
    assert replaced["__v"] == 2 and replaced["_id"] == doc["_id"]
    response = dbapi.client.put(url, json={"pages": 3}, headers=dbapi.admin)
    assert response.status_code == 400 and response.get_json()["errors"] == {
        "title": ["Missing data for required field."]
    }
    response = dbapi.client.patch(url, json={"title": None}, headers=dbapi.admin)
    assert response.status_code == 400 and "title" in response.get_json()["errors"]
    response = dbapi.client.patch(url, json={"tags": ["a", "b"], "extra": {"deep": {"x": 1}}}, headers=dbapi.admin)
    response = dbapi.client.patch(url, json={"extra": {"other": 2}}, headers=dbapi.admin)
    assert response.get_json()["extra"] == {"other": 2}  # a field's value is replaced, not deep-merged
    assert response.get_json()["tags"] == ["a", "b"]


def test_delete(dbapi, books):
    doc = dbapi.post("Book", {"title": "Gone"})
    response = dbapi.client.delete(f"/database/Book/{doc['_id']}", headers=dbapi.admin)
    assert response.status_code == 200
    assert response.get_json() == {"_id": doc["_id"], "deleted": True}
    assert dbapi.client.get(f"/database/Book/{doc['_id']}", headers=dbapi.admin).status_code == 404


def test_many_creates_all(dbapi, books):
    docs = [{"title": f"Vol {i}", "isbn": f"isbn-{i}", "pages": 10 * i, "tags": ["a", f"t{i}"]} for i in range(5)]
    body = dbapi.many("Book", docs)
    assert body["count"] == 5 and [d["title"] for d in body["docs"]] == [f"Vol {i}" for i in range(5)]
    assert dbapi.list("Book")["count"] == 5
    # Stored as documents, not as JSON text: fields filter, sort and read back with their types.
    found = dbapi.list("Book", "pages[$gte]=20&sort=-pages")["documents"]
    assert [(d["title"], d["pages"], d["tags"]) for d in found] == [
        (f"Vol {i}", 10 * i, ["a", f"t{i}"]) for i in (4, 3, 2)
    ]
    one = dbapi.client.get(f"/database/Book/{body['docs'][1]['_id']}", headers=dbapi.admin).get_json()
    assert (one["isbn"], one["pages"]) == ("isbn-1", 10)


def test_many_is_all_or_nothing(dbapi, books):
    dbapi.post("Book", {"title": "Existing", "isbn": "taken"})
    bad = [{"title": "ok 1"}, {"title": 7}, {"title": "ok 2", "pages": "x"}]
    response = dbapi.client.post("/database/Book/many", json={"docs": bad}, headers=dbapi.admin)
    assert response.status_code == 400
    assert response.get_json()["errors"] == {
        "docs": {"1": {"title": ["Not a string"]}, "2": {"pages": ["Not a number"]}}
    }
    clash = [{"title": "new", "isbn": "fresh"}, {"title": "dup", "isbn": "taken"}]
    response = dbapi.client.post("/database/Book/many", json={"docs": clash}, headers=dbapi.admin)
    assert response.status_code == 409 and response.get_json()["errors"] == {"isbn": ["Already taken"]}
    twins = [{"title": "a", "isbn": "same"}, {"title": "b", "isbn": "same"}]
    response = dbapi.client.post("/database/Book/many", json={"docs": twins}, headers=dbapi.admin)
    assert response.status_code == 409
    response = dbapi.client.post(
        "/database/Book/many", json={"docs": [{"title": "x", "author": "ghost"}]}, headers=dbapi.admin
    )
    assert response.status_code == 400 and "docs.0.author" in response.get_json()["errors"]
    assert [d["title"] for d in dbapi.list("Book")["documents"]] == ["Existing"]  # nothing half-written
    assert dbapi.client.post("/database/Book/many", json={"docs": []}, headers=dbapi.admin).status_code == 400
    too_many = {"docs": [{"title": "x"}] * 1001}
    assert dbapi.client.post("/database/Book/many", json=too_many, headers=dbapi.admin).status_code == 400


def test_timestamps_can_be_turned_off(dbapi):
    dbapi.create_schema("Plain", {"a": "String"}, modelOptions={"timestamps": False})
    doc = dbapi.post("Plain", {"a": "x"})
    assert set(doc) == {"_id", "a", "__v"}
