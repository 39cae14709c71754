"""Each process remembers the sessions it found valid (``sessions.user_from_claims``): a request of a known
session reads nothing to authenticate, and whatever ends a session is in force on every process for the
next request (the ``authentication-sessions`` generation, ``trellis.cache``).

Two apps on one database stand for two worker processes; they commit for real (outside the savepoint
fixture), with the shared Redis's change token, so the users they make are deleted at the end.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from flask_jwt_extended import decode_token
from sqlalchemy import update

from trellis import create_app
from trellis.testing.plugin import TEST_MASTER_KEY, reachable_redis, statements_run
from trellis_authentication.models import Session

ADMIN = {"masterkey": TEST_MASTER_KEY}
PASSWORD = "session-memory-1"


@pytest.fixture()
def workers(app, app_config) -> Iterator[tuple[Any, Any]]:
    """(writer, reader): two apps on the test database sharing Redis's change token."""
    redis_url = reachable_redis(os.environ.get("TRELLIS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"))
    apps = [create_app({**app_config, "REDIS_URL": redis_url}) for _ in range(2)]
    made: list[str] = []
    writer, reader = (application.test_client() for application in apps)
    writer.made = made  # type: ignore[attr-defined]
    try:
        yield writer, reader
    finally:
        for user_id in made:
            writer.delete(f"/authentication/users/{user_id}", headers=ADMIN)
        for application in apps:
            application.extensions["trellis_events"].stop()
            application.extensions["trellis"].engine.dispose()


def _signed_in(writer: Any) -> dict[str, Any]:
    email = f"memory-{uuid.uuid4().hex[:12]}@example.com"
    created = writer.post("/authentication/users", json={"email": email, "password": PASSWORD}, headers=ADMIN)
    assert created.status_code == 201, created.get_json()
    writer.made.append(created.get_json()["_id"])
    return _login(writer, email)


def _login(writer: Any, email: str) -> dict[str, Any]:
    tokens = writer.post("/authentication/local", json={"email": email, "password": PASSWORD})
    assert tokens.status_code == 200, tokens.get_json()
    return {**tokens.get_json(), "email": email}


def _me(client: Any, tokens: dict[str, Any]) -> Any:
    return client.get("/authentication/user", headers={"Authorization": f"Bearer {tokens['accessToken']}"})


def _behind_our_back(app: Any, tokens: dict[str, Any]) -> None:
    """Revoke the session in SQL, bumping nothing: only a remembered session still passes after it."""
    with app.app_context():
        engine = app.extensions["trellis"].engine
        with engine.begin() as connection:
            sid = decode_token(tokens["accessToken"])["sid"]
            connection.execute(update(Session).where(Session.id == sid).values(revoked=True))


def test_a_remembered_session_reads_nothing_and_its_user_is_read_when_asked(workers):
    writer, reader = workers
    tokens = _signed_in(writer)
    assert _me(reader, tokens).status_code == 200  # read and remembered
    with statements_run(reader.application.extensions["trellis"].engine) as seen:
        me = _me(reader, tokens)
    statements = [s for s in seen if "auth_sessions" in s]
    assert me.status_code == 200
    assert me.get_json()["email"] == tokens["email"]  # the rest of the user, read when the route asked
    assert statements == []  # the session was not read again
    # the proof that it is remembered: a revoke nobody acknowledged does not reach this process
    _behind_our_back(reader.application, tokens)
    assert _me(reader, tokens).status_code == 200


def test_logout_on_one_process_ends_the_session_on_the_other_at_once(workers):
    writer, reader = workers
    tokens = _signed_in(writer)
    other = _login(writer, tokens["email"])
    assert _me(reader, tokens).status_code == 200 and _me(reader, other).status_code == 200
    headers = {"Authorization": f"Bearer {tokens['accessToken']}"}
    assert writer.post("/authentication/logout", headers=headers).status_code == 200
    assert _me(reader, tokens).status_code == 401
    assert _me(reader, other).status_code == 200  # read again, still valid


def test_ending_a_session_by_id_blocking_and_deleting_reach_the_other_process(workers):
    writer, reader = workers
    tokens = _signed_in(writer)
    laptop = _login(writer, tokens["email"])
    assert _me(reader, tokens).status_code == 200 and _me(reader, laptop).status_code == 200

    with writer.application.app_context():
        sid = decode_token(tokens["accessToken"])["sid"]
    ended = writer.delete(
        f"/authentication/sessions/{sid}", headers={"Authorization": f"Bearer {laptop['accessToken']}"}
    )
    assert ended.status_code in (200, 204), ended.get_json()
    assert _me(reader, tokens).status_code == 401
    assert _me(reader, laptop).status_code == 200

    user_id = tokens["userId"]
    assert writer.put(f"/authentication/users/{user_id}/block", headers=ADMIN).status_code == 200
    blocked = _me(reader, laptop)
    assert blocked.status_code == 403 and blocked.get_json()["message"] == "This user is blocked"

    second = _signed_in(writer)
    assert _me(reader, second).status_code == 200
    assert writer.delete(f"/authentication/users/{second['userId']}", headers=ADMIN).status_code in (200, 204)
    assert _me(reader, second).status_code == 401


def test_a_rotated_token_presented_again_ends_the_session_everywhere(workers):
    writer, reader = workers
    tokens = _signed_in(writer)
    renewed = writer.post("/authentication/renew", json={"refreshToken": tokens["refreshToken"]}).get_json()
    assert _me(reader, renewed).status_code == 200
    reuse = writer.post("/authentication/renew", json={"refreshToken": tokens["refreshToken"]})
    assert reuse.status_code == 401
    assert _me(reader, renewed).status_code == 401
