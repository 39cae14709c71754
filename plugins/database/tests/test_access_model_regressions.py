"""Counterexamples found by the model-based access test (``test_access_model``), each as a plain test
against a running server with real Socket.IO clients: a replay (``since``) brings a subscriber exactly
what live delivery brought it, under the access in force when each change committed."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import requests

from trellis_authentication.testing import create_user_over_http

from .test_database_subscriptions import ADMIN, WAIT, watchers  # noqa: F401  (watchers: a fixture)

pytestmark = pytest.mark.live


def call(url: str, method: str, path: str, headers: dict[str, str], expect: int, **kwargs: Any) -> Any:
    response = requests.request(method, url + path, headers=headers, timeout=WAIT, **kwargs)
    assert response.status_code == expect, (method, path, response.status_code, response.text)
    return response.json()


def projects_and_tasks(url: str) -> tuple[str, str]:
    """Project and Task under access control, a Task readable by whoever may read its ``project``."""
    suffix = uuid.uuid4().hex[:8]
    project, task = f"P{suffix}", f"T{suffix}"
    on = {"conduit": {"authorization": {"enabled": True}}}
    call(
        url,
        "POST",
        "/admin/database/schemas",
        ADMIN,
        201,
        json={"name": project, "fields": {"name": "String"}, "modelOptions": on},
    )
    fields = {"title": "String", "project": {"type": "Relation", "model": project}}
    call(url, "POST", "/admin/database/schemas", ADMIN, 201, json={"name": task, "fields": fields, "modelOptions": on})
    permissions = {
        "read": ["reader", "editor", "owner", "project->read"],
        "edit": ["editor", "owner"],
        "delete": ["owner"],
        "share": ["owner"],
    }
    call(url, "PATCH", f"/admin/authorization/resources/{task}", ADMIN, 200, json={"permissions": permissions})
    return project, task


@pytest.fixture(scope="module")
def server(module_live_server):
    return module_live_server


def test_a_grant_on_the_related_document_sends_enter_and_its_revoke_leave(server, watchers):  # noqa: F811
    """Alice's task reads through her project. She shares the project with bob, then takes it back: bob's
    live subscription to Tasks gets ``enter`` for the task, then ``leave`` (REST has it right at once).
    Found by the model-based test: nothing arrived."""
    url = server.url
    project, task = projects_and_tasks(url)
    alice, bob = create_user_over_http(url), create_user_over_http(url)
    live = watchers(url, {"token": bob.access_token})
    live.subscribe(schema=task)
    launch = call(url, "POST", f"/database/{project}", alice.headers, 201, json={"name": "Launch"})
    todo = call(url, "POST", f"/database/{task}", alice.headers, 201, json={"title": "todo", "project": launch["_id"]})
    grants = f"/database/{project}/{launch['_id']}/grants"
    grant = {"subject": f"User:{bob.id}", "relation": "reader"}

    call(url, "POST", grants, alice.headers, 201, json=grant)
    assert call(url, "GET", f"/database/{task}/{todo['_id']}", bob.headers, 200) == todo
    entered = live.next()
    assert (entered["event"], entered["document"]) == ("enter", todo)
    call(url, "DELETE", grants, alice.headers, 200, params=grant)
    call(url, "GET", f"/database/{task}/{todo['_id']}", bob.headers, 404)
    left = live.next()
    assert (left["event"], left["document"]) == ("leave", {"_id": todo["_id"]})
    live.quiet(0.5)


def test_a_replay_brings_the_enter_a_grant_on_the_related_document_sent_live(server, watchers):  # noqa: F811
    """Alice's task reads through her project. She shares the project with bob: bob's live subscription to
    Tasks gets ``enter`` for the task. A replay from before the share must bring the same ``enter``; it
    brought nothing (found by the model-based test, on SQLite)."""
    url = server.url
    project, task = projects_and_tasks(url)
    alice, bob = create_user_over_http(url), create_user_over_http(url)
    admin = watchers(url, ADMIN)
    admin.subscribe(schema=task)
    live = watchers(url, {"token": bob.access_token})
    live.subscribe(schema=task)
    launch = call(url, "POST", f"/database/{project}", alice.headers, 201, json={"name": "Launch"})
    todo = call(url, "POST", f"/database/{task}", alice.headers, 201, json={"title": "todo", "project": launch["_id"]})
    before = admin.next()["eventId"]  # the task's create: bob may not read it then

    grant = {"subject": f"User:{bob.id}", "relation": "reader"}
    call(url, "POST", f"/database/{project}/{launch['_id']}/grants", alice.headers, 201, json=grant)
    entered = live.next()
    assert (entered["event"], entered["document"]) == ("enter", todo)

    replay = watchers(url, {"token": bob.access_token})
    replay.subscribe(schema=task, since=before)
    replayed = replay.next()
    assert (replayed["event"], replayed["document"], replayed["eventId"]) == ("enter", todo, entered["eventId"])
    replay.quiet(0.5)
    live.quiet(0.1)


TEAMS = {"teams": {"enabled": True, "allowAddWithoutInvite": True, "invites": {"enabled": True}}}


def test_a_replay_brings_the_enter_and_leave_of_a_team_join_and_removal(server, watchers):  # noqa: F811
    """Alice's note is owned by her team (created in its scope). Bob is added to the team, then removed:
    live, he gets ``enter`` then ``leave``. A replay from before must bring the same two; it brought
    neither (found by the model-based test, on PostgreSQL)."""
    url = server.url
    call(url, "PUT", "/config/authentication", ADMIN, 200, json=TEAMS)
    project, _ = projects_and_tasks(url)
    alice, bob = create_user_over_http(url), create_user_over_http(url)
    admin = watchers(url, ADMIN)
    admin.subscribe(schema=project)
    live = watchers(url, {"token": bob.access_token})
    live.subscribe(schema=project)
    team = call(url, "POST", "/authentication/teams", alice.headers, 201, json={"name": "t-" + uuid.uuid4().hex[:8]})
    note = call(
        url,
        "POST",
        f"/database/{project}",
        alice.headers,
        201,
        json={"name": "plan"},
        params={"scope": f"Team:{team['_id']}"},
    )
    before = admin.next()["eventId"]  # the create: bob may not read it then

    call(
        url,
        "POST",
        f"/authentication/teams/{team['_id']}/add",
        alice.headers,
        201,
        json={"userId": bob.id, "role": "member"},
    )
    call(url, "DELETE", f"/authentication/teams/{team['_id']}/members", alice.headers, 200, params={"members": bob.id})
    came = [(change["event"], change["document"]) for change in live.take(2)]
    assert came == [("enter", note), ("leave", {"_id": note["_id"]})]

    replay = watchers(url, {"token": bob.access_token})
    replay.subscribe(schema=project, since=before)
    assert [(change["event"], change["document"]) for change in replay.take(2)] == came
    replay.quiet(0.5)


def test_a_replay_brings_the_enter_and_leave_of_a_team_join_and_the_team_deleted(server, watchers):  # noqa: F811
    """As above, but bob is invited and accepts, and the team is then deleted (its tuples with it): live,
    he gets ``enter`` then ``leave``; a replay from before brought neither (model-based test, PostgreSQL)."""
    url = server.url
    call(url, "PUT", "/config/authentication", ADMIN, 200, json=TEAMS)
    project, _ = projects_and_tasks(url)
    alice, bob = create_user_over_http(url), create_user_over_http(url)
    admin = watchers(url, ADMIN)
    admin.subscribe(schema=project)
    live = watchers(url, {"token": bob.access_token})
    live.subscribe(schema=project)
    team = call(url, "POST", "/authentication/teams", alice.headers, 201, json={"name": "t-" + uuid.uuid4().hex[:8]})
    path = f"/authentication/teams/{team['_id']}"
    note = call(
        url,
        "POST",
        f"/database/{project}",
        alice.headers,
        201,
        json={"name": "plan"},
        params={"scope": f"Team:{team['_id']}"},
    )
    before = admin.next()["eventId"]  # the create: bob may not read it then

    token = call(url, "POST", f"{path}/invite", alice.headers, 201, json={"email": bob.email, "role": "owner"})
    accept = {"invitationToken": token["invitationToken"]}
    call(url, "GET", "/authentication/teams/invite/accept", bob.headers, 200, params=accept)
    call(url, "DELETE", path, alice.headers, 200)
    came = [(change["event"], change["document"]) for change in live.take(2)]
    assert came == [("enter", note), ("leave", {"_id": note["_id"]})]

    replay = watchers(url, {"token": bob.access_token})
    replay.subscribe(schema=project, since=before)
    assert [(change["event"], change["document"]) for change in replay.take(2)] == came
    replay.quiet(0.5)
