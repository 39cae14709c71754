"""Live data under access control (``docs/access.md``, "Live data and replays"), over real
Socket.IO clients and SSE streams against running servers: a subscriber receives only what it may read;
a grant, a team join or a field change sends ``enter``; a revoke, a team removal or deletion, or a field
change sends ``leave`` with only ``{_id}``; a delete reaches only those who could read the document;
administrators see everything; a revoke made on one process is in force on the other at once."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from trellis_authentication.testing import UserAccount, create_user_over_http

from .test_database_subscriptions import (  # noqa: F401  (watchers, redis_url: fixtures)
    ADMIN,
    WAIT,
    Api,
    _sse_events,
    redis_url,
    watchers,
)

pytestmark = pytest.mark.live

ACCESS = {"conduit": {"authorization": {"enabled": True}}}
TEAMS = {"teams": {"enabled": True, "allowAddWithoutInvite": True, "invites": {"enabled": True}}}


class Access(Api):
    """The REST calls of these tests, each as the user (or administrator) it names."""

    def access_schema(self, fields: dict[str, Any], relations: dict[str, str] | None = None) -> str:
        """A schema under access control; ``relations``: its field-backed relations (field → relation)."""
        name = "Acc" + uuid.uuid4().hex[:8]
        options = {"conduit": {"authorization": {"enabled": True, "fields": relations or {}}}}
        response = self.http.post(
            f"{self.url}/admin/database/schemas",
            json={"name": name, "fields": fields, "modelOptions": options},
            headers=ADMIN,
            timeout=WAIT,
        )
        assert response.status_code == 201, response.text
        return name

    def update(self, schema: str, doc_id: str, changes: dict[str, Any], who: UserAccount) -> dict[str, Any]:
        response = self.http.patch(
            f"{self.url}/database/{schema}/{doc_id}", json=changes, headers=who.headers, timeout=WAIT
        )
        assert response.status_code == 200, response.text
        return response.json()

    def remove(self, schema: str, doc_id: str, who: UserAccount) -> None:
        response = self.http.delete(f"{self.url}/database/{schema}/{doc_id}", headers=who.headers, timeout=WAIT)
        assert response.status_code == 200, response.text

    def share(self, schema: str, doc_id: str, subject: str, who: UserAccount, revoke: bool = False) -> None:
        """Grant ``subject`` reader on the document as ``who`` (``revoke``: take it back)."""
        grant = {"subject": subject, "relation": "reader"}
        response = self.http.request(
            "DELETE" if revoke else "POST",
            f"{self.url}/database/{schema}/{doc_id}/grants",
            params=grant if revoke else None,
            json=None if revoke else grant,
            headers=who.headers,
            timeout=WAIT,
        )
        assert response.status_code == (200 if revoke else 201), response.text

    def teams(self, method: str, path: str, who: UserAccount, expect: int, **kwargs: Any) -> Any:
        response = self.http.request(
            method, f"{self.url}/authentication/teams{path}", headers=who.headers, timeout=WAIT, **kwargs
        )
        assert response.status_code == expect, response.text
        return response.json()


@pytest.fixture(scope="module")
def server(module_live_server):  # teams on: the team test needs them
    response = requests.put(f"{module_live_server.url}/config/authentication", json=TEAMS, headers=ADMIN, timeout=WAIT)
    assert response.status_code == 200, response.text
    return module_live_server


def users(server, count: int) -> list[UserAccount]:
    return [create_user_over_http(server.url) for _ in range(count)]


def admin_and(user: UserAccount, server: Any, watchers: Any, schema: str) -> tuple[Any, Any]:
    """An administrator's and ``user``'s sockets subscribed to ``schema``. Every subscription of a process
    gets an event in the same pass: once the administrator has one, every other subscription had it."""
    admin, mine = watchers(server.url, ADMIN), watchers(server.url, {"token": user.access_token})
    admin.subscribe(schema=schema)
    mine.subscribe(schema=schema)
    return admin, mine


def events_of(watcher: Any, count: int) -> list[tuple[str, Any]]:
    return [(change["event"], change["document"]) for change in watcher.take(count)]


def test_grant_and_revoke_send_enter_and_leave_and_nothing_leaks(server, watchers):
    api = Access(server.url)
    name = api.access_schema({"title": "String", "secret": "String"})
    alice, bob, carol = users(server, 3)
    owner = watchers(server.url, {"token": alice.access_token})
    reader = watchers(server.url, {"token": bob.access_token})
    outsider = watchers(server.url, {"token": carol.access_token})
    anonymous = watchers(server.url, None)
    admin = watchers(server.url, ADMIN)
    for watcher in (owner, reader, outsider, anonymous, admin):
        watcher.subscribe(schema=name)

    note = api.create(name, {"title": "plan", "secret": "s1"}, headers=alice.headers)
    assert events_of(owner, 1) == [("create", note)]
    assert events_of(admin, 1) == [("create", note)]

    api.share(name, note["_id"], f"User:{bob.id}", alice)
    assert events_of(reader, 1) == [("enter", note)]  # the document, read once for every subscriber
    edited = api.update(name, note["_id"], {"secret": "s2"}, alice)
    assert events_of(reader, 1) == [("update", edited)]
    assert events_of(owner, 1) == [("update", edited)]
    assert events_of(admin, 1) == [("update", edited)]

    api.share(name, note["_id"], f"User:{bob.id}", alice, revoke=True)
    assert events_of(reader, 1) == [("leave", {"_id": note["_id"]})]
    api.update(name, note["_id"], {"secret": "s3"}, alice)  # no longer bob's to see
    assert events_of(owner, 1)[0][0] == "update"
    assert events_of(admin, 1)[0][0] == "update"

    public = api.create(name, {"title": "for all", "secret": "none"}, headers=alice.headers)
    for watcher in (owner, admin):
        assert events_of(watcher, 1) == [("create", public)]
    api.share(name, public["_id"], "*", alice)
    for watcher in (reader, outsider, anonymous):
        assert events_of(watcher, 1) == [("enter", public)]
    api.remove(name, note["_id"], alice)  # only those who could read it hear of it
    for watcher in (owner, admin):
        assert events_of(watcher, 1) == [("delete", {"_id": note["_id"]})]
    api.remove(name, public["_id"], alice)
    for watcher in (reader, outsider, anonymous, owner, admin):
        assert events_of(watcher, 1) == [("delete", {"_id": public["_id"]})]
        watcher.quiet(0.3)


def test_a_replay_carries_the_grants_and_revokes_made_while_away(server, watchers):
    api = Access(server.url)
    name = api.access_schema({"title": "String"})
    alice, bob = users(server, 2)
    # once the admin has the creates, bob's subscription was shown them while he could not read them
    admin, away = admin_and(bob, server, watchers, name)
    later = api.create(name, {"title": "shared while bob is away"}, headers=alice.headers)
    seen = api.create(name, {"title": "shared at once"}, headers=alice.headers)
    admin.take(2)
    api.share(name, seen["_id"], f"User:{bob.id}", alice)
    first = away.next()
    assert (first["event"], first["document"]) == ("enter", seen)
    away.close()

    api.share(name, later["_id"], f"User:{bob.id}", alice)  # no event of the documents themselves
    api.share(name, seen["_id"], f"User:{bob.id}", alice, revoke=True)
    back = watchers(server.url, {"token": bob.access_token})
    back.subscribe(schema=name, since=first["eventId"])
    assert events_of(back, 2) == [("enter", later), ("leave", {"_id": seen["_id"]})]
    back.quiet(0.3)


def test_a_field_change_moves_a_document_between_subscribers(server, watchers):
    api = Access(server.url)
    name = api.access_schema(
        {"title": "String", "assignee": {"type": "Relation", "model": "User"}}, relations={"assignee": "editor"}
    )
    alice, bob, carol = users(server, 3)
    first = watchers(server.url, {"token": bob.access_token})
    second = watchers(server.url, {"token": carol.access_token})
    filtered = watchers(server.url, {"token": carol.access_token})
    for watcher in (first, second):
        watcher.subscribe(schema=name)
    filtered.subscribe(schema=name, where={"title": "open"})

    ticket = api.create(name, {"title": "open", "assignee": bob.id}, headers=alice.headers)
    assert events_of(first, 1) == [("create", ticket)]
    moved = api.update(name, ticket["_id"], {"assignee": carol.id}, alice)
    assert events_of(first, 1) == [("leave", {"_id": ticket["_id"]})]  # the new assignee is not shown to bob
    assert events_of(second, 1) == [("enter", moved)]
    assert events_of(filtered, 1) == [("enter", moved)]
    closed = api.update(name, ticket["_id"], {"title": "closed"}, carol)  # the assignee edits
    assert events_of(second, 1) == [("update", closed)]
    assert events_of(filtered, 1) == [("leave", closed)]  # still readable: it left the filter only
    api.remove(name, ticket["_id"], alice)
    assert events_of(second, 1) == [("delete", {"_id": ticket["_id"]})]
    for watcher in (first, second, filtered):
        watcher.quiet(0.3)


def test_team_join_removal_and_deletion(server, watchers):
    api = Access(server.url)
    name = api.access_schema({"title": "String"})
    alice, bob = users(server, 2)
    team = api.teams("POST", "", alice, 201, json={"name": "team-" + uuid.uuid4().hex[:6]})
    sub_team = api.teams("POST", "", alice, 201, json={"name": "sub", "parentTeam": team["_id"]})
    shared = api.create(name, {"title": "team note"}, headers=alice.headers)
    private = api.create(name, {"title": "alice only"}, headers=alice.headers)
    api.share(name, shared["_id"], f"Team:{team['_id']}", alice)
    member = watchers(server.url, {"token": bob.access_token})
    member.subscribe(schema=name)
    filtered = watchers(server.url, {"token": bob.access_token})
    filtered.subscribe(schema=name, where={"title": "other"})

    # Joining a sub-team: its members act as the team above it too.
    api.teams("POST", f"/{sub_team['_id']}/add", alice, 201, json={"userId": bob.id, "role": "member"})
    assert events_of(member, 1) == [("enter", shared)]
    later = api.create(name, {"title": "by bob"}, headers=bob.headers)
    assert events_of(member, 1) == [("create", later)]
    api.teams("DELETE", f"/{sub_team['_id']}/members", alice, 200, params={"members": bob.id})
    assert events_of(member, 1) == [("leave", {"_id": shared["_id"]})]

    api.teams("POST", f"/{team['_id']}/add", alice, 201, json={"userId": bob.id, "role": "member"})
    assert events_of(member, 1) == [("enter", shared)]
    api.teams("DELETE", f"/{team['_id']}", alice, 200)  # its tuples go with it: a revoke each
    assert events_of(member, 1) == [("leave", {"_id": shared["_id"]})]
    api.update(name, shared["_id"], {"title": "other"}, alice)
    api.update(name, private["_id"], {"title": "other"}, alice)
    for watcher in (member, filtered):
        watcher.quiet(0.5)


def test_a_team_change_moves_the_subscriber_between_audiences(server, watchers):
    """Who an event reaches is looked up among the subscribers by what their access names (users, teams):
    a subscriber whose teams change is found under its new teams for the very next change, and no longer
    under those it left."""
    api = Access(server.url)
    name = api.access_schema({"title": "String", "crew": {"type": "Relation", "model": "Team"}}, {"crew": "reader"})
    alice, bob, carol = users(server, 3)
    team = api.teams("POST", "", alice, 201, json={"name": "team-" + uuid.uuid4().hex[:6]})
    sub_team = api.teams("POST", "", alice, 201, json={"name": "sub", "parentTeam": team["_id"]})
    admin, member = admin_and(bob, server, watchers, name)
    bystander = watchers(server.url, {"token": carol.access_token})
    bystander.subscribe(schema=name)

    first = api.create(name, {"title": "one", "crew": team["_id"]}, headers=alice.headers)
    assert events_of(admin, 1) == [("create", first)]
    api.teams("POST", f"/{sub_team['_id']}/add", alice, 201, json={"userId": bob.id, "role": "member"})
    assert events_of(member, 1) == [("enter", first)]
    second = api.create(name, {"title": "two", "crew": team["_id"]}, headers=alice.headers)
    assert events_of(member, 1) == [("create", second)]
    assert events_of(admin, 1) == [("create", second)]
    api.teams("DELETE", f"/{sub_team['_id']}/members", alice, 200, params={"members": bob.id})
    left = sorted(events_of(member, 2), key=lambda found: found[1]["_id"])
    assert left == sorted(
        [("leave", {"_id": doc["_id"]}) for doc in (first, second)], key=lambda found: found[1]["_id"]
    )
    third = api.create(name, {"title": "three", "crew": team["_id"]}, headers=alice.headers)
    assert events_of(admin, 1) == [("create", third)]
    for watcher in (member, bystander):
        watcher.quiet(0.3)


def within(lines: Iterator[str], seconds: float = WAIT) -> Iterator[str]:
    """A stream's lines, failing once ``seconds`` have passed (heartbeats keep each read short)."""
    deadline = time.monotonic() + seconds
    for line in lines:
        assert time.monotonic() < deadline, "the stream did not bring the events in time"
        yield line


def test_server_sent_events_show_only_readable_documents(server, watchers):
    api = Access(server.url)
    name = api.access_schema({"title": "String"})
    alice, bob = users(server, 2)
    # once one of these has an event, the stream has it too (so each write is applied before the next)
    admin, bob_socket = admin_and(bob, server, watchers, name)
    url = f"{server.url}/database/{name}/changes"
    with requests.get(url, headers=bob.headers, stream=True, timeout=WAIT) as response:
        assert response.status_code == 200
        lines = within(response.iter_lines(decode_unicode=True))
        assert next(lines).startswith(": subscribed")
        hidden = api.create(name, {"title": "hidden"}, headers=alice.headers)
        shown = api.create(name, {"title": "shown"}, headers=alice.headers)
        api.update(name, hidden["_id"], {"title": "hidden still"}, alice)
        admin.take(3)
        api.share(name, shown["_id"], f"User:{bob.id}", alice)
        bob_socket.next()
        api.share(name, shown["_id"], f"User:{bob.id}", alice, revoke=True)
        bob_socket.next()
        mine = api.create(name, {"title": "bob's"}, headers=bob.headers)
        admin.next()
        api.remove(name, hidden["_id"], alice)
        api.remove(name, mine["_id"], bob)
        found, _ = _sse_events(lines, 4)
    assert [(event["event"], event["data"]) for event in found] == [
        ("enter", shown),
        ("leave", {"_id": shown["_id"]}),
        ("create", mine),
        ("delete", {"_id": mine["_id"]}),
    ]
    kept = api.create(name, {"title": "kept"}, headers=bob.headers)
    # A replay judges each change by the access in force when it committed, as the live stream did: the
    # grant and its revoke replay as enter and leave, the create and delete of a document deleted since
    # replay too, and nothing of Alice's hidden document.
    since = int(found[0]["id"]) - 1
    with requests.get(url, params={"since": since}, headers=bob.headers, stream=True, timeout=WAIT) as response:
        replayed, _ = _sse_events(within(response.iter_lines(decode_unicode=True)), 5)
    assert [(event["event"], event["data"]) for event in replayed] == [
        ("enter", shown),
        ("leave", {"_id": shown["_id"]}),
        ("create", mine),
        ("delete", {"_id": mine["_id"]}),
        ("create", kept),
    ]


def test_a_revoke_on_one_process_is_in_force_on_the_other(live_server_factory, redis_url, watchers):
    one = live_server_factory(TRELLIS_REDIS_URL=redis_url)
    two = live_server_factory(TRELLIS_REDIS_URL=redis_url)
    api_one, api_two = Access(one.url), Access(two.url)
    name = api_one.access_schema({"title": "String"})
    alice, bob = users(one, 2)
    # Alice watches on the other process too: once her create has arrived there, that process has
    # delivered it, so Bob, subscribing after, gets the share as enter (a create that reached the other
    # process only after the share would reach Bob as a create of a document he may read by then).
    owner = watchers(two.url, {"token": alice.access_token})
    owner.subscribe(schema=name)
    note = api_one.create(name, {"title": "shared"}, headers=alice.headers)
    assert events_of(owner, 1) == [("create", note)]
    watcher = watchers(two.url, {"token": bob.access_token})
    watcher.subscribe(schema=name)
    api_one.share(name, note["_id"], f"User:{bob.id}", alice)
    assert events_of(watcher, 1) == [("enter", note)]
    assert api_two.http.get(f"{two.url}/database/{name}/{note['_id']}", headers=bob.headers, timeout=WAIT).ok

    api_one.share(name, note["_id"], f"User:{bob.id}", alice, revoke=True)
    response = api_two.http.get(f"{two.url}/database/{name}/{note['_id']}", headers=bob.headers, timeout=WAIT)
    assert response.status_code == 404  # the very next request on the other process
    listed = api_two.http.get(f"{two.url}/database/{name}", headers=bob.headers, timeout=WAIT).json()
    assert listed == {"documents": [], "count": 0}
    assert events_of(watcher, 1) == [("leave", {"_id": note["_id"]})]
    api_one.update(name, note["_id"], {"title": "after"}, alice)
    watcher.quiet(0.5)


def test_a_bulk_load_reaches_exactly_its_readers_in_order(server, watchers):
    """Documents loaded by ``/many`` (their events judged together, a batch's audiences read at once) reach
    each subscriber that its field-backed relation or a grant lets read them, in the order they were made,
    and no one else; the writes right after the load arrive after it."""
    api = Access(server.url)
    name = api.access_schema({"n": "Number", "viewers": [{"type": "Relation", "model": "User"}]}, {"viewers": "reader"})
    people = users(server, 3)
    sockets = [watchers(server.url, {"token": person.access_token}) for person in people]
    admin = watchers(server.url, ADMIN)
    for watcher in (*sockets, admin):
        watcher.subscribe(schema=name)
    readers = [[people[0].id], [people[1].id, people[0].id], []]  # document n: readers[n % 3]; people[2] none
    docs = [{"n": n, "viewers": readers[n % 3]} for n in range(600)]
    loaded = []
    for start in range(0, len(docs), 300):
        response = api.http.post(
            f"{server.url}/database/{name}/many", json={"docs": docs[start : start + 300]}, headers=ADMIN, timeout=WAIT
        )
        assert response.status_code == 201, response.text
        loaded += response.json()["docs"]
    after = api.create(name, {"n": 600, "viewers": [people[2].id]})
    expected = [
        [doc["_id"] for doc in loaded if person.id in doc["viewers"]] + ([after["_id"]] if k == 2 else [])
        for k, person in enumerate(people)
    ]
    for watcher, ids in zip((*sockets, admin), [*expected, [doc["_id"] for doc in [*loaded, after]]], strict=True):
        changes = watcher.take(len(ids))
        assert [change["document"]["_id"] for change in changes] == ids
        assert {change["event"] for change in changes} == {"create"}
    for watcher in (*sockets, admin):
        watcher.quiet(0.3)
