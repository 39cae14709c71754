"""A user's own checks: GET /authorization/check and GET /authorization/role/{resource} (``docs/access.md``,
"Routes of the Authorization module"): decisions as requests get them, the same answer for a document the
caller cannot reach as for one that does not exist, scope as a team the caller must belong to."""

from __future__ import annotations

import pytest

MISSING = "0123456789abcdef0123456789abcdef"


@pytest.fixture()
def notes(access):
    return access.opted_in("Note", {"text": "String"})


def test_check_follows_owner_reader_and_revoke(access, notes, make_user):
    alice, bob = make_user(), make_user()
    note = f"Note:{access.post('Note', {'text': 'x'}, headers=alice.headers)['_id']}"
    assert [access.check(alice, action, note) for action in ("read", "edit", "delete", "share")] == [True] * 4
    assert [access.check(bob, action, note) for action in ("read", "edit")] == [False, False]
    access.share(alice, note, f"User:{bob.id}", "reader")
    assert [access.check(bob, action, note) for action in ("read", "edit", "share")] == [True, False, False]
    assert access.call("GET", f"/authorization/role/{note}", bob) == {"roles": ["reader"]}
    assert access.call("GET", f"/authorization/role/{note}", alice) == {"roles": ["owner"]}
    doc_id = note.split(":")[1]
    access.call("DELETE", f"/database/Note/{doc_id}/grants?subject=User:{bob.id}&relation=reader", alice)
    assert access.check(bob, "read", note) is False
    assert access.call("GET", f"/authorization/role/{note}", bob) == {"roles": []}


def test_unreachable_and_missing_documents_answer_alike(access, notes, make_user):
    alice, bob = make_user(), make_user()
    note = f"Note:{access.post('Note', {'text': 'x'}, headers=alice.headers)['_id']}"
    for resource in (note, f"Note:{MISSING}"):
        assert access.check(bob, "read", resource) is False
        assert access.call("GET", f"/authorization/role/{resource}", bob) == {"roles": []}
    assert access.check(alice, "read", f"Note:{MISSING}") is False


def test_wildcards_and_field_backed_relations(access, make_user):
    access.opted_in(
        "Ticket", {"title": "String", "assignee": {"type": "Relation", "model": "User"}}, backed={"assignee": "editor"}
    )
    alice, bob, carol = make_user(), make_user(), make_user()
    ticket = f"Ticket:{access.post('Ticket', {'title': 't', 'assignee': bob.id}, headers=alice.headers)['_id']}"
    assert access.check(bob, "edit", ticket) is True
    assert access.call("GET", f"/authorization/role/{ticket}", bob) == {"roles": ["editor"]}
    assert access.check(carol, "read", ticket) is False
    access.share(alice, ticket, "User:*", "reader")
    assert access.check(carol, "read", ticket) is True and access.check(carol, "edit", ticket) is False


def test_scope_is_the_team_and_needs_membership(access, notes, make_user):
    access.enable_teams()
    alice, bob, carol = make_user(), make_user(), make_user()
    team = access.team(alice, "Writers")
    access.join(alice, team, bob)
    created = access.client.post(f"/database/Note?scope=Team:{team}", json={"text": "t"}, headers=alice.headers)
    assert created.status_code == 201, created.get_json()
    note = f"Note:{created.get_json()['_id']}"
    own = access.post("Note", {"text": "alice only"}, headers=alice.headers)
    # the team's own grants: what the team owns, not what alice owns herself
    assert access.check(bob, "delete", note, scope=f"Team:{team}") is True
    assert access.check(alice, "read", f"Note:{own['_id']}", scope=f"Team:{team}") is False
    assert access.check(alice, "read", f"Note:{own['_id']}") is True
    query = {"scope": f"Team:{team}"}
    assert access.call("GET", f"/authorization/role/{note}", bob, query_string=query) == {"roles": ["owner"]}
    for path, extra in (
        ("/authorization/check", {"action": "read", "resource": note}),
        (f"/authorization/role/{note}", {}),
    ):
        answer = access.call("GET", path, carol, 403, query_string={**query, **extra})
        assert "not a member" in answer["message"]
        access.call("GET", path, carol, 400, query_string={"scope": "User:x", **extra})


def test_bad_input_is_400_and_credentials_are_checked(access, notes, make_user):
    alice = make_user()
    note = f"Note:{access.post('Note', {'text': 'x'}, headers=alice.headers)['_id']}"
    access.create_schema("Open", {"text": "String"})  # not under access control
    cases = [
        {"action": "read", "resource": "Open:abc"},
        {"action": "read", "resource": "Nope:abc"},
        {"action": "read", "resource": "no-colon"},
        {"action": "read", "resource": "Note:"},
        {"action": "fly", "resource": note},
        {"resource": note},
    ]
    for query in cases:
        answer = access.call("GET", "/authorization/check", alice, 400, query_string=query)
        assert answer["message"], query
    access.call("GET", "/authorization/role/Open:abc", alice, 400)
    query = {"action": "read", "resource": note}
    assert access.client.get("/authorization/check", query_string=query).status_code == 401
    assert access.client.get("/authorization/check", query_string=query, headers=access.admin).status_code == 403
