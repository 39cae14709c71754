"""`can` (the SQL decision every request gets), `evaluate` (the same rules walked in Python, naming the
chains that grant) and a user's own `check` agree over a matrix of cases: a direct tuple, a team, a member
of a sub-team, wildcards, a field-backed relation, inheritance through a Relation field, and denials."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture()
def world(access, make_user) -> dict[str, Any]:
    access.enable_teams()
    access.projects_and_tasks()
    people = {name: make_user() for name in ("alice", "bob", "tina", "sam", "walt", "ava", "pete", "dan")}
    alice = people["alice"]
    readers = access.team(alice, "Readers")
    access.join(alice, readers, people["tina"])
    parent = access.team(alice, "Parent")
    child = access.team(alice, "Child", parent=parent)
    access.join(alice, child, people["sam"])
    project = access.post("Project", {"name": "P"}, headers=alice.headers)["_id"]
    task = access.post("Task", {"title": "t1", "project": project, "assignee": people["ava"].id}, headers=alice.headers)
    other = access.post("Task", {"title": "t2"}, headers=alice.headers)["_id"]
    t1 = f"Task:{task['_id']}"
    access.grant(f"User:{people['bob'].id}", "reader", t1)
    access.grant(f"Team:{readers}", "reader", t1)
    access.grant(f"Team:{parent}", "editor", t1)
    access.grant("User:*", "reader", f"Task:{other}")
    access.grant(f"User:{people['pete'].id}", "reader", f"Project:{project}")
    return {"people": people, "t1": t1, "t2": f"Task:{other}", "readers": readers, "parent": parent, "project": project}


def _cases(world: dict[str, Any]) -> list[tuple[str, str, str, bool, str | None]]:
    """(subject, action, resource, allowed, a step the first path must hold)."""
    p = {name: f"User:{user.id}" for name, user in world["people"].items()}
    t1, t2 = world["t1"], world["t2"]
    return [
        (p["alice"], "delete", t1, True, f"{p['alice']} owner {t1}"),
        (p["bob"], "read", t1, True, f"{p['bob']} reader {t1}"),  # direct tuple
        (p["bob"], "edit", t1, False, None),
        (p["tina"], "read", t1, True, f"{p['tina']} is a member of Team:{world['readers']}"),  # team
        (f"Team:{world['readers']}", "read", t1, True, f"Team:{world['readers']} reader {t1}"),
        (p["sam"], "edit", t1, True, f"Team:{world['parent']} editor {t1}"),  # member of a sub-team
        (p["sam"], "delete", t1, False, None),
        (p["walt"], "read", t2, True, f"{p['walt']} is one of User:*"),  # wildcard
        ("User:*", "read", t2, True, f"User:* reader {t2}"),
        ("*", "read", t2, False, None),  # User:* is signed-in users, not anyone
        (p["walt"], "read", t1, False, None),
        (p["ava"], "edit", t1, True, "assignee holds editor"),  # field-backed
        (p["ava"], "delete", t1, False, None),
        (p["pete"], "read", t1, True, "project->read grants read"),  # inherited
        (p["pete"], "edit", t1, False, None),
        (p["pete"], "read", t2, True, f"{p['pete']} is one of User:*"),  # every signed-in user
        (p["dan"], "read", t1, False, None),  # denied
        (p["dan"], "read", "Task:0123456789abcdef0123456789abcdef", False, None),
    ]


def test_can_evaluate_and_check_agree(access, world):
    by_subject = {f"User:{user.id}": user for user in world["people"].values()}
    for subject, action, resource, expected, step in _cases(world):
        case = (subject, action, resource)
        assert access.can(subject, action, resource) is expected, case
        evaluated = access.evaluate(subject, action, resource)
        assert evaluated["allowed"] is expected and bool(evaluated["paths"]) is expected, (case, evaluated)
        if step is not None:
            assert any(step in " → ".join(path) for path in evaluated["paths"]), (case, evaluated)
            assert all(path[-1].endswith(f"grants {action}") for path in evaluated["paths"]), evaluated
        if subject in by_subject:
            assert access.check(by_subject[subject], action, resource) is expected, case


def test_every_path_is_listed(access, world):
    """A user holding a permission two ways gets both chains."""
    bob = world["people"]["bob"]
    access.grant(f"User:{bob.id}", "reader", f"Project:{world['project']}")
    paths = access.evaluate(f"User:{bob.id}", "read", world["t1"])["paths"]
    assert len(paths) == 2
    assert paths[0] == [f"User:{bob.id} reader {world['t1']}", "reader grants read"]
    assert paths[1][-1] == "project->read grants read"


def test_a_revoke_and_a_team_removal_change_all_three(access, world):
    tina, alice = world["people"]["tina"], world["people"]["alice"]
    access.call("DELETE", f"/authentication/teams/{world['readers']}/members?members={tina.id}", alice)
    assert access.can(f"User:{tina.id}", "read", world["t1"]) is False
    assert access.evaluate(f"User:{tina.id}", "read", world["t1"]) == {"allowed": False, "paths": []}
    assert access.check(tina, "read", world["t1"]) is False
