"""``AudienceIndex``: the live subscriptions an event's audiences may admit, found by name. Every item
``Audience.admits`` admits must be among the candidates (else a reader loses the change), in the order
given, administrators always; an item that shares nothing with the audiences is left out (else each
event costs every subscriber again)."""

from __future__ import annotations

import random

from trellis.access import Acting, Audience, AudienceIndex

USERS = [f"u{n}" for n in range(6)]
TEAMS = [f"t{n}" for n in range(4)]


def acting_of(rnd: random.Random, user: str) -> Acting | None:
    kind = rnd.choice(["user", "user", "scoped", "admin", "admin-scoped", "none"])
    teams = tuple(rnd.sample(TEAMS, rnd.randint(0, 2)))
    if kind == "none":
        return None
    if kind == "admin":
        return Acting(user_id=None, subjects=(), admin=True)
    if kind == "admin-scoped":
        return Acting(
            user_id=None, subjects=(f"Team:{TEAMS[0]}",), team_ids=(TEAMS[0],), scope=f"Team:{TEAMS[0]}", admin=True
        )
    if kind == "scoped":
        team = rnd.choice(TEAMS)
        return Acting(user_id=user, subjects=(f"Team:{team}",), team_ids=(team,), scope=f"Team:{team}")
    subjects = (f"User:{user}", "User:*", "*", *(f"Team:{t}" for t in teams))
    return Acting(user_id=user, subjects=subjects, team_ids=teams)


def audience_of(rnd: random.Random) -> Audience:
    subjects = {rnd.choice([*(f"User:{u}" for u in USERS), *(f"Team:{t}" for t in TEAMS), "User:*", "*"])}
    return Audience(
        subjects=frozenset(rnd.sample(sorted(subjects), rnd.randint(0, 1))),
        users=frozenset(rnd.sample(USERS, rnd.randint(0, 2))),
        teams=frozenset(rnd.sample(TEAMS, rnd.randint(0, 1))),
    )


def test_every_admitted_item_is_a_candidate_in_order():
    rnd = random.Random(3)
    for _ in range(300):
        items = [(n, acting_of(rnd, rnd.choice(USERS))) for n in range(rnd.randint(0, 12))]
        index = AudienceIndex(items)
        audiences = [audience_of(rnd) for _ in range(rnd.randint(0, 2))]
        found = index.candidates(audiences)
        assert found == sorted(found)  # the order given, each once
        admitted = [n for n, acting in items if acting is None or any(a.admits(acting) for a in audiences)]
        assert set(admitted) <= set(found), (items, audiences)
        assert index.restricted == any(a is not None and not (a.admin and a.scope is None) for _, a in items)


def test_only_the_named_and_administrators_are_candidates():
    alice = Acting(user_id="alice", subjects=("User:alice", "User:*", "*", "Team:red"), team_ids=("red",))
    bob = Acting(user_id="bob", subjects=("User:bob", "User:*", "*"), team_ids=())
    carol = Acting(user_id="carol", subjects=("User:carol", "User:*", "*", "Team:blue"), team_ids=("blue",))
    admin = Acting(user_id=None, subjects=(), admin=True)
    index = AudienceIndex([("alice", alice), ("bob", bob), ("admin", admin), ("carol", carol), ("root", None)])
    assert index.candidates([Audience(users=frozenset({"bob"}))]) == ["bob", "admin", "root"]
    assert index.candidates([Audience(teams=frozenset({"red"}))]) == ["alice", "admin", "root"]
    assert index.candidates([Audience(subjects=frozenset({"Team:blue"}))]) == ["admin", "carol", "root"]
    assert index.candidates([Audience(subjects=frozenset({"User:*"}))]) == ["alice", "bob", "admin", "carol", "root"]
    assert index.candidates([Audience(), Audience(users=frozenset({"carol"}))]) == ["admin", "carol", "root"]
    assert index.candidates([]) == ["admin", "root"]


def test_a_scoped_viewer_is_found_by_its_team_not_its_user():
    scoped = Acting(user_id="dan", subjects=("Team:red",), team_ids=("red",), scope="Team:red")
    index = AudienceIndex([("dan", scoped)])
    assert index.candidates([Audience(users=frozenset({"dan"}))]) == []  # admits says no: a scope acts as the team
    assert index.candidates([Audience(subjects=frozenset({"Team:red"}))]) == ["dan"]
    for audience in (Audience(users=frozenset({"dan"})), Audience(subjects=frozenset({"Team:red"}))):
        assert audience.admits(scoped) == bool(index.candidates([audience]))


def test_no_items():
    index = AudienceIndex([])
    assert not index.restricted
    assert index.candidates([Audience(users=frozenset(USERS))]) == []
    assert index.candidates([]) == []
