"""Live data under access control judged by the access in force when each change committed, in commit
order (``docs/access.md``, "Live data"): over real Socket.IO clients and SSE streams, with writes sent
back to back (each acknowledged before the next) so that later changes have committed by the time an
earlier event is delivered. Each race is run over many trials: one lucky interleaving proves nothing."""

from __future__ import annotations

import json
import threading
import uuid
from collections import defaultdict
from typing import Any

import pytest
import requests

from .test_database_live_access import Access, events_of, server, users  # noqa: F401  (server: a fixture)
from .test_database_subscriptions import ADMIN, WAIT, redis_url, watchers  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.live, pytest.mark.long]

TRIALS = 100


class Stream:
    """An SSE stream of a schema's changes read on a thread, its events kept in order."""

    def __init__(self, url: str, headers: dict[str, str], **params: Any) -> None:
        self.events: list[dict[str, Any]] = []
        self._response = requests.get(url, headers=headers, params=params, stream=True, timeout=WAIT)
        assert self._response.status_code == 200, self._response.text
        self._lines = self._response.iter_lines(decode_unicode=True)
        assert next(self._lines).startswith(": subscribed")
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        current: dict[str, Any] = {}
        try:
            for line in self._lines:
                if line.startswith(":"):
                    continue
                if line == "":
                    if current:
                        self.events.append(current)
                        current = {}
                    continue
                key, _, value = line.partition(": ")
                current[key] = json.loads(value) if key == "data" else value
        except (requests.RequestException, AttributeError, ValueError):
            return  # closed by the test

    def wait_for(self, count: int) -> list[tuple[str, Any]]:
        deadline = threading.Event()
        for _ in range(int(WAIT * 20)):
            if len(self.events) >= count:
                break
            deadline.wait(0.05)
        return [(event["event"], event["data"]) for event in self.events]

    def close(self) -> None:
        self._response.close()


def per_document(changes: list[tuple[str, Any]]) -> dict[str, list[tuple[str, Any]]]:
    found: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for kind, document in changes:
        found[document["_id"]].append((kind, document))
    return found


def socket_changes(watcher: Any, count: int) -> list[tuple[str, Any]]:
    return events_of(watcher, count)


def revoke_write_and_grant(
    api: Access, name: str, note: dict[str, Any], alice: Any, bob: Any, trials: int
) -> list[Any]:
    """Back to back, ``trials`` times: revoke Bob, write a secret, overwrite it, grant Bob again. Returns what
    Bob must receive: a leave and an enter with the clean version each time, never the secret."""
    expected: list[tuple[str, Any]] = []
    for trial in range(trials):
        api.share(name, note["_id"], f"User:{bob.id}", alice, revoke=True)
        api.update(name, note["_id"], {"secret": f"leak {trial}"}, alice)
        clean = api.update(name, note["_id"], {"secret": f"clean {trial}"}, alice)
        api.share(name, note["_id"], f"User:{bob.id}", alice)
        expected += [("leave", {"_id": note["_id"]}), ("enter", clean)]
    return expected


def test_the_owner_receives_every_change_of_a_document_deleted_at_once(server, watchers):
    """A create, an update and a delete sent back to back: the owner's update and create used to be
    judged after the delete had removed her grant, and never arrived."""
    api = Access(server.url)
    name = api.access_schema({"title": "String"})
    (alice,) = users(server, 1)
    socket = watchers(server.url, {"token": alice.access_token})
    socket.subscribe(schema=name)
    stream = Stream(f"{server.url}/database/{name}/changes", alice.headers)
    try:
        expected: list[tuple[str, Any]] = []
        for trial in range(TRIALS):
            created = api.create(name, {"title": f"t{trial}"}, headers=alice.headers)
            updated = api.update(name, created["_id"], {"title": f"u{trial}"}, alice)
            api.remove(name, created["_id"], alice)
            expected += [("create", created), ("update", updated), ("delete", {"_id": created["_id"]})]
        assert socket_changes(socket, len(expected)) == expected
        assert stream.wait_for(len(expected)) == expected
        socket.quiet(0.3)
    finally:
        stream.close()


def test_a_change_made_while_revoked_never_reaches_the_reader_granted_again(server, watchers):
    """Revoke, write a secret, overwrite it, grant again, back to back: the secret was written while Bob
    could not read the document, so it never reaches him, even though he may read the document by the
    time the event is delivered."""
    api = Access(server.url)
    name = api.access_schema({"title": "String", "secret": "String"})
    alice, bob = users(server, 2)
    note = api.create(name, {"title": "shared", "secret": "start"}, headers=alice.headers)
    api.share(name, note["_id"], f"User:{bob.id}", alice)
    socket = watchers(server.url, {"token": bob.access_token})
    socket.subscribe(schema=name)
    stream = Stream(f"{server.url}/database/{name}/changes", bob.headers)
    try:
        expected = revoke_write_and_grant(api, name, note, alice, bob, TRIALS)
        for received in (socket_changes(socket, len(expected)), stream.wait_for(len(expected))):
            assert not [change for change in received if "leak" in json.dumps(change)]
            assert received == expected
        socket.quiet(0.3)
    finally:
        stream.close()


def first_change(url: str, headers: dict[str, str], then: Any) -> tuple[str, Any]:
    """Open an SSE stream, call ``then()`` once it is subscribed, and return the first change it sends (read
    on this thread: closing a response another thread reads can hang)."""
    with requests.get(url, headers=headers, stream=True, timeout=WAIT) as response:
        assert response.status_code == 200, response.text
        lines = response.iter_lines(decode_unicode=True)
        assert next(lines).startswith(": subscribed")
        then()
        current: dict[str, Any] = {}
        for line in lines:
            if line.startswith(":"):
                continue
            if line == "" and current:
                return current["event"], current["data"]
            key, _, value = line.partition(": ")
            if key:
                current[key] = json.loads(value) if key == "data" else value
    raise AssertionError("the stream ended without a change")


def test_a_subscription_receives_nothing_acknowledged_before_it(server, watchers):
    """Share, subscribe, update, back to back over many trials: the subscriber receives the update only. The
    log numbers an event a few milliseconds after its commit (PostgreSQL), and a subscription that started
    from what had been numbered received the share acknowledged before it as ``enter``."""
    api = Access(server.url)
    name = api.access_schema({"title": "String"})
    alice, bob = users(server, 2)
    socket = watchers(server.url, {"token": bob.access_token})
    for trial in range(TRIALS // 2):
        note = api.create(name, {"title": f"n{trial}"}, headers=alice.headers)
        api.share(name, note["_id"], f"User:{bob.id}", alice)
        if trial % 2:  # the socket's subscription right after the share
            subscription = socket.subscribe(schema=name)
        else:  # the stream's
            api.share(name, note["_id"], f"User:{bob.id}", alice, revoke=True)
            api.share(name, note["_id"], f"User:{bob.id}", alice)
        updated: list[dict[str, Any]] = []
        url = f"{server.url}/database/{name}/changes"
        change = first_change(
            url, bob.headers, lambda: updated.append(api.update(name, note["_id"], {"title": f"u{trial}"}, alice))
        )
        assert change == ("update", updated[0])
        if trial % 2:
            assert socket_changes(socket, 1) == [("update", updated[0])]
            socket.call("unsubscribe", {"subscriptionId": subscription})
    socket.quiet(0.3)


def test_a_revoke_then_a_delete_still_tells_the_revoked_reader(server, watchers):
    """A revoke followed at once by a delete: the reader gets ``leave`` (it could read the document until
    the revoke) and nothing of the delete (it could not read it then)."""
    api = Access(server.url)
    name = api.access_schema({"title": "String"})
    alice, bob = users(server, 2)
    socket = watchers(server.url, {"token": bob.access_token})
    socket.subscribe(schema=name)
    stream = Stream(f"{server.url}/database/{name}/changes", bob.headers)
    try:
        expected: list[tuple[str, Any]] = []
        for trial in range(TRIALS):
            note = api.create(name, {"title": f"n{trial}"}, headers=alice.headers)
            api.share(name, note["_id"], f"User:{bob.id}", alice)
            api.share(name, note["_id"], f"User:{bob.id}", alice, revoke=True)
            api.remove(name, note["_id"], alice)
            expected += [("enter", note), ("leave", {"_id": note["_id"]})]
        assert socket_changes(socket, len(expected)) == expected
        assert stream.wait_for(len(expected)) == expected
        socket.quiet(0.3)
    finally:
        stream.close()


def test_a_replay_gives_a_new_reader_no_history(server, watchers):
    """Alice writes a PIN, changes it, then shares the document: Bob subscribing with ``since`` from before
    the create receives the document once, as ``enter`` with its shared version, never the PIN."""
    api = Access(server.url)
    name = api.access_schema({"title": "String", "secret": "String"})
    alice, bob = users(server, 2)
    admin = watchers(server.url, ADMIN)
    admin.subscribe(schema=name)
    note = api.create(name, {"title": "card", "secret": "PIN 4711"}, headers=alice.headers)
    since = admin.next()["eventId"] - 1
    changed = api.update(name, note["_id"], {"secret": "changed"}, alice)
    api.share(name, note["_id"], f"User:{bob.id}", alice)
    later = api.update(name, note["_id"], {"title": "card 2"}, alice)
    admin.take(2)
    expected = [("enter", changed), ("update", later)]
    socket = watchers(server.url, {"token": bob.access_token})
    socket.subscribe(schema=name, since=since)
    assert socket_changes(socket, 2) == expected
    socket.quiet(0.3)
    stream = Stream(f"{server.url}/database/{name}/changes", bob.headers, since=since)
    try:
        assert stream.wait_for(2) == expected
        threading.Event().wait(0.3)
        assert len(stream.events) == 2
    finally:
        stream.close()
    with requests.get(
        f"{server.url}/database/{name}/changes",
        headers={**bob.headers, "Last-Event-ID": str(since)},
        stream=True,
        timeout=WAIT,
    ) as response:
        body = ""
        for line in response.iter_lines(decode_unicode=True):
            body += line + "\n"
            if body.count("event: ") == 2:
                break
    assert "PIN 4711" not in body and "event: enter" in body


def test_a_member_removed_from_a_team_leaves_its_documents_with_an_unset_field_relation(server, watchers):
    """Team documents whose field-backed relation is unset: removing a member sends ``leave`` for each
    (the field's condition is NULL for them, which used to drop them from the query)."""
    api = Access(server.url)
    name = api.access_schema(
        {"title": "String", "assignee": {"type": "Relation", "model": "User"}}, relations={"assignee": "editor"}
    )
    alice, bob = users(server, 2)
    team = api.teams("POST", "", alice, 201, json={"name": "team-" + uuid.uuid4().hex[:6]})
    docs = [api.create(name, {"title": f"d{index}"}, headers=alice.headers) for index in range(3)]
    for doc in docs:
        api.share(name, doc["_id"], f"Team:{team['_id']}", alice)
    socket = watchers(server.url, {"token": bob.access_token})
    socket.subscribe(schema=name)
    stream = Stream(f"{server.url}/database/{name}/changes", bob.headers)
    try:
        api.teams("POST", f"/{team['_id']}/add", alice, 201, json={"userId": bob.id, "role": "member"})
        entered = sorted(socket_changes(socket, 3), key=lambda change: change[1]["_id"])
        assert entered == sorted((("enter", doc) for doc in docs), key=lambda change: change[1]["_id"])
        api.teams("DELETE", f"/{team['_id']}/members", alice, 200, params={"members": bob.id})
        left = sorted(socket_changes(socket, 3), key=lambda change: change[1]["_id"])
        assert left == sorted((("leave", {"_id": doc["_id"]}) for doc in docs), key=lambda change: change[1]["_id"])
        assert sorted(stream.wait_for(6)[3:], key=lambda change: change[1]["_id"]) == left
        socket.quiet(0.3)
    finally:
        stream.close()


def test_team_changes_follow_commit_order(server, watchers):
    """Join, a write, leave, a write, back to back over many trials: the member sees exactly the write made
    while it belonged to the team."""
    api = Access(server.url)
    name = api.access_schema({"title": "String"})
    alice, bob = users(server, 2)
    team = api.teams("POST", "", alice, 201, json={"name": "team-" + uuid.uuid4().hex[:6]})
    note = api.create(name, {"title": "start"}, headers=alice.headers)
    api.share(name, note["_id"], f"Team:{team['_id']}", alice)
    socket = watchers(server.url, {"token": bob.access_token})
    socket.subscribe(schema=name)
    expected: list[tuple[str, str]] = []  # (kind, title)
    for trial in range(TRIALS // 4):
        api.teams("POST", f"/{team['_id']}/add", alice, 201, json={"userId": bob.id, "role": "member"})
        api.update(name, note["_id"], {"title": f"in {trial}"}, alice)
        api.teams("DELETE", f"/{team['_id']}/members", alice, 200, params={"members": bob.id})
        api.update(name, note["_id"], {"title": f"out {trial}"}, alice)
        # the enter shows the document as the join found it: the last write made outside
        expected += [("enter", f"out {trial - 1}" if trial else "start"), ("update", f"in {trial}"), ("leave", "")]
    received = socket_changes(socket, len(expected))
    assert [(kind, document.get("title", "")) for kind, document in received] == expected
    socket.quiet(0.3)


def test_the_rule_holds_across_processes(live_server_factory, redis_url, watchers):
    """The writer on one process, the subscriber on another (sharing Redis): the same back-to-back revoke,
    secret, overwrite and grant never hands the secret over."""
    one = live_server_factory(TRELLIS_REDIS_URL=redis_url)
    two = live_server_factory(TRELLIS_REDIS_URL=redis_url)
    api = Access(one.url)
    name = api.access_schema({"title": "String", "secret": "String"})
    alice, bob = users(one, 2)
    note = api.create(name, {"title": "shared", "secret": "start"}, headers=alice.headers)
    api.share(name, note["_id"], f"User:{bob.id}", alice)
    socket = watchers(two.url, {"token": bob.access_token})
    socket.subscribe(schema=name)
    stream = Stream(f"{two.url}/database/{name}/changes", bob.headers)
    try:
        expected = revoke_write_and_grant(api, name, note, alice, bob, TRIALS // 2)
        for received in (socket_changes(socket, len(expected)), stream.wait_for(len(expected))):
            assert received == expected
        socket.quiet(0.3)
    finally:
        stream.close()


def test_a_change_of_the_inherited_document_moves_its_children(server, watchers):
    """Tasks readable through their project (``project->read``): naming a reader in the project's
    field-backed relation sends ``enter`` for its tasks, removing it ``leave``, and deleting the project
    ``leave`` for the tasks that were readable only through it."""
    api = Access(server.url)
    project = api.access_schema(
        {"title": "String", "members": [{"type": "Relation", "model": "User"}]}, relations={"members": "reader"}
    )
    task = api.access_schema({"title": "String", "project": {"type": "Relation", "model": project}})
    read = ["reader", "editor", "owner", "project->read"]
    definition = {"permissions": {"read": read, "edit": ["editor", "owner"], "delete": ["owner"], "share": ["owner"]}}
    response = requests.patch(
        f"{server.url}/admin/authorization/resources/{task}", json=definition, headers=ADMIN, timeout=WAIT
    )
    assert response.status_code == 200, response.text
    alice, bob = users(server, 2)
    launch = api.create(project, {"title": "launch", "members": []}, headers=alice.headers)
    tasks = [api.create(task, {"title": f"t{n}", "project": launch["_id"]}, headers=alice.headers) for n in range(2)]
    socket = watchers(server.url, {"token": bob.access_token})
    socket.subscribe(schema=task)
    by_id = lambda change: change[1]["_id"]  # noqa: E731
    api.update(project, launch["_id"], {"members": [bob.id]}, alice)
    assert sorted(socket_changes(socket, 2), key=by_id) == sorted((("enter", doc) for doc in tasks), key=by_id)
    api.update(project, launch["_id"], {"members": []}, alice)
    left = sorted((("leave", {"_id": doc["_id"]}) for doc in tasks), key=by_id)
    assert sorted(socket_changes(socket, 2), key=by_id) == left
    api.update(project, launch["_id"], {"members": [bob.id]}, alice)
    socket_changes(socket, 2)
    api.remove(project, launch["_id"], alice)
    assert sorted(socket_changes(socket, 2), key=by_id) == left
    socket.quiet(0.3)
