"""Per-document access control on the REST routes (``docs/access.md``): owners,
sharing, 404 for what a caller may not read (byte for byte the answer for a missing id), 403 for what it
may read but not change, exact counts, populate, scope, and schemas that do not opt in."""

from __future__ import annotations

import re
from typing import Any

import pytest

ACCESS = {"conduit": {"authorization": {"enabled": True}}}


@pytest.fixture()
def notes(dbapi) -> dict[str, Any]:
    return dbapi.create_schema("Note", {"text": "String", "n": "Number"}, modelOptions=ACCESS)


def _share(client, user, doc_id: str, subject: str, relation: str, expect: int = 201, schema: str = "Note") -> Any:
    response = client.post(
        f"/database/{schema}/{doc_id}/grants", json={"subject": subject, "relation": relation}, headers=user.headers
    )
    assert response.status_code == expect, response.get_json()
    return response.get_json()


def _without_request_id(body: bytes) -> bytes:
    return re.sub(rb'"requestId":\s*"[^"]*"', b"", body)


def test_a_creator_owns_and_nobody_else_sees(dbapi, notes, make_user):
    alice, bob = make_user(), make_user()
    doc = dbapi.post("Note", {"text": "alice's"}, headers=alice.headers)
    dbapi.post("Note", {"text": "bob's"}, headers=bob.headers)
    assert [d["text"] for d in dbapi.list("Note", headers=alice.headers)["documents"]] == ["alice's"]
    assert dbapi.list("Note", headers=alice.headers)["count"] == 1
    assert dbapi.list("Note")["count"] == 2  # the master key sees everything
    assert dbapi.client.get(f"/database/Note/{doc['_id']}", headers=alice.headers).status_code == 200
    hidden = dbapi.client.get(f"/database/Note/{doc['_id']}", headers=bob.headers)
    missing = dbapi.client.get("/database/Note/0123456789abcdef0123456789abcdef", headers=bob.headers)
    assert hidden.status_code == missing.status_code == 404
    assert _without_request_id(hidden.data).replace(doc["_id"].encode(), b"ID") == _without_request_id(
        missing.data
    ).replace(b"0123456789abcdef0123456789abcdef", b"ID")
    for method in ("put", "patch", "delete"):
        kwargs = {"json": {"text": "x"}} if method != "delete" else {}
        response = getattr(dbapi.client, method)(f"/database/Note/{doc['_id']}", headers=bob.headers, **kwargs)
        assert response.status_code == 404, method
    assert dbapi.client.get("/database/Note", headers={}).get_json() == {"documents": [], "count": 0}


def test_sharing_reader_editor_and_revoke(dbapi, notes, make_user):
    alice, bob, carol = make_user(), make_user(), make_user()
    doc = dbapi.post("Note", {"text": "plan"}, headers=alice.headers)
    url = f"/database/Note/{doc['_id']}"
    _share(dbapi.client, bob, doc["_id"], f"User:{carol.id}", "reader", expect=404)  # bob cannot read it
    granted = _share(dbapi.client, alice, doc["_id"], f"User:{bob.id}", "reader")
    assert granted == {"subject": f"User:{bob.id}", "relation": "reader", "resource": f"Note:{doc['_id']}"}
    assert dbapi.client.get(url, headers=bob.headers).status_code == 200
    assert dbapi.client.patch(url, json={"text": "x"}, headers=bob.headers).status_code == 403
    assert dbapi.client.delete(url, headers=bob.headers).status_code == 403
    _share(dbapi.client, bob, doc["_id"], f"User:{carol.id}", "reader", expect=403)  # reader lacks share
    _share(dbapi.client, alice, doc["_id"], f"User:{bob.id}", "reader", expect=409)
    _share(dbapi.client, alice, doc["_id"], f"User:{bob.id}", "editor")
    assert dbapi.client.patch(url, json={"text": "edited"}, headers=bob.headers).status_code == 200
    assert dbapi.client.delete(url, headers=bob.headers).status_code == 403  # delete: owners
    grants = dbapi.client.get(f"{url}/grants", headers=bob.headers).get_json()
    assert grants["count"] == 3
    assert {(g["subject"], g["relation"]) for g in grants["grants"]} == {
        (f"User:{alice.id}", "owner"),
        (f"User:{bob.id}", "reader"),
        (f"User:{bob.id}", "editor"),
    }
    response = dbapi.client.delete(f"{url}/grants?subject=User:{bob.id}&relation=editor", headers=alice.headers)
    assert response.status_code == 200, response.get_json()
    dbapi.client.delete(f"{url}/grants?subject=User:{bob.id}&relation=reader", headers=alice.headers)
    assert dbapi.client.get(url, headers=bob.headers).status_code == 404
    assert dbapi.list("Note", headers=bob.headers)["count"] == 0


def test_bad_grants_are_400_and_write_nothing(dbapi, notes, make_user):
    alice = make_user()
    doc = dbapi.post("Note", {"text": "x"}, headers=alice.headers)
    for subject, relation in (
        ("User:nobody", "reader"),
        ("Group:1", "reader"),
        (f"User:{alice.id}", "admin"),
        ("*", "owner"),  # owner does not admit wildcards
    ):
        _share(dbapi.client, alice, doc["_id"], subject, relation, expect=400)
    grants = dbapi.client.get(f"/database/Note/{doc['_id']}/grants", headers=alice.headers).get_json()
    assert grants["count"] == 1


def test_wildcards_public_and_signed_in(dbapi, notes, make_user):
    alice, bob = make_user(), make_user()
    public = dbapi.post("Note", {"text": "public"}, headers=alice.headers)
    members = dbapi.post("Note", {"text": "members"}, headers=alice.headers)
    _share(dbapi.client, alice, public["_id"], "*", "reader")
    _share(dbapi.client, alice, members["_id"], "User:*", "reader")
    assert [d["text"] for d in dbapi.list("Note", headers={})["documents"]] == ["public"]
    assert sorted(d["text"] for d in dbapi.list("Note", headers=bob.headers)["documents"]) == ["members", "public"]


def test_counts_are_exact_for_two_users(dbapi, notes, make_user):
    alice, bob = make_user(), make_user()
    mine = [dbapi.post("Note", {"text": f"a{i}", "n": i}, headers=alice.headers) for i in range(7)]
    for i in range(4):
        dbapi.post("Note", {"text": f"b{i}", "n": i}, headers=bob.headers)
    for doc in mine[:3]:
        _share(dbapi.client, alice, doc["_id"], f"User:{bob.id}", "reader")
    assert dbapi.list("Note", "limit=2", headers=alice.headers)["count"] == 7
    assert dbapi.list("Note", "limit=2", headers=bob.headers)["count"] == 7
    assert dbapi.list("Note", "limit=2&n[$lt]=2", headers=bob.headers)["count"] == 4
    assert dbapi.list("Note", "limit=2&n[$lt]=2", headers=alice.headers)["count"] == 2
    # a revoke changes the next count (no stale cached one)
    dbapi.client.delete(
        f"/database/Note/{mine[0]['_id']}/grants?subject=User:{bob.id}&relation=reader", headers=alice.headers
    )
    assert dbapi.list("Note", "limit=2", headers=bob.headers)["count"] == 6


def test_many_and_delete_keep_tuples_in_step(dbapi, notes, make_user):
    alice = make_user()
    response = dbapi.client.post(
        "/database/Note/many", json={"docs": [{"text": "1"}, {"text": "2"}]}, headers=alice.headers
    )
    assert response.status_code == 201
    ids = [d["_id"] for d in response.get_json()["docs"]]
    assert dbapi.list("Note", headers=alice.headers)["count"] == 2
    assert dbapi.client.delete(f"/database/Note/{ids[0]}", headers=alice.headers).status_code == 200
    relations = dbapi.client.get(f"/database/Note/{ids[1]}/grants", headers=alice.headers).get_json()
    assert relations["count"] == 1


def test_populate_keeps_an_unreadable_target_as_its_id(dbapi, make_user):
    dbapi.create_schema("Project", {"name": "String"}, modelOptions=ACCESS)
    dbapi.create_schema(
        "Task", {"title": "String", "project": {"type": "Relation", "model": "Project"}}, modelOptions=ACCESS
    )
    alice, bob = make_user(), make_user()
    project = dbapi.post("Project", {"name": "secret"}, headers=alice.headers)
    task = dbapi.post("Task", {"title": "t", "project": project["_id"]}, headers=alice.headers)
    _share(dbapi.client, alice, task["_id"], f"User:{bob.id}", "reader", schema="Task")
    seen = dbapi.client.get(f"/database/Task/{task['_id']}?populate=project", headers=bob.headers).get_json()
    assert seen["project"] == project["_id"]
    listed = dbapi.list("Task", "populate=project", headers=bob.headers)["documents"]
    assert listed[0]["project"] == project["_id"]
    own = dbapi.client.get(f"/database/Task/{task['_id']}?populate=project", headers=alice.headers).get_json()
    assert own["project"]["name"] == "secret"


def test_inherited_read_through_a_relation(dbapi, make_user):
    dbapi.tasks_read_through_projects({"title": "String"})
    alice, bob = make_user(), make_user()
    project = dbapi.post("Project", {"name": "p"}, headers=alice.headers)
    task = dbapi.post("Task", {"title": "t", "project": project["_id"]}, headers=alice.headers)
    assert dbapi.list("Task", headers=bob.headers)["count"] == 0
    _share(dbapi.client, alice, project["_id"], f"User:{bob.id}", "reader", schema="Project")
    assert dbapi.list("Task", headers=bob.headers)["count"] == 1
    assert dbapi.client.get(f"/database/Task/{task['_id']}", headers=bob.headers).status_code == 200
    assert (
        dbapi.client.patch(f"/database/Task/{task['_id']}", json={"title": "x"}, headers=bob.headers).status_code == 403
    )


def test_field_backed_relation_assignee_edits(dbapi, make_user):
    options = {"conduit": {"authorization": {"enabled": True, "fields": {"assignee": "editor"}}}}
    dbapi.create_schema(
        "Ticket", {"title": "String", "assignee": {"type": "Relation", "model": "User"}}, modelOptions=options
    )
    alice, bob = make_user(), make_user()
    ticket = dbapi.post("Ticket", {"title": "t", "assignee": bob.id}, headers=alice.headers)
    assert dbapi.list("Ticket", headers=bob.headers)["count"] == 1
    response = dbapi.client.patch(f"/database/Ticket/{ticket['_id']}", json={"title": "done"}, headers=bob.headers)
    assert response.status_code == 200
    populated = dbapi.client.get(
        f"/database/Ticket/{ticket['_id']}?populate=assignee", headers=alice.headers
    ).get_json()
    assert populated["assignee"] == {"_id": bob.id, "email": bob.email}
    dbapi.client.patch(f"/database/Ticket/{ticket['_id']}", json={"assignee": alice.id}, headers=alice.headers)
    assert dbapi.list("Ticket", headers=bob.headers)["count"] == 0
    dbapi.post("Ticket", {"title": "t", "assignee": "nobody"}, headers=alice.headers, expect=400)


def test_bad_access_options_are_400(dbapi):
    bad = [
        {"conduit": {"authorization": {"enabled": True, "fields": {"title": "editor"}}}},
        {"conduit": {"authorization": {"enabled": True, "fields": {"owner": "boss"}}}},
        {"conduit": {"authorization": {"enabled": "yes"}}},
    ]
    for options in bad:
        dbapi.create_schema(
            "Bad", {"title": "String", "owner": {"type": "Relation", "model": "User"}}, modelOptions=options, expect=400
        )


def test_schemas_that_do_not_opt_in_are_unchanged(dbapi, make_user):
    dbapi.create_schema("Open", {"text": "String"})
    alice, bob = make_user(), make_user()
    doc = dbapi.post("Open", {"text": "x"}, headers=alice.headers)
    assert dbapi.client.get(f"/database/Open/{doc['_id']}", headers=bob.headers).status_code == 200
    assert dbapi.list("Open", "scope=Team:abc", headers=bob.headers, expect=400)
    assert dbapi.client.get(f"/database/Open/{doc['_id']}/grants", headers=bob.headers).status_code == 404


class Teams:
    """Team calls through the Authentication module's routes (teams on, adding without invites)."""

    def __init__(self, client, admin_headers) -> None:
        self.client = client
        response = client.put(
            "/config/authentication",
            json={"teams": {"enabled": True, "allowAddWithoutInvite": True}},
            headers=admin_headers,
        )
        assert response.status_code == 200, response.get_json()

    def create(self, owner, name: str, parent: str | None = None) -> str:
        body = {"name": name, **({"parentTeam": parent} if parent else {})}
        response = self.client.post("/authentication/teams", json=body, headers=owner.headers)
        assert response.status_code == 201, response.get_json()
        return response.get_json()["_id"]

    def add(self, owner, team_id: str, user) -> None:
        response = self.client.post(
            f"/authentication/teams/{team_id}/add", json={"userId": user.id}, headers=owner.headers
        )
        assert response.status_code in (200, 201), response.get_json()

    def remove(self, owner, team_id: str, user) -> None:
        response = self.client.delete(
            f"/authentication/teams/{team_id}/members?members={user.id}", headers=owner.headers
        )
        assert response.status_code == 200, response.get_json()


def test_team_grants_reach_sub_team_members_and_end_with_membership(dbapi, notes, make_user, admin_headers):
    teams = Teams(dbapi.client, admin_headers)
    alice, bob = make_user(), make_user()
    parent = teams.create(alice, "Company")
    child = teams.create(alice, "Design", parent)
    teams.add(alice, child, bob)
    doc = dbapi.post("Note", {"text": "roadmap"}, headers=alice.headers)
    url = f"/database/Note/{doc['_id']}"
    assert dbapi.client.get(url, headers=bob.headers).status_code == 404
    _share(dbapi.client, alice, doc["_id"], f"Team:{parent}", "editor")
    assert dbapi.client.get(url, headers=bob.headers).status_code == 200  # a member of a sub-team
    assert dbapi.client.patch(url, json={"text": "v2"}, headers=bob.headers).status_code == 200
    assert dbapi.list("Note", headers=bob.headers)["count"] == 1
    teams.remove(alice, child, bob)
    assert dbapi.client.get(url, headers=bob.headers).status_code == 404  # at once, next request
    assert dbapi.list("Note", headers=bob.headers)["count"] == 0


def test_scope_acts_as_the_team(dbapi, notes, make_user, admin_headers):
    teams = Teams(dbapi.client, admin_headers)
    alice, bob, mallory = make_user(), make_user(), make_user()
    team = teams.create(alice, "Ops")
    teams.add(alice, team, bob)
    shared = dbapi.client.post(f"/database/Note?scope=Team:{team}", json={"text": "team's"}, headers=bob.headers)
    assert shared.status_code == 201, shared.get_json()
    dbapi.post("Note", {"text": "bob's own"}, headers=bob.headers)
    grants = dbapi.client.get(f"/database/Note/{shared.get_json()['_id']}/grants", headers=alice.headers).get_json()
    assert grants["grants"] == [{"subject": f"Team:{team}", "relation": "owner"}]
    # acting as the team: the team's grants only
    assert [d["text"] for d in dbapi.list("Note", f"scope=Team:{team}", headers=bob.headers)["documents"]] == ["team's"]
    assert dbapi.list("Note", headers=bob.headers)["count"] == 2
    # alice (team owner, not the creator) may delete it: the team owns it
    assert dbapi.client.delete(f"/database/Note/{shared.get_json()['_id']}", headers=alice.headers).status_code == 200
    for url in (f"/database/Note?scope=Team:{team}", f"/database/Note?scope=Team:{team}&limit=1"):
        response = dbapi.client.get(url, headers=mallory.headers)
        assert response.status_code == 403 and response.get_json()["name"] == "FORBIDDEN"
    response = dbapi.client.post(f"/database/Note?scope=Team:{team}", json={"text": "x"}, headers=mallory.headers)
    assert response.status_code == 403
    assert dbapi.list("Note", "scope=User:abc", headers=bob.headers, expect=400)


def test_deleting_a_team_or_user_removes_their_grants(dbapi, notes, make_user, admin_headers):
    teams = Teams(dbapi.client, admin_headers)
    alice, bob = make_user(), make_user()
    team = teams.create(alice, "Temp")
    doc = dbapi.post("Note", {"text": "x"}, headers=alice.headers)
    _share(dbapi.client, alice, doc["_id"], f"Team:{team}", "reader")
    _share(dbapi.client, alice, doc["_id"], f"User:{bob.id}", "reader")
    assert dbapi.client.delete(f"/authentication/teams/{team}", headers=alice.headers).status_code == 200
    response = dbapi.client.delete(f"/authentication/users/{bob.id}", headers=admin_headers)
    assert response.status_code == 200, response.get_json()
    grants = dbapi.client.get(f"/database/Note/{doc['_id']}/grants", headers=alice.headers).get_json()
    assert grants["grants"] == [{"subject": f"User:{alice.id}", "relation": "owner"}]


def test_field_backed_arrays_of_users_and_a_team_field(dbapi, make_user, admin_headers):
    teams = Teams(dbapi.client, admin_headers)
    options = {"conduit": {"authorization": {"enabled": True, "fields": {"watchers": "reader", "team": "editor"}}}}
    dbapi.create_schema(
        "Board",
        {
            "title": "String",
            "watchers": [{"type": "Relation", "model": "User"}],
            "team": {"type": "Relation", "model": "Team"},
        },
        modelOptions=options,
    )
    alice, bob, carol, dave = make_user(), make_user(), make_user(), make_user()
    team = teams.create(alice, "Board team")
    teams.add(alice, team, carol)
    board = dbapi.post("Board", {"title": "b", "watchers": [bob.id], "team": team}, headers=alice.headers)
    url = f"/database/Board/{board['_id']}"
    assert dbapi.client.get(url, headers=bob.headers).status_code == 200
    assert dbapi.client.patch(url, json={"title": "x"}, headers=bob.headers).status_code == 403  # reader
    assert dbapi.client.patch(url, json={"title": "y"}, headers=carol.headers).status_code == 200  # team editor
    assert dbapi.client.get(url, headers=dave.headers).status_code == 404
    assert [dbapi.list("Board", headers=u.headers)["count"] for u in (bob, carol, dave)] == [1, 1, 0]
    dbapi.client.patch(url, json={"watchers": [dave.id]}, headers=alice.headers)
    assert [dbapi.list("Board", headers=u.headers)["count"] for u in (bob, dave)] == [0, 1]
    dbapi.post("Board", {"title": "b", "team": "0" * 32}, headers=alice.headers, expect=400)


def test_deleting_ones_own_account_removes_ones_grants_and_owned_tuples(dbapi, notes, make_user):
    alice, bob = make_user(), make_user()
    hers = dbapi.post("Note", {"text": "alice's"}, headers=alice.headers)
    his = dbapi.post("Note", {"text": "bob's"}, headers=bob.headers)
    _share(dbapi.client, alice, hers["_id"], f"User:{bob.id}", "editor")
    _share(dbapi.client, bob, his["_id"], f"User:{alice.id}", "reader")
    response = dbapi.client.delete("/authentication/user", json={"password": bob.password}, headers=bob.headers)
    assert response.status_code == 200, response.get_json()
    grants = dbapi.client.get(f"/database/Note/{hers['_id']}/grants", headers=alice.headers).get_json()
    assert grants["grants"] == [{"subject": f"User:{alice.id}", "relation": "owner"}]
    # bob's note stays (documents are the app's data), shared with alice; its owner tuple went with bob
    remaining = dbapi.client.get(f"/database/Note/{his['_id']}/grants", headers=alice.headers).get_json()
    assert remaining["grants"] == [{"subject": f"User:{alice.id}", "relation": "reader"}]
