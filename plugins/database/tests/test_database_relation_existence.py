"""A write naming users and teams checks that they exist when it is made, never from a memory: a user or team
deleted through one app (another process) is refused by the next write through another, with the 400 of an
id that never existed; and a user added in the writer's own transaction is found there."""

from __future__ import annotations

from typing import Any

from trellis import db
from trellis.testing.plugin import TEST_MASTER_KEY
from trellis_authentication import service as users_service
from trellis_authentication.testing import create_user_with_client

ADMIN = {"masterkey": TEST_MASTER_KEY}
MISSING_ID = "0123456789abcdef0123456789abcdef"
TEAMS = {"teams": {"enabled": True, "allowAddWithoutInvite": True}}
FIELDS = {
    "title": "String",
    "assignee": {"type": "Relation", "model": "User"},
    "viewers": [{"type": "Relation", "model": "User"}],
    "teams": [{"type": "Relation", "model": "Team"}],
}
ACCESS = {"conduit": {"authorization": {"enabled": True, "fields": {"viewers": "reader", "teams": "reader"}}}}


def _post(client: Any, body: dict[str, Any], headers: dict[str, str] = ADMIN) -> Any:
    return client.post("/database/Ticket", json=body, headers=headers)


def _refused(response: Any, field: str, missing: str) -> None:
    assert response.status_code == 400, response.get_json()
    assert response.get_json()["errors"] == {field: [f"No {field_model(field)} document with id {missing!r}"]}


def field_model(field: str) -> str:
    return "Team" if field == "teams" else "User"


def test_a_user_or_team_deleted_through_another_app_is_refused_by_the_next_write(committing_app_factory):
    first, second = committing_app_factory(), committing_app_factory()
    one, other = first.test_client(), second.test_client()
    assert one.put("/config/authentication", json=TEAMS, headers=ADMIN).status_code == 200
    created = one.post(
        "/admin/database/schemas", json={"name": "Ticket", "fields": FIELDS, "modelOptions": ACCESS}, headers=ADMIN
    )
    assert created.status_code == 201, created.get_json()
    alice, bob = create_user_with_client(one), create_user_with_client(one)
    team = one.post("/authentication/teams", json={"name": "crew"}, headers=alice.headers).get_json()["_id"]
    body = {"assignee": bob.id, "viewers": [alice.id, bob.id], "teams": [team]}
    for client in (one, other, other):  # both apps have checked these ids (and the second twice)
        assert _post(client, body).status_code == 201
    assert _post(other, body, alice.headers).status_code == 201

    assert one.delete(f"/authentication/users/{bob.id}", headers=ADMIN).status_code == 200
    _refused(_post(other, {"assignee": bob.id}), "assignee", bob.id)
    _refused(_post(other, {"viewers": [alice.id, bob.id]}), "viewers", bob.id)
    _refused(_post(other, {"viewers": [MISSING_ID]}), "viewers", MISSING_ID)
    _refused(_post(other, {"viewers": [bob.id], "teams": [team]}, alice.headers), "viewers", bob.id)
    _refused(_post(other, {"viewers": [alice.id], "teams": [MISSING_ID]}), "teams", MISSING_ID)
    assert _post(other, {"viewers": [alice.id], "teams": [team]}, alice.headers).status_code == 201

    assert one.delete(f"/authentication/teams/{team}", headers=alice.headers).status_code == 200
    _refused(_post(other, {"teams": [team]}), "teams", team)
    _refused(_post(other, {"teams": [team]}, alice.headers), "teams", team)
    # and the first app, which deleted them, refuses them too
    _refused(_post(one, {"assignee": bob.id}), "assignee", bob.id)
    _refused(_post(one, {"teams": [team]}), "teams", team)


def test_existence_is_read_in_the_callers_transaction(app, make_user):
    """A user added in the session and not yet flushed is found (flushed first, as the session's own queries
    would), and one deleted in it is not; both are undone with the test's transaction."""
    from trellis_authentication.models import User

    kept, gone = make_user(), make_user()
    with app.app_context():
        fresh = User(email="fresh@example.com", password_hash="x")
        db.session.add(fresh)
        db.session.delete(db.session.get(User, gone.id))
        found = users_service.existing_user_ids([kept.id, gone.id, fresh.id, MISSING_ID])
        assert found == {kept.id, fresh.id}
        assert users_service.existing_user_ids([]) == set()
        assert users_service.existing_team_ids([MISSING_ID]) == set()
