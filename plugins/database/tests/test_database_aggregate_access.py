"""Aggregates under per-document access control (a caller groups only what it may read, as its list shows;
team scope; administrators see all), the GraphQL ``<Schema>__aggregate`` query, the OpenAPI path, and
schemathesis over the route."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis

from trellis.testing.fuzzing import failures
from trellis.testing.plugin import TEST_MASTER_KEY

from .test_database_document_access import Teams

ACCESS = {"conduit": {"authorization": {"enabled": True}}}


@pytest.fixture()
def notes(dbapi) -> dict[str, Any]:
    return dbapi.create_schema("Note", {"topic": "String", "hours": "Number"}, modelOptions=ACCESS)


def _aggregate(dbapi, query: str, user=None, expect: int = 200) -> dict[str, Any]:
    headers = dbapi.admin if user is None else user.headers
    response = dbapi.client.get(f"/database/Note/aggregate?{query}", headers=headers)
    assert response.status_code == expect, response.get_json()
    return response.get_json()


def _share(dbapi, owner, doc_id: str, subject: str) -> None:
    response = dbapi.client.post(
        f"/database/Note/{doc_id}/grants", json={"subject": subject, "relation": "reader"}, headers=owner.headers
    )
    assert response.status_code == 201, response.get_json()


def _totals(answer: dict[str, Any]) -> dict[Any, tuple[int, Any]]:
    return {group["key"].get("topic"): (group["count"], group["sum"]["hours"]) for group in answer["groups"]}


QUERY = "groupBy=topic&count=true&sum=hours"


def test_a_user_aggregates_only_what_it_may_read(dbapi, notes, make_user):
    alice, bob = make_user(), make_user()
    mine = dbapi.client.post(
        "/database/Note/many",
        json={"docs": [{"topic": "ops", "hours": 1}, {"topic": "ops", "hours": 2}, {"topic": "dev", "hours": 4}]},
        headers=alice.headers,
    ).get_json()["docs"]
    dbapi.post("Note", {"topic": "ops", "hours": 8}, headers=bob.headers)
    dbapi.post("Note", {"topic": "sales", "hours": 16}, headers=bob.headers)
    assert _totals(_aggregate(dbapi, QUERY, alice)) == {"dev": (1, 4), "ops": (2, 3)}
    assert _totals(_aggregate(dbapi, QUERY, bob)) == {"ops": (1, 8), "sales": (1, 16)}
    assert _totals(_aggregate(dbapi, QUERY)) == {"dev": (1, 4), "ops": (3, 11), "sales": (1, 16)}  # admin: all
    assert _aggregate(dbapi, QUERY, make_user()) == {"groups": [], "count": 0}
    anonymous = dbapi.client.get(f"/database/Note/aggregate?{QUERY}", headers={})
    assert anonymous.get_json() == {"groups": [], "count": 0}
    # a grant is in force for the next aggregate, and the list agrees with it
    _share(dbapi, alice, mine[2]["_id"], f"User:{bob.id}")
    seen = _aggregate(dbapi, f"{QUERY}&hours[$gte]=4", bob)
    assert _totals(seen) == {"dev": (1, 4), "ops": (1, 8), "sales": (1, 16)}
    assert dbapi.list("Note", "hours[$gte]=4", headers=bob.headers)["count"] == sum(g["count"] for g in seen["groups"])
    _share(dbapi, alice, mine[0]["_id"], "User:*")
    assert _totals(_aggregate(dbapi, QUERY, make_user())) == {"ops": (1, 1)}


def test_team_scope_aggregates_the_teams_documents(dbapi, notes, make_user, admin_headers):
    teams = Teams(dbapi.client, admin_headers)
    alice, bob, mallory = make_user(), make_user(), make_user()
    team = teams.create(alice, "Ops")
    teams.add(alice, team, bob)
    for hours in (1, 2):
        response = dbapi.client.post(
            f"/database/Note?scope=Team:{team}", json={"topic": "team", "hours": hours}, headers=bob.headers
        )
        assert response.status_code == 201, response.get_json()
    dbapi.post("Note", {"topic": "own", "hours": 5}, headers=bob.headers)
    assert _totals(_aggregate(dbapi, f"{QUERY}&scope=Team:{team}", bob)) == {"team": (2, 3)}
    assert _totals(_aggregate(dbapi, f"{QUERY}&scope=Team:{team}", alice)) == {"team": (2, 3)}
    assert _totals(_aggregate(dbapi, QUERY, bob)) == {"own": (1, 5), "team": (2, 3)}
    refused = _aggregate(dbapi, f"{QUERY}&scope=Team:{team}", mallory, expect=403)
    assert refused["name"] == "FORBIDDEN"


GRAPHQL = """query ($where: Note__Where, $scope: String) {
  Note__aggregate(where: $where, groupBy: ["topic"], count: true, sum: ["hours"], max: ["hours", "createdAt"],
                  sort: "-sum.hours", limit: 2, scope: $scope) {
    count
    groups { key count sum avg max }
  }
}"""


def test_graphql_aggregate_matches_rest_under_access(dbapi, notes, make_user):
    alice, bob = make_user(), make_user()
    for topic, hours in (("ops", 1), ("ops", 2), ("dev", 4), ("qa", 0.5)):
        dbapi.post("Note", {"topic": topic, "hours": hours}, headers=alice.headers)
    dbapi.post("Note", {"topic": "ops", "hours": 100}, headers=bob.headers)
    body = dbapi.graphql(GRAPHQL, headers=alice.headers)
    assert "errors" not in body, body
    result = body["data"]["Note__aggregate"]
    rest = _aggregate(dbapi, "groupBy=topic&count=true&sum=hours&max=hours,createdAt&sort=-sum.hours&limit=2", alice)
    assert result["count"] == rest["count"] == 3
    assert [{**g, "avg": None} for g in rest["groups"]] == result["groups"]
    assert [(g["key"], g["count"], g["sum"]) for g in result["groups"]] == [
        ({"topic": "dev"}, 1, {"hours": 4}),
        ({"topic": "ops"}, 2, {"hours": 3}),
    ]
    filtered = dbapi.graphql(GRAPHQL, {"where": {"hours_lt": 2}}, headers=alice.headers)["data"]["Note__aggregate"]
    assert [(g["key"]["topic"], g["count"]) for g in filtered["groups"]] == [("ops", 1), ("qa", 1)]
    everything = dbapi.graphql(GRAPHQL)["data"]["Note__aggregate"]
    assert everything["groups"][0]["sum"] == {"hours": 103}  # the master key: bob's too


def test_graphql_aggregate_errors_name_the_problem(dbapi, notes, make_user):
    user = make_user()
    for arguments, words in (
        ('groupBy: ["nope"]', "Unknown field 'nope'"),
        ('sum: ["topic"]', "topic is String"),
        ("limit: 5000", "1 to 1000"),
        ('groupBy: ["createdAt:hour"]', "Unknown date bucket"),
        ('sort: "-avg"', "Cannot sort by"),
        ('scope: "Team:nope"', "team"),
    ):
        body = dbapi.graphql(f"{{ Note__aggregate({arguments}) {{ count }} }}", headers=user.headers)
        assert body["data"] is None, body
        error = body["errors"][0]
        assert words.lower() in error["message"].lower(), (arguments, error)
        assert error["extensions"]["status"] in (400, 403), error
    assert dbapi.graphql("{ Note__aggregate { count groups { key count } } }", headers=user.headers)["data"] == {
        "Note__aggregate": {"count": 1, "groups": [{"key": {}, "count": None}]}
    }


def test_openapi_documents_the_route_per_schema(dbapi, notes):
    document = dbapi.client.get("/openapi.json").get_json()
    operation = document["paths"]["/database/Note/aggregate"]["get"]
    assert operation["operationId"] == "aggregateNote"
    names = {parameter["name"] for parameter in operation["parameters"]}
    assert {"groupBy", "count", "sum", "avg", "min", "max", "sort", "limit", "where", "scope", "hours[$lt]"} <= names
    assert "/database/{schemaName}/aggregate" not in document["paths"]


def test_schemathesis_finds_no_server_error(app, dbapi, notes, make_user):
    dbapi.create_schema(
        "FuzzSale",
        {"region": "String", "amount": "Number", "paid": "Boolean", "when": "Date", "tags": ["String"], "meta": "JSON"},
    )
    dbapi.many("FuzzSale", [{"region": "n", "amount": 1, "when": "2024-01-01T00:00:00Z"}, {"amount": 2.5}])
    dbapi.post("Note", {"topic": "t", "hours": 1}, headers=make_user().headers)
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app).include(
        path_regex=r"^/database/(FuzzSale|Note)/aggregate$"
    )
    operations, failed = failures(schema, [{"masterkey": TEST_MASTER_KEY}, {}], examples=25, negative=True)
    assert operations == 2
    assert not failed, "\n\n".join(f"{label}:\n{text}" for label, text in failed.items())
