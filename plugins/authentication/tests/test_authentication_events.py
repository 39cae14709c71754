"""Users' events (authentication.user.create|delete|block|unblock) are recorded in the change's transaction."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from trellis import db as trellis_db
from trellis.events import recorded as recorded_events

EVENTS = recorded_events()  # numbered or still pending


@pytest.fixture()
def before(db) -> int:
    """The last event row before the test: an earlier live-server test leaves its newest event in the table."""
    return db.execute(select(func.coalesce(func.max(EVENTS.c.id), 0))).scalar_one()


def recorded(before: int, prefix: str = "authentication.user.") -> list[tuple[str, dict]]:
    """The events of this test's transaction, in insert order."""
    rows = trellis_db.session.execute(
        select(EVENTS.c.topic, EVENTS.c.payload)
        .where(EVENTS.c.topic.startswith(prefix), EVENTS.c.id > before)
        .order_by(EVENTS.c.id)
    )
    return [(topic, json.loads(payload)) for topic, payload in rows]


def test_create_block_unblock_delete_are_recorded_with_the_user(client, admin_headers, before):
    created = client.post(
        "/authentication/users", json={"email": "Eve@Example.com", "password": "password1"}, headers=admin_headers
    ).get_json()
    user_id = created["_id"]
    for action in ("block", "block", "unblock"):  # the second block changes nothing: no event
        assert client.put(f"/authentication/users/{user_id}/{action}", headers=admin_headers).status_code == 200
    assert client.delete(f"/authentication/users/{user_id}", headers=admin_headers).status_code == 200
    events = recorded(before)
    assert [topic for topic, _ in events] == [
        "authentication.user.create",
        "authentication.user.block",
        "authentication.user.unblock",
        "authentication.user.delete",
    ]
    assert events[0][1] == {"user": created}
    assert [payload["user"]["isActive"] for _, payload in events[1:3]] == [False, True]
    assert all(payload["user"]["_id"] == user_id for _, payload in events)
    assert all("password" not in json.dumps(payload).lower() for _, payload in events), "no secrets"


def test_self_registration_is_recorded_and_a_refused_one_is_not(client, before):
    body = {"email": "self@example.com", "password": "password1"}
    assert client.post("/authentication/local/new", json=body).status_code == 201
    assert client.post("/authentication/local/new", json=body).status_code == 409
    assert (
        client.post("/authentication/local/new", json={**body, "email": "x@example.com", "password": "a"}).status_code
        == 400
    )
    assert [payload["user"]["email"] for _, payload in recorded(before)] == ["self@example.com"]
