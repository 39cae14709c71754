"""A required String refuses the empty string (mongoose/Conduit semantics), on every write path."""


def test_required_string_refuses_empty(dbapi):
    dbapi.create_schema(
        "Article",
        {
            "title": {"type": "String", "required": True},
            "subtitle": "String",
            "tags": {"type": ["String"], "required": True},
        },
    )
    refused = dbapi.post("Article", {"title": "", "tags": []}, expect=400)
    assert refused["errors"] == {"title": ["Required: must not be empty"]}
    ok = dbapi.post("Article", {"title": " ", "subtitle": "", "tags": [""]})  # only required single Strings
    assert ok["subtitle"] == "" and ok["tags"] == [""]
    url = f"/database/Article/{ok['_id']}"
    for method in ("put", "patch"):
        response = getattr(dbapi.client, method)(url, json={"title": "", "tags": []}, headers=dbapi.admin)
        assert response.status_code == 400 and "title" in response.get_json()["errors"], method
    dbapi.many("Article", [{"title": "fine", "tags": []}, {"title": "", "tags": []}], expect=400)
    assert dbapi.list("Article")["count"] == 1
    graphql = dbapi.graphql('mutation { createArticle(data: {title: "", tags: []}) { _id } }')
    assert graphql["errors"][0]["extensions"]["errors"] == {"title": ["Required: must not be empty"]}


def test_required_string_default_must_not_be_empty(dbapi):
    refused = dbapi.create_schema("Blank", {"t": {"type": "String", "required": True, "default": ""}}, expect=400)
    assert "empty" in str(refused["errors"])
    dbapi.create_schema("Optional", {"t": {"type": "String", "default": ""}})
