"""A deleted account's teams are handed over: each team where it was the last owner goes to its
longest-standing member; a root team with nobody left in it or its sub-teams is deleted with them; a
sub-team with no member left stays with the owners above it."""

from __future__ import annotations

from sqlalchemy import select

from trellis import db as trellis_db
from trellis_authentication.team_models import Team

from .team_calls import Teams, teams  # noqa: F401  (the fixture)


def _delete_account(teams: Teams, who) -> None:
    answer = teams.client.delete(f"/authentication/users/{who.id}", headers=teams.admin)
    assert answer.status_code == 200, answer.get_json()


def _existing(*team_ids: str) -> set[str]:
    return set(trellis_db.session.execute(select(Team.id).where(Team.id.in_(team_ids))).scalars())


def test_the_longest_standing_member_becomes_owner(teams):
    alice, bob, carol = teams.user(), teams.user(), teams.user()
    team = teams.create(alice, "Studio")["_id"]
    teams.add(alice, team, bob)  # joined first
    teams.add(alice, team, carol)
    _delete_account(teams, alice)
    assert teams.members(bob, team) == {bob.id: "owner", carol.id: "member"}
    assert teams.call("PATCH", f"/{team}", bob, json={"name": "Studio 2"}).status_code == 200  # manageable
    assert teams.create(carol, "Studio")["name"] == "Studio"  # the old creator's namespace is gone too


def test_a_remaining_owner_keeps_the_team_as_it_is(teams):
    alice, bob, carol = teams.user(), teams.user(), teams.user()
    team = teams.create(alice, "Pair")["_id"]
    teams.add(alice, team, bob)
    teams.add(alice, team, carol, role="owner")
    _delete_account(teams, alice)
    assert teams.members(bob, team) == {bob.id: "member", carol.id: "owner"}


def test_a_root_team_with_nobody_left_is_deleted_with_its_sub_teams(teams):
    alice, bob = teams.user(), teams.user()
    root = teams.create(alice, "Solo")["_id"]
    sub = teams.create(alice, "Solo sub", root)["_id"]
    leaf = teams.create(alice, "Solo leaf", sub)["_id"]
    kept = teams.create(bob, "Bob's")["_id"]
    teams.add(bob, kept, alice, role="owner")
    _delete_account(teams, alice)
    assert _existing(root, sub, leaf, kept) == {kept}
    assert teams.members(bob, kept) == {bob.id: "owner"}


def test_a_root_team_goes_to_the_longest_standing_member_of_its_sub_teams(teams):
    alice, dave, erin = teams.user(), teams.user(), teams.user()
    root = teams.create(alice, "Company")["_id"]
    design = teams.create(alice, "Design", root)["_id"]
    web = teams.create(alice, "Web", design)["_id"]
    teams.add(alice, web, dave)  # joined first, deep down
    teams.add(alice, design, erin)
    _delete_account(teams, alice)
    assert _existing(root, design, web) == {root, design, web}
    assert teams.members(dave, root) == {dave.id: "owner"}
    assert teams.members(erin, design) == {erin.id: "owner"}  # Design's own member took it
    assert teams.call("DELETE", f"/{web}", dave).status_code == 200  # the new owner manages the tree


def test_a_sub_team_with_no_member_left_stays_with_the_owners_above(teams):
    alice, bob = teams.user(), teams.user()
    root = teams.create(bob, "Top")["_id"]
    teams.add(bob, root, alice, role="owner")
    sub = teams.create(alice, "Alice's corner", root)["_id"]
    _delete_account(teams, alice)
    assert _existing(root, sub) == {root, sub}
    assert teams.members(bob, sub) == {}
    assert teams.call("PATCH", f"/{sub}", bob, json={"name": "Bob's corner"}).status_code == 200


def test_deleting_ones_own_account_hands_the_team_over(teams):
    alice, bob = teams.user(), teams.user()
    team = teams.create(alice, "Mine")["_id"]
    teams.add(alice, team, bob)
    answer = teams.client.delete("/authentication/user", json={"password": alice.password}, headers=alice.headers)
    assert answer.status_code == 200, answer.get_json()
    assert teams.members(bob, team) == {bob.id: "owner"}
