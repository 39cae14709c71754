"""Teams: creating, sub-teams, renaming and moving, deleting, members and roles, and who may do what
(README, "Teams")."""

from __future__ import annotations

from sqlalchemy import func, select

from trellis import db as trellis_db
from trellis_authentication.team_models import Team, TeamMember
from trellis_authentication.teams import MAX_DEPTH

from .team_calls import Teams, teams  # noqa: F401  (the fixture)


def test_switched_off_every_team_route_answers_403_naming_the_key(client, admin_headers, make_user):
    caller = make_user()
    off = Teams(client, admin_headers)
    for method, path in (
        ("POST", ""),
        ("GET", ""),
        ("GET", "/invites"),
        ("GET", "/invite/accept?invitationToken=x"),
        ("GET", "/abc"),
        ("PATCH", "/abc"),
        ("DELETE", "/abc"),
        ("GET", "/abc/teams"),
        ("GET", "/abc/members"),
        ("PATCH", "/abc/members"),
        ("DELETE", "/abc/members?members=x"),
        ("POST", "/abc/invite"),
        ("DELETE", "/abc/invite?email=a@b.co"),
        ("POST", "/abc/add"),
    ):
        body = {"name": "A"} if method == "POST" and path == "" else None
        if path.endswith("/members") and method == "PATCH":
            body = {"members": ["x"], "role": "member"}
        elif path.endswith("/invite") and method == "POST":
            body = {"email": "a@b.co", "role": "member"}
        elif path.endswith("/add"):
            body = {"userId": "x"}
        elif method == "PATCH":
            body = {"name": "B"}
        answer = off.call(method, path, caller, json=body)
        assert answer.status_code == 403, (method, path, answer.get_json())
        assert "teams.enabled" in answer.get_json()["message"], (method, path)
    assert trellis_db.session.execute(select(func.count()).select_from(Team)).scalar_one() == 0


def test_user_bearer_required_admins_are_not_users(teams, admin_headers):
    assert teams.call("GET", "", None).status_code == 401
    answer = teams.client.post("/authentication/teams", json={"name": "A"}, headers=admin_headers)
    assert answer.status_code == 403 and answer.get_json()["name"] == "FORBIDDEN"


def test_create_wins_over_the_provider_sign_in_route(teams):
    owner = teams.user()
    team = teams.create(owner, "Platform")
    assert set(team) == {"_id", "name", "parentTeam", "createdAt", "updatedAt"}
    assert team["name"] == "Platform" and team["parentTeam"] is None and len(team["_id"]) == 32
    assert teams.members(owner, team["_id"]) == {owner.id: "owner"}
    assert teams.call("GET", f"/{team['_id']}", owner).get_json() == team


def test_names_are_unique_per_parent_roots_per_creator(teams):
    owner, other = teams.user(), teams.user()
    root = teams.create(owner, "Sales")
    assert teams.call("POST", "", owner, json={"name": "Sales"}).status_code == 409  # the creator's roots
    # A stranger's root of the same name is no conflict: a 409 would tell that the other team exists.
    theirs = teams.create(other, "Sales")
    assert theirs["_id"] != root["_id"] and theirs["name"] == "Sales"
    teams.create(owner, "EMEA", root["_id"])
    answer = teams.call("POST", "", owner, json={"name": "EMEA", "parentTeam": root["_id"]})
    assert answer.status_code == 409 and answer.get_json()["name"] == "CONFLICT"
    teams.create(owner, "EMEA")  # the same name as a root: another parent
    second = teams.create(owner, "Support")
    teams.create(owner, "EMEA", second["_id"])
    rename = teams.call("PATCH", f"/{second['_id']}", owner, json={"name": "Sales"})
    assert rename.status_code == 409
    assert teams.call("GET", f"/{second['_id']}", owner).get_json()["name"] == "Support"


def test_bad_bodies_are_400(teams):
    owner = teams.user()
    team = teams.create(owner, "T")
    for body in ({}, {"name": ""}, {"name": "x" * 101}, {"name": "A", "extra": 1}, {"name": 5}):
        assert teams.call("POST", "", owner, json=body).status_code == 400, body
    for body in ({}, {"name": "A", "owner": "x"}, {"parentTeam": 3}):
        assert teams.call("PATCH", f"/{team['_id']}", owner, json=body).status_code == 400, body
    assert teams.call("GET", "?limit=1001", owner).status_code == 400


def test_list_search_and_sub_teams(teams):
    owner, stranger = teams.user(), teams.user()
    alpha = teams.create(owner, "Alpha")
    teams.create(owner, "Beta")
    child = teams.create(owner, "alpha-child", alpha["_id"])
    mine = teams.call("GET", "", owner).get_json()
    assert mine["count"] == 3 and [t["name"] for t in mine["teams"]] == ["Alpha", "Beta", "alpha-child"]
    found = teams.call("GET", "?search=ALPHA&limit=1", owner).get_json()
    assert found["count"] == 2 and len(found["teams"]) == 1
    assert teams.call("GET", "", stranger).get_json() == {"teams": [], "count": 0}
    subs = teams.call("GET", f"/{alpha['_id']}/teams", owner).get_json()
    assert subs == {"teams": [child], "count": 1}


def test_authority_member_owner_ancestor_owner_and_stranger(teams):
    owner, member, top_owner, top_member, stranger, newcomer = (teams.user() for _ in range(6))
    top = teams.create(top_owner, "Top")
    teams.add(top_owner, top["_id"], top_member)
    mid = teams.create(top_owner, "Mid", top["_id"])
    teams.add(top_owner, mid["_id"], owner, "owner")
    leaf = teams.create(owner, "Leaf", mid["_id"])
    teams.add(owner, leaf["_id"], member)
    leaf_id = leaf["_id"]

    # Viewing: members of the team or of a team above it.
    for viewer in (owner, member, top_owner, top_member):
        assert teams.call("GET", f"/{leaf_id}", viewer).status_code == 200
        assert teams.call("GET", f"/{leaf_id}/members", viewer).status_code == 200
        assert teams.call("GET", f"/{leaf_id}/teams", viewer).status_code == 200
    # A stranger gets the very answer of a team that does not exist.
    hidden = teams.call("GET", f"/{leaf_id}", stranger)
    missing = teams.call("GET", f"/{'0' * 32}", stranger)
    assert hidden.status_code == missing.status_code == 404
    assert {**hidden.get_json(), "requestId": None} == {**missing.get_json(), "requestId": None}
    for method, path in (("GET", "/members"), ("GET", "/teams"), ("DELETE", ""), ("PATCH", "/members")):
        body = {"members": [member.id], "role": "owner"} if method == "PATCH" else None
        assert teams.call(method, f"/{leaf_id}{path}", stranger, json=body).status_code == 404, path

    # Managing: owners of the team or of a team above it; members get 403.
    for manager in (owner, top_owner):
        assert teams.call("PATCH", f"/{leaf_id}", manager, json={"name": f"Leaf {manager.id[:4]}"}).status_code == 200
    for plain in (member, top_member):
        assert teams.call("PATCH", f"/{leaf_id}", plain, json={"name": "Nope"}).status_code == 403
        assert teams.call("POST", "", plain, json={"name": "Sub", "parentTeam": leaf_id}).status_code == 403
        answer = teams.call("POST", f"/{leaf_id}/add", plain, json={"userId": newcomer.id})
        assert answer.status_code == 403
        answer = teams.call("PATCH", f"/{leaf_id}/members", plain, json={"members": [plain.id], "role": "owner"})
        assert answer.status_code == 403  # nobody grants a role above their own
        assert teams.call("DELETE", f"/{leaf_id}", plain).status_code == 403
    assert teams.call("POST", "", stranger, json={"name": "Sub", "parentTeam": leaf_id}).status_code == 404
    teams.add(top_owner, leaf_id, newcomer, "owner")  # an ancestor's owner grants owner
    assert teams.members(owner, leaf_id) == {owner.id: "owner", member.id: "member", newcomer.id: "owner"}


def test_member_roles_and_the_last_owner(teams):
    owner, member, other = teams.user(), teams.user(), teams.user()
    team_id = teams.create(owner, "Crew")["_id"]
    teams.add(owner, team_id, member)
    step_down = teams.call("PATCH", f"/{team_id}/members", owner, json={"members": [owner.id], "role": "member"})
    assert step_down.status_code == 409
    leave = teams.call("DELETE", f"/{team_id}/members?members={owner.id}", owner)
    assert leave.status_code == 409
    promoted = teams.call("PATCH", f"/{team_id}/members", owner, json={"members": [member.id], "role": "owner"})
    assert promoted.status_code == 200
    assert promoted.get_json() == {"members": [{"_id": member.id, "email": member.email, "role": "owner"}], "count": 1}
    not_member = teams.call("PATCH", f"/{team_id}/members", owner, json={"members": [other.id], "role": "owner"})
    assert not_member.status_code == 400
    assert (
        teams.call("PATCH", f"/{team_id}/members", owner, json={"members": [owner.id], "role": "x"}).status_code == 400
    )
    # Now there are two owners: one may step down, then the other is the last again.
    assert (
        teams.call("PATCH", f"/{team_id}/members", member, json={"members": [owner.id], "role": "member"}).status_code
        == 200
    )
    assert teams.call("DELETE", f"/{team_id}/members?members={member.id}", member).status_code == 409
    assert teams.members(member, team_id) == {owner.id: "member", member.id: "owner"}


def test_leaving_and_removing_members(teams):
    owner, first, second = teams.user(), teams.user(), teams.user()
    team_id = teams.create(owner, "Crew")["_id"]
    teams.add(owner, team_id, first)
    teams.add(owner, team_id, second)
    assert teams.call("DELETE", f"/{team_id}/members?members={second.id}", first).status_code == 403  # not yours
    left = teams.call("DELETE", f"/{team_id}/members?members={first.id}", first)
    assert left.status_code == 200 and left.get_json() == {"removed": [first.id], "count": 1}
    assert teams.call("GET", f"/{team_id}", first).status_code == 404  # gone at once
    assert teams.call("DELETE", f"/{team_id}/members?members={first.id}", owner).status_code == 400  # not a member
    assert teams.call("DELETE", f"/{team_id}/members?members=", owner).status_code == 400
    removed = teams.call("DELETE", f"/{team_id}/members?members={second.id}", owner)
    assert removed.status_code == 200
    assert teams.members(owner, team_id) == {owner.id: "owner"}


def test_add_needs_the_switch_a_user_and_no_membership(teams):
    owner, user = teams.user(), teams.user()
    team_id = teams.create(owner, "Crew")["_id"]
    teams.add(owner, team_id, user, status=201)
    assert teams.call("POST", f"/{team_id}/add", owner, json={"userId": user.id}).status_code == 409
    assert teams.call("POST", f"/{team_id}/add", owner, json={"userId": "0" * 32}).status_code == 404
    teams.configure(enabled=True, allowAddWithoutInvite=False)
    answer = teams.call("POST", f"/{team_id}/add", owner, json={"userId": teams.user().id})
    assert answer.status_code == 403 and "allowAddWithoutInvite" in answer.get_json()["message"]


def test_moves_need_owner_on_both_sides_and_refuse_cycles(teams):
    owner, other = teams.user(), teams.user()
    a = teams.create(owner, "A")["_id"]
    b = teams.create(owner, "B", a)["_id"]
    c = teams.create(owner, "C", b)["_id"]
    foreign = teams.create(other, "Foreign")["_id"]
    for target in (a, b, c):
        answer = teams.call("PATCH", f"/{a}", owner, json={"parentTeam": target})
        assert answer.status_code == 400 and "parentTeam" in answer.get_json()["errors"], target
    assert trellis_db.session.get(Team, a).parent_id is None  # nothing written
    assert teams.call("PATCH", f"/{c}", owner, json={"parentTeam": foreign}).status_code == 404  # not visible
    teams.add(other, foreign, owner)  # a member of the target, not its owner
    assert teams.call("PATCH", f"/{c}", owner, json={"parentTeam": foreign}).status_code == 403
    # The owner of a sub-team alone may not carry it off from a parent it does not own.
    teams.add(owner, c, other, "owner")
    assert teams.call("PATCH", f"/{c}", other, json={"parentTeam": None}).status_code == 403
    moved = teams.call("PATCH", f"/{c}", owner, json={"parentTeam": None})
    assert moved.status_code == 200 and moved.get_json()["parentTeam"] is None
    moved = teams.call("PATCH", f"/{b}", owner, json={"parentTeam": c, "name": "B2"})
    assert moved.status_code == 200 and moved.get_json() | {"updatedAt": None} == {
        "_id": b,
        "name": "B2",
        "parentTeam": c,
        "createdAt": moved.get_json()["createdAt"],
        "updatedAt": None,
    }


def test_nesting_is_limited(teams):
    owner = teams.user()
    parent = None
    chain = []
    for level in range(MAX_DEPTH):
        parent = teams.create(owner, f"L{level}", parent)["_id"]
        chain.append(parent)
    too_deep = teams.call("POST", "", owner, json={"name": "deeper", "parentTeam": parent})
    assert too_deep.status_code == 400 and "parentTeam" in too_deep.get_json()["errors"]
    # A move that would make the tree deeper than the limit is refused too.
    other_root = teams.create(owner, "Other")["_id"]
    teams.create(owner, "Child", other_root)
    assert teams.call("PATCH", f"/{other_root}", owner, json={"parentTeam": chain[-2]}).status_code == 400
    assert teams.call("PATCH", f"/{other_root}", owner, json={"parentTeam": chain[-3]}).status_code == 200


def test_deleting_a_team_deletes_its_sub_teams_and_members(teams):
    owner, member = teams.user(), teams.user()
    top = teams.create(owner, "Top")["_id"]
    keep = teams.create(owner, "Keep")["_id"]
    mid = teams.create(owner, "Mid", top)["_id"]
    leaf = teams.create(owner, "Leaf", mid)["_id"]
    teams.add(owner, leaf, member)
    teams.add(owner, keep, member)
    assert teams.call("DELETE", f"/{mid}", member).status_code == 404  # member of Leaf only: cannot see Mid
    answer = teams.call("DELETE", f"/{top}", owner)
    assert answer.status_code == 200 and answer.get_json() == {"_id": top, "deleted": True}
    session = trellis_db.session
    assert session.execute(select(Team.id).where(Team.id.in_([top, mid, leaf]))).all() == []
    assert session.execute(select(TeamMember.team_id).where(TeamMember.team_id.in_([top, mid, leaf]))).all() == []
    assert teams.call("GET", f"/{leaf}", member).status_code == 404
    assert [t["_id"] for t in teams.call("GET", "", member).get_json()["teams"]] == [keep]
