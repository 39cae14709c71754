"""The administrators' read-only view of teams: every team (paged, searched), one team with its members
and sub-teams; user credentials are refused, and the routes are in OpenAPI."""

from __future__ import annotations

from .team_calls import Teams, teams  # noqa: F401  (the fixture)

ADMIN_TEAMS = "/admin/authentication/teams"


def test_administrators_list_every_team_and_read_one(teams):
    alice, bob = teams.user(), teams.user()
    tag = alice.id[:8]
    company = teams.create(alice, f"Company {tag}")
    design = teams.create(alice, f"Design {tag}", company["_id"])
    teams.add(alice, company["_id"], bob)
    other = teams.create(bob, f"Bob's {tag}")

    listed = teams.client.get(ADMIN_TEAMS, query_string={"search": tag.upper()}, headers=teams.admin)
    assert listed.status_code == 200, listed.get_json()
    body = listed.get_json()
    assert body["count"] == 3
    assert [(t["_id"], t["memberCount"]) for t in body["teams"]] == [
        (other["_id"], 1),
        (company["_id"], 2),
        (design["_id"], 1),
    ]
    paged = teams.client.get(ADMIN_TEAMS, query_string={"search": tag, "skip": 1, "limit": 1}, headers=teams.admin)
    assert [t["_id"] for t in paged.get_json()["teams"]] == [company["_id"]] and paged.get_json()["count"] == 3

    one = teams.client.get(f"{ADMIN_TEAMS}/{company['_id']}", headers=teams.admin)
    assert one.status_code == 200, one.get_json()
    detail = one.get_json()
    assert {k: detail[k] for k in ("_id", "name", "parentTeam")} == {
        "_id": company["_id"],
        "name": company["name"],
        "parentTeam": None,
    }
    assert [(m["_id"], m["email"], m["role"]) for m in detail["members"]] == [
        (alice.id, alice.email, "owner"),
        (bob.id, bob.email, "member"),
    ]
    assert [(t["_id"], t["parentTeam"], t["memberCount"]) for t in detail["teams"]] == [
        (design["_id"], company["_id"], 1)
    ]
    missing = teams.client.get(f"{ADMIN_TEAMS}/no-such-team", headers=teams.admin)
    assert missing.status_code == 404 and missing.get_json()["name"] == "NOT_FOUND"


def test_the_view_works_with_teams_switched_off_and_refuses_users(teams):
    alice = teams.user()
    team = teams.create(alice, "Switched off")
    teams.configure(enabled=False)
    assert teams.client.get(f"{ADMIN_TEAMS}/{team['_id']}", headers=teams.admin).status_code == 200
    assert teams.client.get(ADMIN_TEAMS, headers=alice.headers).status_code == 403
    assert teams.client.get(f"{ADMIN_TEAMS}/{team['_id']}", headers=alice.headers).status_code == 403
    assert teams.client.get(ADMIN_TEAMS).status_code == 401
    assert teams.client.get(ADMIN_TEAMS, query_string={"limit": 5000}, headers=teams.admin).status_code == 400


def test_the_routes_are_in_openapi(teams):
    paths = teams.client.get("/openapi.json").get_json()["paths"]
    assert "get" in paths[ADMIN_TEAMS] and "get" in paths[ADMIN_TEAMS + "/{teamId}"]


def test_the_accept_route_keeps_its_documentation_beside_its_page(teams):
    operation = teams.client.get("/openapi.json").get_json()["paths"]["/authentication/teams/invite/accept"]["get"]
    assert operation["security"] and {"200", "401", "403", "404"} <= set(operation["responses"])
    assert [p["name"] for p in operation["parameters"]] == ["invitationToken"]
