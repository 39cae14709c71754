"""Every grant, revoke and definition change is in the audit log: administrators' through this module's
routes, and users' sharing through the Database module's grants routes (actor ``{type: user, id}``).
Consequences of other changes (the owner tuple of a new document) and refused requests record nothing."""

from __future__ import annotations

from typing import Any


def _entries(access, **query: Any) -> list[dict[str, Any]]:
    return access.call("GET", "/admin/audit", query_string={"module": "authorization", "limit": 100, **query})[
        "entries"
    ]


def test_admin_grants_revokes_and_definitions_are_audited(access, make_user):
    access.opted_in("Note", {"text": "String"})
    alice, bob = make_user(), make_user()
    ids = [access.post("Note", {"text": str(i)}, headers=alice.headers)["_id"] for i in range(2)]
    assert _entries(access) == []  # creating documents grants owner, which is not a grant of anyone's
    made = access.grant(f"User:{bob.id}", "reader", f"Note:{ids[0]}")
    body = {"subject": "User:*", "relation": "reader", "resources": [f"Note:{i}" for i in ids]}
    access.call("POST", "/admin/authorization/relations/many", expect=201, json=body)
    access.call("DELETE", f"/admin/authorization/relations/{made['_id']}")
    permissions = {"read": ["reader", "owner"], "edit": ["owner"], "delete": ["owner"], "share": ["owner"]}
    access.call("PATCH", "/admin/authorization/resources/Note", json={"permissions": permissions})

    found = _entries(access)
    assert [(e["action"], e["target"]) for e in reversed(found)] == [
        ("relation.grant", f"Note:{ids[0]}"),
        ("relation.grant", "Note"),
        ("relation.revoke", f"Note:{ids[0]}"),
        ("resource.update", "Note"),
    ]
    grant, many, revoke, definition = reversed(found)
    assert grant["changes"] == {"subject": f"User:{bob.id}", "relation": "reader", "resource": f"Note:{ids[0]}"}
    assert many["changes"]["resources"] == [f"Note:{i}" for i in ids]
    assert revoke["changes"]["subject"] == f"User:{bob.id}"
    assert definition["changes"] == {"permissions": permissions}
    assert all(e["actor"] == {"type": "masterkey"} for e in found)


def test_users_sharing_is_audited_with_the_user_as_actor(access, make_user):
    access.opted_in("Note", {"text": "String"})
    alice, bob = make_user(), make_user()
    note = access.post("Note", {"text": "x"}, headers=alice.headers)["_id"]
    access.share(alice, f"Note:{note}", f"User:{bob.id}", "editor")
    access.call("DELETE", f"/database/Note/{note}/grants?subject=User:{bob.id}&relation=editor", alice)
    found = _entries(access, target=f"Note:{note}")
    assert [e["action"] for e in found] == ["relation.revoke", "relation.grant"]
    assert all(e["actor"] == {"type": "user", "id": alice.id} for e in found)
    assert found[1]["changes"] == {"subject": f"User:{bob.id}", "relation": "editor", "resource": f"Note:{note}"}
    # the audit log's actor filter finds a user's changes by id, and by the type "user"
    assert len(_entries(access, actor=alice.id)) == 2 and len(_entries(access, actor="user")) == 2


def test_refused_changes_record_nothing(access, make_user):
    access.opted_in("Note", {"text": "String"})
    alice, bob = make_user(), make_user()
    note = access.post("Note", {"text": "x"}, headers=alice.headers)["_id"]
    access.share(bob, f"Note:{note}", f"User:{bob.id}", "reader", expect=404)  # bob cannot read it
    access.share(alice, f"Note:{note}", "User:nobody", "reader", expect=400)
    access.share(alice, f"Note:{note}", f"User:{alice.id}", "owner", expect=409)
    access.grant(f"User:{bob.id}", "nothing", f"Note:{note}", expect=400)
    access.call("PATCH", "/admin/authorization/resources/Note", expect=400, json={"relations": {}})
    assert _entries(access) == []
