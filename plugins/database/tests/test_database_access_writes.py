"""Writes under access control at their edges. A Relation value a user writes must name a document the
user may read: a hidden one is the 400 of a missing id, byte for byte, on every write path (REST create,
PUT, PATCH, ``/many``, GraphQL, custom endpoints), arrays included, whichever schema holds the field.
Opting a schema in makes an anonymous create a 401 unless ``create.authenticated`` is set to false
explicitly. A unique value taken by a hidden document is a 409 that says only that it is taken."""

from __future__ import annotations

import re
from typing import Any

import pytest

ACCESS = {"conduit": {"authorization": {"enabled": True}}}
MISSING_ID = "0123456789abcdef0123456789abcdef"
TASK_FIELDS = {"title": "String", "related": {"type": ["Relation"], "model": "Project"}}


def _masked(response: Any, *ids: str) -> bytes:
    """The answer's body with the request id and the given document ids blanked out."""
    body = re.sub(rb'"requestId":\s*"[^"]*"', b"", response.data)
    for doc_id in ids:
        body = body.replace(doc_id.encode(), b"ID")
    return body


def _same_as_missing(hidden: Any, missing: Any, hidden_id: str) -> None:
    assert hidden.status_code == missing.status_code == 400, (hidden.get_json(), missing.get_json())
    assert _masked(hidden, hidden_id) == _masked(missing, MISSING_ID)


@pytest.fixture()
def projects(dbapi, make_user) -> dict[str, Any]:
    """Project and Task under access control (a Task readable through its ``project``); alice owns a
    project bob may not read, bob owns one of his own."""
    dbapi.tasks_read_through_projects(TASK_FIELDS)
    alice, bob = make_user(), make_user()
    secret = dbapi.post("Project", {"name": "alice's secret"}, headers=alice.headers)
    own = dbapi.post("Project", {"name": "bob's"}, headers=bob.headers)
    return {"alice": alice, "bob": bob, "secret": secret["_id"], "own": own["_id"]}


def _share(dbapi, owner, schema: str, doc_id: str, subject: str, relation: str) -> None:
    response = dbapi.client.post(
        f"/database/{schema}/{doc_id}/grants", json={"subject": subject, "relation": relation}, headers=owner.headers
    )
    assert response.status_code == 201, response.get_json()


# ---- a Relation value needs read on its target -------------------------------------------------------


def test_rest_create_naming_a_hidden_document_is_the_400_of_a_missing_id(dbapi, projects):
    alice, bob, secret, own = projects["alice"], projects["bob"], projects["secret"], projects["own"]
    for body in ({"project": "{}"}, {"related": [own, "{}"]}):

        def sent(doc_id: str, body: dict[str, Any] = body) -> dict[str, Any]:
            return {
                key: (doc_id if value == "{}" else [doc_id if v == "{}" else v for v in value])
                for key, value in body.items()
            }

        hidden = dbapi.client.post("/database/Task", json={"title": "in", **sent(secret)}, headers=bob.headers)
        missing = dbapi.client.post("/database/Task", json={"title": "in", **sent(MISSING_ID)}, headers=bob.headers)
        _same_as_missing(hidden, missing, secret)
    assert dbapi.list("Task")["count"] == 0  # nothing written
    assert dbapi.list("Task", headers=alice.headers)["count"] == 0
    # bob's own project, and alice's once she lets him read it
    dbapi.post("Task", {"title": "mine", "project": own, "related": [own]}, headers=bob.headers)
    _share(dbapi, alice, "Project", secret, f"User:{bob.id}", "reader")
    dbapi.post("Task", {"title": "shared", "project": secret}, headers=bob.headers)
    assert [d["title"] for d in dbapi.list("Task", headers=alice.headers)["documents"]] == ["shared"]


def test_administrators_name_any_document(dbapi, projects, admin_token):
    dbapi.post("Task", {"title": "by the master key", "project": projects["secret"]})
    dbapi.post(
        "Task", {"title": "by an admin", "related": [projects["secret"]]}, {"Authorization": f"Bearer {admin_token}"}
    )
    assert dbapi.list("Task")["count"] == 2


def test_put_and_patch_naming_a_hidden_document_are_the_400_of_a_missing_id(dbapi, projects):
    alice, bob, secret, own = projects["alice"], projects["bob"], projects["secret"], projects["own"]
    task = dbapi.post("Task", {"title": "bob's", "project": own}, headers=bob.headers)
    url = f"/database/Task/{task['_id']}"
    for method, body in (
        ("patch", {"project": "{}"}),
        ("put", {"title": "bob's", "project": "{}"}),
        ("patch", {"related": ["{}"]}),
        ("put", {"title": "bob's", "related": [own, "{}"]}),
    ):
        call = getattr(dbapi.client, method)

        def sent(doc_id: str, body: dict[str, Any] = body) -> dict[str, Any]:
            return {
                k: doc_id if v == "{}" else [doc_id if i == "{}" else i for i in v] if isinstance(v, list) else v
                for k, v in body.items()
            }

        _same_as_missing(
            call(url, json=sent(secret), headers=bob.headers),
            call(url, json=sent(MISSING_ID), headers=bob.headers),
            secret,
        )
    assert dbapi.client.get(url, headers=bob.headers).get_json()["project"] == own
    assert dbapi.list("Task", headers=alice.headers)["count"] == 0


def test_an_update_may_send_back_a_hidden_id_the_document_already_holds(dbapi, projects, make_user):
    """Carol edits a task of a project she cannot read: a PUT sends its ``project`` back unchanged; she may
    not move it to another hidden project."""
    alice, secret = projects["alice"], projects["secret"]
    other = dbapi.post("Project", {"name": "alice's other"}, headers=alice.headers)["_id"]
    carol = make_user()
    task = dbapi.post("Task", {"title": "t", "project": secret, "related": [secret]}, headers=alice.headers)
    _share(dbapi, alice, "Task", task["_id"], f"User:{carol.id}", "editor")
    url = f"/database/Task/{task['_id']}"
    kept = dbapi.client.put(
        url, json={"title": "carol's", "project": secret, "related": [secret]}, headers=carol.headers
    )
    assert kept.status_code == 200, kept.get_json()
    assert dbapi.client.patch(url, json={"project": secret}, headers=carol.headers).status_code == 200
    moved = dbapi.client.patch(url, json={"project": other}, headers=carol.headers)
    missing = dbapi.client.patch(url, json={"project": MISSING_ID}, headers=carol.headers)
    _same_as_missing(moved, missing, other)
    # a hidden id held in another field is no pass for this one
    swapped = dbapi.client.patch(url, json={"related": [other]}, headers=carol.headers)
    assert swapped.status_code == 400
    assert dbapi.client.get(url, headers=alice.headers).get_json()["project"] == secret


def test_many_naming_a_hidden_document_is_the_400_of_a_missing_id_and_writes_nothing(dbapi, projects):
    bob, secret, own = projects["bob"], projects["secret"], projects["own"]

    def many(doc_id: str) -> Any:
        docs = [{"title": "ok", "project": own}, {"title": "in", "related": [own, doc_id]}]
        return dbapi.client.post("/database/Task/many", json={"docs": docs}, headers=bob.headers)

    hidden, missing = many(secret), many(MISSING_ID)
    _same_as_missing(hidden, missing, secret)
    assert list(hidden.get_json()["errors"]) == ["docs.1.related"]
    assert dbapi.list("Task")["count"] == 0


def test_graphql_mutations_naming_a_hidden_document_are_the_error_of_a_missing_id(dbapi, projects):
    bob, secret, own = projects["bob"], projects["secret"], projects["own"]
    create = 'mutation ($p: ID) { createTask(data: {title: "g", project: $p}) { _id } }'
    update = "mutation ($id: ID!, $r: [ID!]) { updateTask(_id: $id, data: {related: $r}) { _id } }"
    task = dbapi.post("Task", {"title": "bob's", "project": own}, headers=bob.headers)
    for query, hidden_vars, missing_vars in (
        (create, {"p": secret}, {"p": MISSING_ID}),
        (update, {"id": task["_id"], "r": [secret]}, {"id": task["_id"], "r": [MISSING_ID]}),
    ):
        hidden = dbapi.graphql(query, hidden_vars, headers=bob.headers)
        missing = dbapi.graphql(query, missing_vars, headers=bob.headers)
        assert len(hidden["errors"]) == 1 and hidden["errors"][0]["extensions"]["status"] == 400, hidden
        assert str(hidden).replace(secret, "ID") == str(missing).replace(MISSING_ID, "ID")
    assert dbapi.list("Task")["count"] == 1
    assert "related" not in dbapi.list("Task")["documents"][0]


def test_custom_endpoints_naming_a_hidden_document_are_the_400_of_a_missing_id(dbapi, projects):
    bob, secret, own = projects["bob"], projects["secret"], projects["own"]
    assign = [{"schemaField": "project", "action": "set", "assignmentField": {"type": "Input", "value": "project"}}]
    title = {"schemaField": "title", "operation": "eq", "comparisonField": {"type": "Input", "value": "title"}}
    for name, operation, inputs, query in (
        ("newTask", "POST", [{"name": "project", "type": "String", "location": "body"}], None),
        (
            "moveTask",
            "PATCH",
            [
                {"name": "project", "type": "String", "location": "body"},
                {"name": "title", "type": "String", "location": "query"},
            ],
            {"AND": [title]},
        ),
    ):
        body = {"name": name, "operation": operation, "selectedSchema": "Task", "inputs": inputs, "assignments": assign}
        if query is not None:
            body["query"] = query
        response = dbapi.client.post("/admin/database/customEndpoints", json=body, headers=dbapi.admin)
        assert response.status_code == 201, response.get_json()
    dbapi.post("Task", {"title": "bob's", "project": own}, headers=bob.headers)
    for method, url in (("post", "/database/function/newTask"), ("patch", "/database/function/moveTask?title=bob's")):
        call = getattr(dbapi.client, method)
        hidden = call(url, json={"project": secret}, headers=bob.headers)
        missing = call(url, json={"project": MISSING_ID}, headers=bob.headers)
        _same_as_missing(hidden, missing, secret)
        assert call(url, json={"project": own}, headers=bob.headers).status_code in (200, 201)
    assert {d["project"] for d in dbapi.list("Task")["documents"]} == {own}


def test_a_schema_without_access_control_may_not_name_a_hidden_document_either(dbapi, projects):
    bob, secret, own = projects["bob"], projects["secret"], projects["own"]
    dbapi.create_schema("Note", {"text": "String", "about": {"type": "Relation", "model": "Project"}})
    hidden = dbapi.client.post("/database/Note", json={"about": secret}, headers=bob.headers)
    missing = dbapi.client.post("/database/Note", json={"about": MISSING_ID}, headers=bob.headers)
    _same_as_missing(hidden, missing, secret)
    # anonymous callers read nothing of Project: the same for them
    _same_as_missing(
        dbapi.client.post("/database/Note", json={"about": own}),
        dbapi.client.post("/database/Note", json={"about": MISSING_ID}),
        own,
    )
    dbapi.post("Note", {"about": own}, headers=bob.headers)
    dbapi.post("Note", {"about": secret})  # the master key
    assert dbapi.list("Note")["count"] == 2


def test_scope_names_what_the_team_may_read(dbapi, projects, admin_headers):
    """Acting as a team, a Relation value needs what the team may read (bob's own project is not the team's)."""
    bob = projects["bob"]
    settings = {"teams": {"enabled": True, "allowAddWithoutInvite": True}}
    assert dbapi.client.put("/config/authentication", json=settings, headers=admin_headers).status_code == 200
    team = dbapi.client.post("/authentication/teams", json={"name": "Crew"}, headers=bob.headers).get_json()["_id"]
    crews = dbapi.client.post(f"/database/Project?scope=Team:{team}", json={"name": "crew's"}, headers=bob.headers)
    url = f"/database/Task?scope=Team:{team}"
    hidden = dbapi.client.post(url, json={"project": projects["own"]}, headers=bob.headers)
    missing = dbapi.client.post(url, json={"project": MISSING_ID}, headers=bob.headers)
    _same_as_missing(hidden, missing, projects["own"])
    assert dbapi.client.post(url, json={"project": crews.get_json()["_id"]}, headers=bob.headers).status_code == 201


def test_relations_to_users_name_any_user_as_before(dbapi, make_user):
    """A field-backed relation names people: any existing user id is accepted, an unknown one is a 400."""
    dbapi.create_schema(
        "Ticket",
        {"title": "String", "assignee": {"type": "Relation", "model": "User"}},
        modelOptions={"conduit": {"authorization": {"enabled": True, "fields": {"assignee": "editor"}}}},
    )
    alice, bob = make_user(), make_user()
    dbapi.post("Ticket", {"title": "for bob", "assignee": bob.id}, headers=alice.headers)
    assert (
        dbapi.client.post("/database/Ticket", json={"assignee": MISSING_ID}, headers=alice.headers).status_code == 400
    )
    assert dbapi.list("Ticket", headers=bob.headers)["count"] == 1


def test_a_relation_to_team_names_only_a_team_of_ones_own(dbapi, make_user, admin_headers):
    """A stranger's team is the 400 of an unknown one: a write neither confirms it exists nor hands it the
    relation a field-backed ``Team`` field holds. Members of a sub-team name the teams above it; an update
    may keep the team the document holds; administrators name any team."""
    settings = {"teams": {"enabled": True, "allowAddWithoutInvite": True}}
    assert dbapi.client.put("/config/authentication", json=settings, headers=admin_headers).status_code == 200
    options = {"conduit": {"authorization": {"enabled": True, "fields": {"team": "owner"}}}}
    dbapi.create_schema(
        "Board", {"title": "String", "team": {"type": "Relation", "model": "Team"}}, modelOptions=options
    )
    alice, bob = make_user(), make_user()

    def team(owner, name: str, parent: str | None = None) -> str:
        body = {"name": name, **({"parentTeam": parent} if parent else {})}
        response = dbapi.client.post("/authentication/teams", json=body, headers=owner.headers)
        assert response.status_code == 201, response.get_json()
        return response.get_json()["_id"]

    alices, bobs = team(alice, "Alice's"), team(bob, "Bob's")
    sub = team(bob, "Bob's sub", parent=bobs)
    stranger = dbapi.client.post("/database/Board", json={"team": alices}, headers=bob.headers)
    unknown = dbapi.client.post("/database/Board", json={"team": MISSING_ID}, headers=bob.headers)
    _same_as_missing(stranger, unknown, alices)
    assert dbapi.list("Board", headers=alice.headers)["count"] == 0  # nothing made alice's team an owner
    dbapi.post("Board", {"team": bobs}, headers=bob.headers)
    dbapi.post("Board", {"team": sub}, headers=bob.headers)
    board = dbapi.post("Board", {"title": "b", "team": alices})  # the master key
    # alice's team owns the board; bob edits it once shared, keeping the team it names
    _share(dbapi, alice, "Board", board["_id"], f"User:{bob.id}", "editor")
    url = f"/database/Board/{board['_id']}"
    kept = dbapi.client.put(url, json={"title": "bob's", "team": alices}, headers=bob.headers)
    assert kept.status_code == 200, kept.get_json()


# ---- opting in closes anonymous creates ---------------------------------------------------------------


def _crud(schema: dict[str, Any]) -> dict[str, Any]:
    return schema["modelOptions"]["conduit"]["cms"]["crudOperations"]


def _anonymous_creates(dbapi, name: str) -> list[int]:
    """The statuses of an anonymous create over REST, ``/many`` and GraphQL."""
    rest = dbapi.client.post(f"/database/{name}", json={"text": "anon"}).status_code
    many = dbapi.client.post(f"/database/{name}/many", json={"docs": [{"text": "anon"}]}).status_code
    body = dbapi.graphql(f'mutation {{ create{name}(data: {{text: "anon"}}) {{ _id }} }}', headers={})
    graphql = body["errors"][0]["extensions"]["status"] if "errors" in body else 201
    return [rest, many, graphql]


def test_opting_in_on_create_makes_anonymous_creates_a_401(dbapi, user):
    schema = dbapi.create_schema("Note", {"text": "String"}, modelOptions=ACCESS)
    assert _crud(schema)["create"] == {"enabled": True, "authenticated": True}
    assert _crud(schema)["read"] == {"enabled": True, "authenticated": False}  # the rest as they were
    assert _anonymous_creates(dbapi, "Note") == [401, 401, 401]
    assert dbapi.list("Note")["count"] == 0
    dbapi.post("Note", {"text": "signed in"}, headers=user.headers)


def test_opting_in_by_put_makes_anonymous_creates_a_401(dbapi):
    schema = dbapi.create_schema("Note", {"text": "String"})
    assert _anonymous_creates(dbapi, "Note") == [201, 201, 201]  # no access control: open as before
    changed = dbapi.update_schema(schema["_id"], modelOptions=ACCESS)
    assert _crud(changed)["create"]["authenticated"] is True
    assert _anonymous_creates(dbapi, "Note") == [401, 401, 401]
    # a later change that does not touch access control leaves the switch alone
    again = dbapi.update_schema(schema["_id"], fields={"text": "String", "n": "Number"})
    assert _crud(again)["create"]["authenticated"] is True


def test_anonymous_creates_stay_open_only_when_said_explicitly(dbapi, make_user):
    explicit = {
        "conduit": {
            "authorization": {"enabled": True},
            "cms": {"crudOperations": {"create": {"enabled": True, "authenticated": False}}},
        }
    }
    dbapi.create_schema("Guestbook", {"text": "String"}, modelOptions=explicit)
    assert _anonymous_creates(dbapi, "Guestbook") == [201, 201, 201]
    # nobody owns them: only grants to * (or an administrator) read them
    relations = dbapi.client.get("/admin/authorization/relations?resourceType=Guestbook", headers=dbapi.admin)
    assert relations.get_json()["count"] == 0
    assert dbapi.list("Guestbook", headers=make_user().headers)["count"] == 0
    assert dbapi.list("Guestbook", headers={})["count"] == 0
    assert dbapi.list("Guestbook")["count"] == 3

    # on a schema already opted in, the admin may open them later, explicitly
    schema = dbapi.create_schema("Note", {"text": "String"}, modelOptions=ACCESS)
    opened = {"conduit": {"cms": {"crudOperations": {"create": {"enabled": True, "authenticated": False}}}}}
    assert _crud(dbapi.update_schema(schema["_id"], modelOptions=opened))["create"]["authenticated"] is False
    assert _anonymous_creates(dbapi, "Note") == [201, 201, 201]
    # the conduitOptions spelling is as explicit
    dbapi.create_schema(
        "Wall",
        {"text": "String"},
        conduitOptions={
            "authorization": {"enabled": True},
            "cms": {"crudOperations": {"create": {"authenticated": False}}},
        },
    )
    assert _anonymous_creates(dbapi, "Wall") == [201, 201, 201]


def test_custom_endpoint_creates_follow_the_schema_switch(dbapi, user):
    schema = dbapi.create_schema("Note", {"text": "String"}, modelOptions=ACCESS)
    endpoint = {
        "name": "newNote",
        "operation": "POST",
        "selectedSchema": "Note",
        "authentication": False,
        "inputs": [{"name": "text", "type": "String", "location": "body"}],
        "assignments": [
            {"schemaField": "text", "action": "set", "assignmentField": {"type": "Input", "value": "text"}}
        ],
    }
    assert dbapi.client.post("/admin/database/customEndpoints", json=endpoint, headers=dbapi.admin).status_code == 201
    refused = dbapi.client.post("/database/function/newNote", json={"text": "anon"})
    assert refused.status_code == 401 and refused.get_json()["name"] == "UNAUTHORIZED"
    assert dbapi.list("Note")["count"] == 0
    assert dbapi.client.post("/database/function/newNote", json={"text": "x"}, headers=user.headers).status_code == 201
    opened = {"conduit": {"cms": {"crudOperations": {"create": {"authenticated": False}}}}}
    dbapi.update_schema(schema["_id"], modelOptions=opened)
    assert dbapi.client.post("/database/function/newNote", json={"text": "anon"}).status_code == 201


def test_anonymous_updates_and_deletes_follow_the_grants_to_anyone(dbapi, make_user):
    """Anonymous callers hold what ``*`` is granted: an update needs ``editor`` for ``*``, a delete is an
    owner's (never ``*``), and a document not shared with ``*`` is the 404 of a missing one."""
    dbapi.create_schema("Note", {"text": "String"}, modelOptions=ACCESS)
    alice = make_user()
    docs = [dbapi.post("Note", {"text": str(n)}, headers=alice.headers)["_id"] for n in range(3)]
    _share(dbapi, alice, "Note", docs[1], "*", "reader")
    _share(dbapi, alice, "Note", docs[2], "*", "editor")
    statuses = [
        (
            dbapi.client.patch(f"/database/Note/{doc_id}", json={"text": "anon"}).status_code,
            dbapi.client.delete(f"/database/Note/{doc_id}").status_code,
        )
        for doc_id in [*docs, MISSING_ID]
    ]
    assert statuses == [(404, 404), (403, 403), (200, 403), (404, 404)]


# ---- a unique value taken by a hidden document --------------------------------------------------------


def test_a_unique_value_taken_by_a_hidden_document_says_only_that_it_is_taken(dbapi, make_user):
    dbapi.create_schema(
        "Account", {"handle": {"type": "String", "unique": True}, "secret": "String"}, modelOptions=ACCESS
    )
    alice, bob = make_user(), make_user()
    hidden = dbapi.post("Account", {"handle": "ann", "secret": "PIN 4711"}, headers=alice.headers)
    mine = dbapi.post("Account", {"handle": "bob"}, headers=bob.headers)
    answers = [
        dbapi.client.post("/database/Account", json={"handle": "ann"}, headers=bob.headers),
        dbapi.client.post("/database/Account/many", json={"docs": [{"handle": "ann"}]}, headers=bob.headers),
        dbapi.client.patch(f"/database/Account/{mine['_id']}", json={"handle": "ann"}, headers=bob.headers),
        dbapi.client.put(f"/database/Account/{mine['_id']}", json={"handle": "ann"}, headers=bob.headers),
    ]
    for response in answers:
        assert response.status_code == 409, response.get_json()
        body = response.get_json()
        assert body["errors"] == {"handle": ["Already taken"]}, body
        assert hidden["_id"] not in response.text and "PIN" not in response.text and alice.id not in response.text
    graphql = dbapi.graphql('mutation { createAccount(data: {handle: "ann"}) { _id } }', headers=bob.headers)
    assert graphql["errors"][0]["extensions"]["status"] == 409
    assert hidden["_id"] not in str(graphql) and "PIN" not in str(graphql)
    assert dbapi.list("Account")["count"] == 2
