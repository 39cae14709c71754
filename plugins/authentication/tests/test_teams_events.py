"""What other modules see of teams: the events (recorded in the change's transaction), the
``trellis_team_deleted`` hook, a deleted user's memberships, and the service functions."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from trellis import db as trellis_db
from trellis.errors import APIError
from trellis.events import recorded as recorded_events
from trellis.hooks import hookimpl
from trellis_authentication import service, team_memory
from trellis_authentication.team_models import Team, TeamMember

from .team_calls import teams  # noqa: F401  (the fixture)

EVENTS = recorded_events()  # numbered or still pending


@pytest.fixture()
def before(db) -> int:
    return db.execute(select(func.coalesce(func.max(EVENTS.c.id), 0))).scalar_one()


def recorded(before: int) -> list[tuple[str, dict]]:
    rows = trellis_db.session.execute(
        select(EVENTS.c.topic, EVENTS.c.payload)
        .where(EVENTS.c.topic.startswith("authentication.team."), EVENTS.c.id > before)
        .order_by(EVENTS.c.id)
    )
    return [(topic.removeprefix("authentication.team."), json.loads(payload)) for topic, payload in rows]


class TeamHookRecorder:
    def __init__(self) -> None:
        self.deleted: list[list[str]] = []
        self.refuse = False

    @hookimpl
    def trellis_team_deleted(self, team_ids: list[str]) -> None:
        self.deleted.append(list(team_ids))
        if self.refuse:
            raise APIError(409, "another module refuses")


@pytest.fixture()
def team_hooks(app):
    recorder = TeamHookRecorder()
    manager = app.extensions["trellis"].hooks
    manager.register(recorder, name=f"team-recorder-{id(recorder)}")
    try:
        yield recorder
    finally:
        manager.unregister(recorder)


def test_events_of_create_join_role_leave(teams, before):
    owner, member = teams.user(), teams.user()
    team = teams.create(owner, "Crew")
    teams.add(owner, team["_id"], member)
    teams.call("PATCH", f"/{team['_id']}/members", owner, json={"members": [member.id], "role": "owner"})
    teams.call("DELETE", f"/{team['_id']}/members?members={member.id}", member)
    teams.call("POST", "", owner, json={"name": "Crew"})  # 409: records nothing
    team_id = team["_id"]
    assert recorded(before) == [
        ("create", {"team": team}),
        ("join", {"teamId": team_id, "userId": owner.id, "role": "owner", "teams": {owner.id: [team_id]}}),
        ("join", {"teamId": team_id, "userId": member.id, "role": "member", "teams": {member.id: [team_id]}}),
        (
            "join",
            {
                "teamId": team_id,
                "userId": member.id,
                "role": "owner",
                "previousRole": "member",
                "teams": {member.id: [team_id]},
            },
        ),
        ("leave", {"teamId": team_id, "userId": member.id, "teams": {member.id: []}}),
    ]


def test_update_events_name_the_members_of_a_moved_subtree(teams, before):
    owner, a_member, b_member, c_member = (teams.user() for _ in range(4))
    a = teams.create(owner, "A")["_id"]
    b = teams.create(owner, "B")["_id"]
    c = teams.create(owner, "C", b)["_id"]
    teams.add(owner, a, a_member)
    teams.add(owner, b, b_member)
    teams.add(owner, c, c_member)
    start = trellis_db.session.execute(select(func.max(EVENTS.c.id))).scalar_one()
    renamed = teams.call("PATCH", f"/{b}", owner, json={"name": "B2"}).get_json()
    moved = teams.call("PATCH", f"/{b}", owner, json={"parentTeam": a}).get_json()
    assert teams.call("PATCH", f"/{a}", owner, json={"parentTeam": c}).status_code == 400  # cycle: no event
    events = recorded(start)
    assert [topic for topic, _ in events] == ["update", "update"]
    assert events[0][1]["team"] == renamed and events[0][1]["userIds"] == []
    assert events[0][1]["previous"]["name"] == "B" and events[1][1]["previous"] == renamed
    assert events[1][1]["team"] == moved and moved["parentTeam"] == a
    assert events[1][1]["userIds"] == sorted({owner.id, b_member.id, c_member.id})


def test_delete_event_and_hook_name_every_sub_team_in_the_same_transaction(teams, team_hooks, before):
    owner, member = teams.user(), teams.user()
    top = teams.create(owner, "Top")["_id"]
    mid = teams.create(owner, "Mid", top)["_id"]
    leaf = teams.create(owner, "Leaf", mid)["_id"]
    teams.add(owner, leaf, member)
    team_hooks.refuse = True  # another module's clean-up fails: nothing is deleted, nothing recorded
    assert teams.call("DELETE", f"/{top}", owner).status_code == 409
    assert trellis_db.session.execute(select(func.count()).select_from(Team).where(Team.id == leaf)).scalar_one() == 1
    assert [topic for topic, _ in recorded(before)].count("delete") == 0
    team_hooks.refuse = False
    assert teams.call("DELETE", f"/{top}", owner).status_code == 200
    assert team_hooks.deleted[-1] == [top, mid, leaf]
    deletes = [payload for topic, payload in recorded(before) if topic == "delete"]
    # each member's teams once the change is made (a live subscriber's view follows them in commit order)
    teams_after = {owner.id: [], member.id: []}
    assert deletes == [{"teamIds": [top, mid, leaf], "userIds": sorted({owner.id, member.id}), "teams": teams_after}]


def test_a_deleted_users_memberships_go_with_a_leave_event(teams, admin_headers, before):
    owner, member = teams.user(), teams.user()
    first = teams.create(owner, "First")["_id"]
    second = teams.create(owner, "Second")["_id"]
    teams.add(owner, first, member)
    teams.add(owner, second, member, "owner")
    assert teams.client.delete(f"/authentication/users/{member.id}", headers=admin_headers).status_code == 200
    rows = trellis_db.session.execute(select(TeamMember.team_id).where(TeamMember.user_id == member.id)).all()
    assert rows == []
    leaves = sorted(payload["teamId"] for topic, payload in recorded(before) if topic == "leave")
    assert leaves == sorted([first, second])
    assert teams.members(owner, second) == {owner.id: "owner"}


def test_team_ids_of_walks_up_three_levels_and_sees_the_open_transaction(teams):
    owner, member, outsider = teams.user(), teams.user(), teams.user()
    top = teams.create(owner, "Top")["_id"]
    mid = teams.create(owner, "Mid", top)["_id"]
    leaf = teams.create(owner, "Leaf", mid)["_id"]
    other = teams.create(owner, "Other")["_id"]
    teams.add(owner, leaf, member)
    assert service.team_ids_of(member.id) == sorted([top, mid, leaf])
    assert service.team_ids_of(owner.id) == sorted([top, mid, leaf, other])
    assert service.team_ids_of(outsider.id) == []
    # A membership written through the module in this transaction and not committed yet counts (the
    # request's session: every membership change records its event through team_memory.record).
    trellis_db.session.add(
        TeamMember(team_id=other, user_id=outsider.id, role="member", created_at=trellis_db.utcnow())
    )
    team_memory.record("authentication.team.join", {"teamId": other, "userId": outsider.id, "role": "member"})
    trellis_db.session.flush()
    assert service.team_ids_of(outsider.id) == [other]


def test_existing_team_ids_team_exists_and_public_users(teams):
    owner = teams.user()
    team_id = teams.create(owner, "T")["_id"]
    assert service.existing_team_ids([team_id, "0" * 32, team_id]) == {team_id}
    assert service.existing_team_ids([]) == set()
    assert service.team_exists(team_id) and not service.team_exists("0" * 32)
    assert service.public_users([owner.id, "0" * 32]) == {owner.id: {"_id": owner.id, "email": owner.email}}
    assert service.public_users([]) == {}
