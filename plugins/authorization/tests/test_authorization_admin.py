"""The administrators' routes (Conduit's paths): resource definitions, relation tuples, can."""

from __future__ import annotations

import pytest

MISSING = "0123456789abcdef0123456789abcdef"
DEFAULT = {
    "relations": {"owner": ["User", "Team"], "editor": ["User", "Team", "*"], "reader": ["User", "Team", "*"]},
    "permissions": {
        "read": ["reader", "editor", "owner"],
        "edit": ["editor", "owner"],
        "delete": ["owner"],
        "share": ["owner"],
    },
}


@pytest.fixture()
def notes(access):
    access.create_schema("Project", {"name": "String"})  # not under access control
    return access.opted_in("Note", {"text": "String", "project": {"type": "Relation", "model": "Project"}})


def test_resources_list_get_and_unknown(access, notes):
    access.opted_in("Memo", {"text": "String"})
    access.create_schema("Open", {"text": "String"})
    listed = access.call("GET", "/admin/authorization/resources")
    assert listed["count"] == 2 and [r["name"] for r in listed["resources"]] == ["Memo", "Note"]
    assert listed["resources"][1] == {"name": "Note", **DEFAULT}
    paged = access.call("GET", "/admin/authorization/resources?skip=1&limit=1&search=O")
    assert paged["count"] == 2 and [r["name"] for r in paged["resources"]] == ["Note"]
    assert access.call("GET", "/admin/authorization/resources?search=mem")["count"] == 1
    assert access.call("GET", "/admin/authorization/resources/Note") == {"name": "Note", **DEFAULT}
    for name in ("Open", "Project", "Nope"):
        access.call("GET", f"/admin/authorization/resources/{name}", expect=404)
        access.call("PATCH", f"/admin/authorization/resources/{name}", expect=404, json={"relations": {}})


def test_patch_replaces_the_keys_sent_and_is_in_force_at_once(access, notes, make_user):
    alice, bob = make_user(), make_user()
    note = access.post("Note", {"text": "x"}, headers=alice.headers)
    access.share(alice, f"Note:{note['_id']}", f"User:{bob.id}", "reader")
    assert access.list("Note", headers=bob.headers)["count"] == 1
    permissions = {**DEFAULT["permissions"], "read": ["editor", "owner"], "comment": ["reader", "owner"]}
    saved = access.call("PATCH", "/admin/authorization/resources/Note", json={"permissions": permissions})
    assert saved == {"name": "Note", "relations": DEFAULT["relations"], "permissions": permissions}
    assert access.call("GET", "/admin/authorization/resources/Note") == saved
    # readers no longer read: list, count and get follow at once; the new permission answers checks
    assert access.list("Note", headers=bob.headers)["count"] == 0
    assert access.client.get(f"/database/Note/{note['_id']}", headers=bob.headers).status_code == 404
    assert access.check(bob, "comment", f"Note:{note['_id']}") is True
    relations = {**DEFAULT["relations"], "reviewer": ["User"]}
    saved = access.call("PATCH", "/admin/authorization/resources/Note", json={"relations": relations})
    assert saved["relations"] == relations and saved["permissions"] == permissions
    # the new relation takes grants of the subject types it admits, and only those
    access.grant(f"User:{bob.id}", "reviewer", f"Note:{note['_id']}")
    answer = access.grant("User:*", "reviewer", f"Note:{note['_id']}", expect=400)
    assert "does not admit" in answer["message"]


@pytest.mark.parametrize(
    "body",
    [
        {"permissions": {**DEFAULT["permissions"], "read": ["reader", "nobody"]}},  # unknown relation
        {"permissions": {**DEFAULT["permissions"], "read": ["reader", "title->read"]}},  # not a Relation field
        {"permissions": {**DEFAULT["permissions"], "read": ["reader", "project->read"]}},  # Project not opted in
        {"permissions": {"read": ["reader"]}},  # edit, delete and share are asked for by the Database module
        {"relations": {"editor": ["User"], "reader": ["User"]}},  # owner must stay
        {"relations": {**DEFAULT["relations"], "owner": ["User"]}},  # owner admits teams (scope)
        {"relations": {**DEFAULT["relations"], "reader": ["Robot"]}},
        {"relations": {**DEFAULT["relations"], "Bad-Name": ["User"]}},
        {"permissions": {**DEFAULT["permissions"], "read": "reader"}},
        {},
    ],
)
def test_a_bad_definition_is_400_and_saves_nothing(access, notes, body):
    answer = access.call("PATCH", "/admin/authorization/resources/Note", expect=400, json=body)
    assert answer["message"]
    assert access.call("GET", "/admin/authorization/resources/Note") == {"name": "Note", **DEFAULT}


def test_relations_create_list_and_delete(access, notes, make_user):
    alice, bob = make_user(), make_user()
    first = access.post("Note", {"text": "1"}, headers=alice.headers)["_id"]
    second = access.post("Note", {"text": "2"}, headers=alice.headers)["_id"]
    created = access.grant(f"User:{bob.id}", "editor", f"Note:{first}")
    assert set(created) == {"_id", "subject", "relation", "resource", "createdAt"}
    assert (created["subject"], created["relation"], created["resource"]) == (
        f"User:{bob.id}",
        "editor",
        f"Note:{first}",
    )
    assert access.check(bob, "edit", f"Note:{first}") is True
    access.grant(f"User:{bob.id}", "editor", f"Note:{first}", expect=409)
    access.grant("User:*", "reader", f"Note:{second}")

    everything = access.call("GET", "/admin/authorization/relations")
    assert everything["count"] == 4  # two owners, two grants

    def filtered(**query):
        return access.call("GET", "/admin/authorization/relations", query_string=query)

    assert filtered(subject=f"User:{bob.id}")["count"] == 1
    assert filtered(relation="owner")["count"] == 2
    assert filtered(resource=f"Note:{second}")["count"] == 2
    assert filtered(subjectType="*")["relations"][0]["subject"] == "User:*"
    assert filtered(subjectType="User")["count"] == 3
    assert filtered(resourceType="Note", limit=1, skip=3)["relations"][0]["_id"] == everything["relations"][3]["_id"]
    assert filtered(resourceType="Other")["count"] == 0
    access.call("GET", "/admin/authorization/relations", expect=400, query_string={"subjectType": "Robot"})

    assert access.call("DELETE", f"/admin/authorization/relations/{created['_id']}") == {
        "_id": created["_id"],
        "deleted": True,
    }
    assert access.check(bob, "edit", f"Note:{first}") is False
    access.call("DELETE", f"/admin/authorization/relations/{created['_id']}", expect=404)


def test_bad_relations_are_400_and_write_nothing(access, notes, make_user):
    access.create_schema("Open", {"text": "String"})
    alice = make_user()
    note = f"Note:{access.post('Note', {'text': 'x'}, headers=alice.headers)['_id']}"
    for subject, relation, resource in (
        (f"User:{alice.id}", "admin", note),  # unknown relation
        ("Group:1", "reader", note),  # unknown subject type
        ("alice", "reader", note),
        ("*", "owner", note),  # owner does not admit wildcards
        (f"User:{MISSING}", "reader", note),  # nobody
        (f"Team:{MISSING}", "reader", note),
        (f"User:{alice.id}", "reader", "Open:abc"),  # not under access control
        (f"User:{alice.id}", "reader", "Nope:abc"),
        (f"User:{alice.id}", "reader", f"Note:{MISSING}"),  # no such document
    ):
        answer = access.grant(subject, relation, resource, expect=400)
        assert answer["message"], (subject, relation, resource)
    assert access.call("GET", "/admin/authorization/relations")["count"] == 1


def test_many_is_all_or_nothing(access, notes, make_user):
    alice, bob = make_user(), make_user()
    ids = [access.post("Note", {"text": str(i)}, headers=alice.headers)["_id"] for i in range(3)]
    resources = [f"Note:{doc_id}" for doc_id in ids]
    path = "/admin/authorization/relations/many"
    body = {"subject": f"User:{bob.id}", "relation": "reader"}
    for bad in ([*resources, f"Note:{MISSING}"], [*resources, resources[0]], [*resources, "Open:x"], []):
        access.call("POST", path, expect=400, json={**body, "resources": bad})
    assert access.list("Note", headers=bob.headers)["count"] == 0
    access.grant(f"User:{bob.id}", "reader", resources[2])
    access.call("POST", path, expect=409, json={**body, "resources": resources})
    assert access.list("Note", headers=bob.headers)["count"] == 1
    made = access.call("POST", path, expect=201, json={**body, "resources": resources[:2]})
    assert made["count"] == 2 and [r["resource"] for r in made["relations"]] == resources[:2]
    assert access.list("Note", headers=bob.headers)["count"] == 3


def test_can_needs_a_known_subject_and_resource(access, notes, make_user):
    alice = make_user()
    note = f"Note:{access.post('Note', {'text': 'x'}, headers=alice.headers)['_id']}"
    assert access.can(f"User:{alice.id}", "delete", note) is True
    assert access.can("*", "read", note) is False
    assert access.can(f"User:{alice.id}", "read", f"Note:{MISSING}") is False
    for query in (
        {"subject": f"User:{MISSING}", "action": "read", "resource": note},
        {"subject": "nobody", "action": "read", "resource": note},
        {"subject": f"User:{alice.id}", "action": "fly", "resource": note},
        {"subject": f"User:{alice.id}", "action": "read", "resource": "Nope:1"},
    ):
        for route in ("can", "evaluate"):
            access.call("GET", f"/admin/authorization/permissions/{route}", expect=400, query_string=query)
    user_call = access.client.get(
        "/admin/authorization/permissions/can",
        query_string={"subject": f"User:{alice.id}", "action": "read", "resource": note},
        headers=alice.headers,
    )
    assert user_call.status_code == 403
