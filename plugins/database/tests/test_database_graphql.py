"""POST /graphql: a query field per CMS-enabled schema, where with operator suffixes and AND/OR, skip/limit/
sort, nested relations without N+1, mutations, the REST access rules, limits, and rebuilds on change."""

from trellis.testing.plugin import statements_run

QUERY = """query ($where: Product__Where, $sort: String) {
  Product(where: $where, sort: $sort) { title price }
}"""


def titles(dbapi, where, sort="title"):
    body = dbapi.graphql(QUERY, {"where": where, "sort": sort})
    assert "errors" not in body, body
    return [doc["title"] for doc in body["data"]["Product"]]


WHERE_CASES = [
    ({"title": "Dates"}, ["Dates"]),
    ({"price_ne": 5}, ["Banana bread", "Cherry Cake", "Dates", "éclair"]),
    ({"price_lt": 7.25}, ["Apple pie", "Dates"]),
    ({"price_lte": 7.25}, ["Apple pie", "Dates", "éclair"]),
    ({"price_gt": 12.5}, ["Cherry Cake"]),
    ({"price_gte": 12.5}, ["Banana bread", "Cherry Cake"]),
    ({"price_in": [3, 20]}, ["Cherry Cake", "Dates"]),
    ({"price_nin": [3, 20]}, ["Apple pie", "Banana bread", "éclair"]),
    ({"title_contains": "cake"}, ["Cherry Cake"]),
    ({"tags_contains": "sweet"}, ["Apple pie", "Cherry Cake", "éclair"]),
    ({"tags": "food"}, ["Apple pie", "Banana bread"]),
    ({"inStock": True}, ["Apple pie", "Cherry Cake"]),
    ({"inStock_exists": False}, ["Dates"]),
    ({"released_gte": "2024-01-01"}, ["Apple pie", "Banana bread"]),
    ({"OR": [{"price_lt": 4}, {"title_contains": "pie"}]}, ["Apple pie", "Dates"]),
    (
        {"AND": [{"price_gt": 4}, {"OR": [{"inStock": False}, {"tags_contains": "party"}]}]},
        ["Banana bread", "Cherry Cake", "éclair"],
    ),
    ({"price_gt": 4, "price_lt": 13}, ["Apple pie", "Banana bread", "éclair"]),
]


def test_where_operators(dbapi, products):
    wrong = [
        (where, expected, got)
        for where, expected in WHERE_CASES
        if (got := sorted(titles(dbapi, where))) != sorted(expected)
    ]
    assert not wrong, wrong


def test_relation_and_id_where(dbapi, products):
    ann = products["ann"]["_id"]
    assert titles(dbapi, {"author": ann}) == ["Apple pie", "Cherry Cake"]
    assert titles(dbapi, {"coauthors_contains": ann}) == ["Cherry Cake"]
    target = products["by_title"]["Dates"]["_id"]
    assert titles(dbapi, {"_id_in": [target]}) == ["Dates"]


def test_skip_limit_sort(dbapi, products):
    body = dbapi.graphql('{ Product(sort: "-price", skip: 1, limit: 2) { title } }')
    assert [d["title"] for d in body["data"]["Product"]] == ["Banana bread", "éclair"]
    bad = dbapi.graphql("{ Product(limit: 5000) { title } }")
    assert bad["data"] is None and "limit" in bad["errors"][0]["message"]
    unknown = dbapi.graphql('{ Product(sort: "nothing") { title } }')
    assert unknown["errors"][0]["extensions"]["code"] == "INVALID_ARGUMENTS"


def test_nested_relations_in_one_query_per_level(dbapi, products, app):
    query = """{ Product(sort: "title") {
        title
        ...Who
        coauthors { name }
    } }
    fragment Who on Product { author { name ... on Author { company { name } } } }"""
    with statements_run(app.extensions["trellis"].engine) as statements:
        body = dbapi.graphql(query)
    assert "errors" not in body, body
    apple, banana, cherry, dates, _eclair = body["data"]["Product"]
    assert apple["author"] == {"name": "Ann", "company": {"name": "Acme"}}
    assert banana["author"]["company"] == {"name": "Globex"}
    assert [c["name"] for c in cherry["coauthors"]] == ["Ann", "Bob"]
    assert dates["author"] is None and dates["coauthors"] is None
    reads = [s for s in statements if "dbdoc_" in s and s.lstrip().upper().startswith("SELECT")]
    assert len(reads) == 4, reads  # products, authors, companies, coauthors


def test_mutations(dbapi, products):
    ann = products["ann"]["_id"]
    created = dbapi.graphql(
        """mutation ($data: Product__Input!) {
        createProduct(data: $data) { _id title price tags author { name } createdAt }
    }""",
        {"data": {"title": "Fig roll", "price": 2, "tags": ["new"], "author": ann}},
    )
    assert "errors" not in created, created
    doc = created["data"]["createProduct"]
    assert doc["title"] == "Fig roll" and doc["author"] == {"name": "Ann"} and doc["createdAt"]
    updated = dbapi.graphql(
        """mutation ($id: ID!) { updateProduct(_id: $id, data: {price: 3.5, tags: null}) {
        title price tags } }""",
        {"id": doc["_id"]},
    )
    assert updated["data"]["updateProduct"] == {"title": "Fig roll", "price": 3.5, "tags": None}
    deleted = dbapi.graphql("mutation ($id: ID!) { deleteProduct(_id: $id) { _id deleted } }", {"id": doc["_id"]})
    assert deleted["data"]["deleteProduct"] == {"_id": doc["_id"], "deleted": True}
    assert dbapi.client.get(f"/database/Product/{doc['_id']}", headers=dbapi.admin).status_code == 404


def test_mutation_errors_are_graphql_errors(dbapi, products):
    missing = dbapi.graphql("mutation { createProduct(data: {price: 1}) { _id } }")
    assert "data" not in missing  # a required field is non-null in the input type: refused before execution
    assert missing["errors"][0]["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED"
    assert "required field 'title'" in missing["errors"][0]["message"]
    dangling = dbapi.graphql('mutation { createProduct(data: {title: "x", author: "nobody"}) { _id } }')
    assert dangling["data"] == {"createProduct": None}
    error = dangling["errors"][0]
    assert error["extensions"]["code"] == "INVALID_ARGUMENTS"
    assert set(error["extensions"]["errors"]) == {"author"}
    gone = dbapi.graphql('mutation { deleteProduct(_id: "nothing") { _id } }')
    assert gone["errors"][0]["extensions"]["code"] == "NOT_FOUND"
    assert dbapi.list("Product")["count"] == 5


def test_same_access_rules_as_rest(dbapi, make_user):
    dbapi.crud("Diary", {"text": "String"}, read=(True, True), create=(False, False))
    dbapi.post("Diary", {"text": "dear diary"})
    anonymous = dbapi.graphql("{ Diary { text } }", headers={})
    assert anonymous["data"] is None and anonymous["errors"][0]["extensions"]["code"] == "UNAUTHORIZED"
    user = make_user()
    assert dbapi.graphql("{ Diary { text } }", headers=user.headers)["data"] == {"Diary": [{"text": "dear diary"}]}
    denied = dbapi.graphql('mutation { createDiary(data: {text: "x"}) { _id } }', headers=user.headers)
    assert denied["errors"][0]["extensions"]["code"] == "NOT_FOUND"
    assert dbapi.graphql('mutation { createDiary(data: {text: "x"}) { _id } }')["data"]["createDiary"]["_id"]
    assert (
        dbapi.client.post(
            "/graphql", json={"query": "{ Diary { text } }"}, headers={"Authorization": "Bearer junk"}
        ).status_code
        == 401
    )


def test_cms_disabled_and_owned_schemas_are_not_served(dbapi):
    dbapi.create_schema("Hidden", {"a": "String"}, modelOptions={"conduit": {"cms": {"enabled": False}}})
    dbapi.create_schema("Shown", {"a": "String"})
    body = dbapi.graphql("{ _schemas }")
    assert body["data"]["_schemas"] == ["Shown"]
    assert dbapi.graphql("{ Hidden { a } }")["errors"][0]["message"].startswith("Cannot query field 'Hidden'")
    assert "errors" in dbapi.graphql("{ User { email } }")


def test_schema_follows_changes_and_is_cached_between(dbapi, app):
    record = dbapi.create_schema("Evolving", {"a": "String"})
    dbapi.post("Evolving", {"a": "x"})
    snapshot_before = app.extensions["trellis_database"].current()
    assert dbapi.graphql("{ Evolving { a } }")["data"] == {"Evolving": [{"a": "x"}]}
    first = snapshot_before.lazy("graphql", lambda: None)
    assert dbapi.graphql("{ Evolving { a } }")["data"]  # same snapshot: the schema is not rebuilt
    assert app.extensions["trellis_database"].current().lazy("graphql", lambda: None) is first
    assert "errors" in dbapi.graphql("{ Evolving { b } }")
    dbapi.update_schema(record["_id"], fields={"a": "String", "b": "Number"})
    dbapi.post("Evolving", {"a": "y", "b": 1})
    assert dbapi.graphql("{ Evolving(where: {b: 1}) { a b } }")["data"] == {"Evolving": [{"a": "y", "b": 1.0}]}


def test_limits_are_graphql_errors(dbapi, products):
    deep = "{ Product { author { company { name } } } }"
    assert "errors" not in dbapi.graphql(deep)
    dbapi.create_schema("Node", {"parent": {"type": "Relation", "model": "Node"}})
    nested = "{ Node { " + "parent { " * 15 + "_id" + " }" * 15 + " } }"
    assert "deeper than 15" in dbapi.graphql(nested)["errors"][0]["message"]
    populate_depth = "{ Node { " + "parent { " * 6 + "_id" + " }" * 6 + " } }"
    assert "at most 5 levels" in dbapi.graphql(populate_depth)["errors"][0]["message"]
    introspection = "{ __schema { types { fields { type { fields { type { fields { name } } } } } } } }"
    assert dbapi.graphql(introspection)["errors"]  # graphql-core's own introspection depth rule
    aliases = "{ " + " ".join(f"a{i}: Product {{ title }}" for i in range(31)) + " }"
    assert "aliases" in dbapi.graphql(aliases)["errors"][0]["message"]
    huge = "{ Product { " + "title " * 1200 + "} }"
    assert "more than 1000 fields" in dbapi.graphql(huge)["errors"][0]["message"]
    long_query = "{ Product { title } }" + " " * 20001
    assert "longer than" in dbapi.graphql(long_query)["errors"][0]["message"]
    bomb = (
        "query { ...A } "
        + " ".join(f"fragment {c} on Query {{ ...{n} ...{n} }}" for c, n in zip("ABCDEFGHIJ", "BCDEFGHIJK"))
        + " fragment K on Query { Product { title } }"
    )
    assert dbapi.graphql(bomb)["errors"]
    assert dbapi.graphql("{ Product { title ")["errors"][0]["message"].startswith("Syntax Error")
    for body in ({}, {"query": 5}, {"query": "{ _schemas }", "extra": 1}):
        assert dbapi.client.post("/graphql", json=body, headers=dbapi.admin).status_code == 400


def test_introspection_fits_the_limits(dbapi, products):
    from graphql import get_introspection_query

    body = dbapi.graphql(get_introspection_query())
    assert "errors" not in body, body["errors"][:1]
    names = {t["name"] for t in body["data"]["__schema"]["types"]}
    assert {"Product", "Product__Where", "Product__Input", "Author", "Company"} <= names
