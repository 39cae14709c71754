"""GraphQL under per-document access control (``docs/access.md``): lists, ``__one`` and
exact ``__count`` show only what the caller may read; create grants owner, update needs edit, delete needs
delete; an unreadable document is the NOT_FOUND of a missing one; populate of an unreadable target is
null; Relations to User (public fields) and Team (its id); ``scope`` acts as a team."""

from __future__ import annotations

from typing import Any

import pytest

ACCESS = {"conduit": {"authorization": {"enabled": True}}}
MISSING_ID = "0123456789abcdef0123456789abcdef"


@pytest.fixture()
def notes(dbapi) -> dict[str, Any]:
    return dbapi.create_schema("Note", {"text": "String", "n": "Number"}, modelOptions=ACCESS)


def _share(dbapi, owner, schema: str, doc_id: str, subject: str, relation: str) -> None:
    response = dbapi.client.post(
        f"/database/{schema}/{doc_id}/grants", json={"subject": subject, "relation": relation}, headers=owner.headers
    )
    assert response.status_code == 201, response.get_json()


def _data(dbapi, query: str, user, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    body = dbapi.graphql(query, variables, headers=user.headers)
    assert "errors" not in body, body
    return body["data"]


def _error(dbapi, query: str, user, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    body = dbapi.graphql(query, variables, headers=user.headers)
    assert len(body["errors"]) == 1, body
    return body["errors"][0]


CREATE = "mutation ($text: String) { createNote(data: {text: $text}) { _id text } }"
LIST = '{ Note(sort: "n,text", limit: 3) { text } all: Note__count  small: Note__count(where: {n_lt: 2}) }'


def test_two_users_see_different_lists_and_exact_counts(dbapi, notes, make_user):
    alice, bob = make_user(), make_user()
    created = {
        user.id: dbapi.client.post(
            "/database/Note/many",
            json={"docs": [{"text": f"{prefix}{i}", "n": i} for i in range(how_many)]},
            headers=user.headers,
        ).get_json()["docs"]
        for user, prefix, how_many in ((alice, "a", 6), (bob, "b", 3))
    }
    mine = created[alice.id]
    for doc in mine[:2]:
        _share(dbapi, alice, "Note", doc["_id"], f"User:{bob.id}", "reader")
    seen_by_alice = _data(dbapi, LIST, alice)
    seen_by_bob = _data(dbapi, LIST, bob)
    assert [d["text"] for d in seen_by_alice["Note"]] == ["a0", "a1", "a2"]
    assert (seen_by_alice["all"], seen_by_alice["small"]) == (6, 2)
    assert sorted(d["text"] for d in seen_by_bob["Note"]) == ["a0", "a1", "b0"]
    assert (seen_by_bob["all"], seen_by_bob["small"]) == (5, 4)
    admin = dbapi.graphql("{ Note__count }")
    assert admin["data"]["Note__count"] == 9
    anonymous = dbapi.graphql("{ Note { text } Note__count }", headers={})
    assert anonymous["data"] == {"Note": [], "Note__count": 0}
    # a revoke is in force for the next query (no stale cached count)
    dbapi.client.delete(
        f"/database/Note/{mine[0]['_id']}/grants?subject=User:{bob.id}&relation=reader", headers=alice.headers
    )
    assert _data(dbapi, "{ Note__count }", bob)["Note__count"] == 4


def test_one_is_null_alike_for_unreadable_and_missing(dbapi, notes, make_user):
    alice, bob = make_user(), make_user()
    doc = dbapi.post("Note", {"text": "private"}, headers=alice.headers)
    query = "query ($id: ID!) { Note__one(_id: $id) { _id text } }"
    assert _data(dbapi, query, alice, {"id": doc["_id"]}) == {"Note__one": {"_id": doc["_id"], "text": "private"}}
    assert _data(dbapi, query, bob, {"id": doc["_id"]}) == {"Note__one": None}
    assert _data(dbapi, query, bob, {"id": MISSING_ID}) == {"Note__one": None}


def test_mutations_create_grants_owner_update_needs_edit_delete_needs_delete(dbapi, notes, make_user):
    alice, bob, carol = make_user(), make_user(), make_user()
    created = _data(dbapi, CREATE, alice, {"text": "by graphql"})["createNote"]
    doc_id = created["_id"]
    grants = dbapi.client.get(f"/database/Note/{doc_id}/grants", headers=alice.headers).get_json()
    assert grants["grants"] == [{"subject": f"User:{alice.id}", "relation": "owner"}]
    _share(dbapi, alice, "Note", doc_id, f"User:{bob.id}", "reader")
    update = 'mutation ($id: ID!) { updateNote(_id: $id, data: {text: "changed"}) { text } }'
    delete = "mutation ($id: ID!) { deleteNote(_id: $id) { _id deleted } }"

    refused = _error(dbapi, update, bob, {"id": doc_id})  # may read, may not edit
    assert refused["extensions"]["code"] == "FORBIDDEN" and refused["extensions"]["status"] == 403
    assert _error(dbapi, delete, bob, {"id": doc_id})["extensions"]["code"] == "FORBIDDEN"

    # carol may not read it: the very answer of a missing id, message included
    for mutation in (update, delete):
        hidden = _error(dbapi, mutation, carol, {"id": doc_id})
        missing = _error(dbapi, mutation, carol, {"id": MISSING_ID})
        assert hidden["extensions"] == missing["extensions"] and hidden["extensions"]["code"] == "NOT_FOUND"
        assert hidden["message"].replace(doc_id, "ID") == missing["message"].replace(MISSING_ID, "ID")
    assert dbapi.client.get(f"/database/Note/{doc_id}", headers=alice.headers).get_json()["text"] == "by graphql"

    _share(dbapi, alice, "Note", doc_id, f"User:{bob.id}", "editor")
    assert _data(dbapi, update, bob, {"id": doc_id}) == {"updateNote": {"text": "changed"}}
    assert _error(dbapi, delete, bob, {"id": doc_id})["extensions"]["code"] == "FORBIDDEN"  # owners only
    assert _data(dbapi, delete, alice, {"id": doc_id}) == {"deleteNote": {"_id": doc_id, "deleted": True}}
    assert dbapi.client.get(f"/database/Note/{doc_id}", headers=dbapi.admin).status_code == 404


def test_nested_relation_to_an_unreadable_document_is_null(dbapi, make_user):
    dbapi.create_schema("Project", {"name": "String"}, modelOptions=ACCESS)
    dbapi.create_schema(
        "Task",
        {
            "title": "String",
            "project": {"type": "Relation", "model": "Project"},
            "related": [{"type": "Relation", "model": "Project"}],
        },
        modelOptions=ACCESS,
    )
    alice, bob = make_user(), make_user()
    secret = dbapi.post("Project", {"name": "secret"}, headers=alice.headers)
    shared = dbapi.post("Project", {"name": "shared"}, headers=alice.headers)
    _share(dbapi, alice, "Project", shared["_id"], f"User:{bob.id}", "reader")
    task = dbapi.post(
        "Task",
        {"title": "t", "project": secret["_id"], "related": [secret["_id"], shared["_id"]]},
        headers=alice.headers,
    )
    _share(dbapi, alice, "Task", task["_id"], f"User:{bob.id}", "reader")
    query = "{ Task { title project { name } related { name } } }"
    assert _data(dbapi, query, bob)["Task"] == [{"title": "t", "project": None, "related": [None, {"name": "shared"}]}]
    assert _data(dbapi, query, alice)["Task"] == [
        {"title": "t", "project": {"name": "secret"}, "related": [{"name": "secret"}, {"name": "shared"}]}
    ]
    one = "query ($id: ID!) { Task__one(_id: $id) { project { name } } }"
    assert _data(dbapi, one, bob, {"id": task["_id"]}) == {"Task__one": {"project": None}}


def test_relations_to_user_and_team(dbapi, make_user):
    options = {"conduit": {"authorization": {"enabled": True, "fields": {"assignee": "editor"}}}}
    dbapi.create_schema(
        "Ticket",
        {
            "title": "String",
            "assignee": {"type": "Relation", "model": "User"},
            "watchers": [{"type": "Relation", "model": "User"}],
            "team": {"type": "Relation", "model": "Team"},
        },
        modelOptions=options,
    )
    alice, bob = make_user(), make_user()
    teams = _Teams(dbapi, alice)
    team_id = teams.create("Support")
    created = _data(
        dbapi,
        "mutation ($a: ID, $w: [ID!], $t: ID) "
        '{ createTicket(data: {title: "t", assignee: $a, watchers: $w, team: $t}) { _id assignee { _id email } } }',
        alice,
        {"a": bob.id, "w": [alice.id, bob.id], "t": team_id},
    )["createTicket"]
    assert created["assignee"] == {"_id": bob.id, "email": bob.email}
    query = "{ Ticket { title team assignee { _id email } watchers { email } } }"
    expected = {
        "title": "t",
        "team": team_id,
        "assignee": {"_id": bob.id, "email": bob.email},
        "watchers": [{"email": alice.email}, {"email": bob.email}],
    }
    assert _data(dbapi, query, bob)["Ticket"] == [expected]  # bob reads it as the assignee (field relation)
    # only public fields: the User object type has no other field to ask for
    leak = dbapi.graphql("{ Ticket { assignee { password } } }", headers=bob.headers)
    assert leak["errors"][0]["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED"
    # the field-backed editor relation lets bob update through GraphQL
    update = 'mutation ($id: ID!) { updateTicket(_id: $id, data: {title: "done"}) { title } }'
    assert _data(dbapi, update, bob, {"id": created["_id"]}) == {"updateTicket": {"title": "done"}}


class _Teams:
    """Teams through the Authentication module's routes (teams enabled, members added directly)."""

    def __init__(self, dbapi, owner) -> None:
        self.client, self.owner = dbapi.client, owner
        settings = {"teams": {"enabled": True, "allowAddWithoutInvite": True}}
        response = self.client.put("/config/authentication", json=settings, headers=dbapi.admin)
        assert response.status_code == 200, response.get_json()

    def create(self, name: str) -> str:
        response = self.client.post("/authentication/teams", json={"name": name}, headers=self.owner.headers)
        assert response.status_code == 201, response.get_json()
        return response.get_json()["_id"]


def test_scope_acts_as_the_team(dbapi, notes, make_user):
    alice, mallory = make_user(), make_user()
    team_id = _Teams(dbapi, alice).create("Ops")  # alice owns (so is a member of) the team
    scoped = 'mutation ($scope: String) { createNote(data: {text: "team\'s"}, scope: $scope) { _id } }'
    doc_id = _data(dbapi, scoped, alice, {"scope": f"Team:{team_id}"})["createNote"]["_id"]
    _data(dbapi, CREATE, alice, {"text": "alice's own"})
    grants = dbapi.client.get(f"/database/Note/{doc_id}/grants", headers=alice.headers).get_json()
    assert grants["grants"] == [{"subject": f"Team:{team_id}", "relation": "owner"}]
    as_team = "query ($scope: String) { Note(scope: $scope) { text } Note__count(scope: $scope) }"
    expected = {"Note": [{"text": "team's"}], "Note__count": 1}
    assert _data(dbapi, as_team, alice, {"scope": f"Team:{team_id}"}) == expected  # the team's grants only
    assert _data(dbapi, "{ Note__count }", alice)["Note__count"] == 2
    for query in (as_team, scoped):
        refused = _error(dbapi, query, mallory, {"scope": f"Team:{team_id}"})
        assert refused["extensions"]["code"] == "FORBIDDEN"
    assert _error(dbapi, as_team, alice, {"scope": "User:abc"})["extensions"]["status"] == 400
    assert dbapi.list("Note", headers=dbapi.admin)["count"] == 2  # mallory's refused create wrote nothing


def test_schemas_that_do_not_opt_in_take_no_scope(dbapi, make_user):
    dbapi.create_schema("Open", {"text": "String"})
    alice, bob = make_user(), make_user()
    dbapi.post("Open", {"text": "x"}, headers=alice.headers)
    assert _data(dbapi, "{ Open { text } Open__count }", bob) == {"Open": [{"text": "x"}], "Open__count": 1}
    refused = dbapi.graphql('{ Open(scope: "Team:abc") { text } }', headers=bob.headers)
    assert refused["errors"][0]["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED"
