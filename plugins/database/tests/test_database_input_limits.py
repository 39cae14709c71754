"""Numbers and arrays a client sends are bounded before they reach SQL: offsets past the contract's cap,
numbers past a bigint, arrays past MAX_ITEMS answer a 4xx (never a driver error), on both databases.
Also GraphQL's request-level answers: Apollo's persisted-query hash, PUT /graphql."""

from __future__ import annotations

import pytest

from trellis.fields import MAX_ITEMS
from trellis.http import MAX_SKIP
from trellis_database.fields import MAX_ARRAY_LENGTH

TOO_BIG = 2**63  # one past a bigint: PostgreSQL "bigint out of range", SQLite cannot bind it


@pytest.fixture()
def prices(dbapi):
    schema = dbapi.create_schema("Priced", {"title": "String", "price": "Number", "tags": ["String"]})
    for number in range(3):
        dbapi.post("Priced", {"title": f"t{number}", "price": number, "tags": ["a"]})
    return schema


def _endpoint(dbapi, schema, **body):
    response = dbapi.client.post(
        "/admin/database/customEndpoints", json={"selectedSchema": schema["_id"], **body}, headers=dbapi.admin
    )
    assert response.status_code == 201, response.get_json()
    return response.get_json()


BIG_NUMBER_QUERIES = [
    f"skip={MAX_SKIP + 1}",
    f"skip={TOO_BIG}",
    f"price={TOO_BIG}",
    f"price[$gt]={TOO_BIG}",
    f"price[$lt]=-{TOO_BIG}",
    f"price[$in]=1,{TOO_BIG}",
    f"price[$nin]={10**40}",
    "price[$gte]=1e400",
    f"price>{TOO_BIG}",
]


def test_numbers_past_their_range_are_a_400_wherever_they_reach_sql(dbapi, prices):
    _endpoint(
        dbapi,
        prices,
        name="paged",
        operation="GET",
        paginated=True,
        inputs=[{"name": "below", "type": "Number", "location": "query", "optional": True}],
        query={
            "AND": [{"schemaField": "price", "operation": "lt", "comparisonField": {"type": "Input", "value": "below"}}]
        },
    )
    for query in (f"skip={MAX_SKIP + 1}", f"skip={TOO_BIG}", f"skip={10**40}", f"below={TOO_BIG}", f"limit={TOO_BIG}"):
        response = dbapi.client.get(f"/database/function/paged?{query}", headers=dbapi.admin)
        assert response.status_code == 400, (query, response.get_json())
        assert set(response.get_json()["errors"]) == {query.split("=")[0]}
    last = dbapi.client.get(f"/database/function/paged?skip={MAX_SKIP}&below=2", headers=dbapi.admin)
    assert last.status_code == 200 and last.get_json()["documents"] == []
    for query in BIG_NUMBER_QUERIES:
        response = dbapi.client.get(f"/database/Priced?{query}", headers=dbapi.admin)
        assert response.status_code == 400, (query, response.get_json())
        assert response.get_json()["errors"]
    for path in ("/admin/database/schemas", "/admin/database/customEndpoints"):
        response = dbapi.client.get(f"{path}?skip={TOO_BIG}", headers=dbapi.admin)
        assert response.status_code == 400, (path, response.get_json())
    for skip in (MAX_SKIP + 1, TOO_BIG):
        body = dbapi.graphql("query($s: Int) { Priced(skip: $s) { title } }", {"s": skip})
        assert body["errors"][0]["extensions"]["code"] == "INVALID_ARGUMENTS" and "data" not in body
    literal = dbapi.graphql(f"{{ Priced(skip: {TOO_BIG}) {{ title }} }}")
    assert literal["errors"][0]["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED"
    # A Float variable is a double: past a bigint it still compares (no integer binding).
    body = dbapi.graphql("query($p: Float) { Priced(where: {price_gt: $p}) { title } }", {"p": TOO_BIG})
    assert body["data"] == {"Priced": []}


def test_arrays_are_bounded_before_their_elements_are_checked(dbapi, prices):
    """A document's array field and a custom endpoint's array input: at most MAX_ARRAY_LENGTH elements;
    values to match with ``$in``/``$nin`` (each bound in SQL): at most MAX_ITEMS, in every query form."""
    too_long = [5] * (MAX_ARRAY_LENGTH + 1)  # elements of the wrong type: refused on the length alone
    length_error = [f"Longer than maximum length {MAX_ARRAY_LENGTH}."]
    response = dbapi.client.post("/database/Priced", json={"tags": too_long}, headers=dbapi.admin)
    assert response.status_code == 400 and response.get_json()["errors"] == {"tags": length_error}
    assert dbapi.post("Priced", {"tags": ["x"] * MAX_ARRAY_LENGTH})["tags"] == ["x"] * MAX_ARRAY_LENGTH

    titles_in = {"schemaField": "title", "operation": "in", "comparisonField": {"type": "Input", "value": "titles"}}
    _endpoint(
        dbapi,
        prices,
        name="pick",
        operation="DELETE",
        inputs=[{"name": "titles", "type": "String", "location": "body", "array": True}],
        query={"AND": [titles_in]},
    )
    response = dbapi.client.delete("/database/function/pick", json={"titles": too_long}, headers=dbapi.admin)
    assert response.status_code == 400 and response.get_json()["errors"] == {"titles": length_error}
    many = [f"t{n}" for n in range(MAX_ITEMS + 1)]
    response = dbapi.client.delete("/database/function/pick", json={"titles": many}, headers=dbapi.admin)
    assert response.status_code == 400, response.get_json()
    assert "at most 1000 values" in response.get_json()["message"]
    fine = dbapi.client.delete("/database/function/pick", json={"titles": ["t0"]}, headers=dbapi.admin)
    assert fine.status_code == 200 and fine.get_json()["count"] == 1

    response = dbapi.client.get("/database/Priced?title[$in]=" + ",".join(many), headers=dbapi.admin)
    assert response.status_code == 400 and "at most 1000 values" in response.get_json()["message"]
    query = "query($t: [String!]) { Priced(where: {title_in: $t}) { title } }"
    assert dbapi.graphql(query, {"t": ["t1"]})["data"] == {"Priced": [{"title": "t1"}]}
    refused = dbapi.graphql(query, {"t": many})
    assert refused["data"] is None and refused["errors"][0]["extensions"]["code"] == "INVALID_ARGUMENTS"
    # Past a document array's bound, variables are refused before GraphQL coerces their elements.
    response = dbapi.client.post(
        "/graphql",
        json={"query": query, "variables": {"t": ["x"] * (MAX_ARRAY_LENGTH + 1)}},
        headers={**dbapi.admin, "Accept": "application/graphql-response+json"},
    )
    assert response.status_code == 400
    assert response.get_json()["errors"][0]["extensions"]["code"] == "INVALID_ARGUMENTS"


def test_an_apollo_persisted_query_hash_alone_is_not_found(dbapi, prices):
    """Apollo's link sends only ``extensions.persistedQuery`` first and sends the query when the answer says
    PERSISTED_QUERY_NOT_FOUND (by message or code)."""
    extensions = {"persistedQuery": {"version": 1, "sha256Hash": "ab" * 32}}
    answers = [
        dbapi.client.post("/graphql", json={"extensions": extensions, "variables": {}}, headers=dbapi.admin),
        dbapi.client.get(
            "/graphql",
            query_string={"extensions": '{"persistedQuery": {"version": 1, "sha256Hash": "' + "ab" * 32 + '"}}'},
            headers=dbapi.admin,
        ),
    ]
    for response in answers:
        assert response.status_code == 400
        assert response.get_json() == {
            "errors": [{"message": "PersistedQueryNotFound", "extensions": {"code": "PERSISTED_QUERY_NOT_FOUND"}}]
        }
    retried = dbapi.graphql("{ Priced(limit: 1) { title } }")
    assert retried["data"] == {"Priced": [{"title": "t0"}]} or len(retried["data"]["Priced"]) == 1


@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE"])
def test_other_methods_on_graphql_answer_a_graphql_shaped_405(dbapi, method):
    response = dbapi.client.open("/graphql", method=method, json={"query": "{ __typename }"}, headers=dbapi.admin)
    assert response.status_code == 405
    assert {"GET", "POST"} <= set(response.headers["Allow"].replace(" ", "").split(","))
    body = response.get_json()
    assert set(body) == {"errors"}
    assert body["errors"][0]["extensions"]["code"] == "METHOD_NOT_ALLOWED" and body["errors"][0]["message"]
