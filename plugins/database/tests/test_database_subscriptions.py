"""Live data over real sockets and streams: Socket.IO clients and an SSE reader against running servers
(eventlet) on the test database — every event kind, filters with enter/leave, permissions, bad input,
replay across a reconnect (each event as it came live), two workers sharing Redis, Server-Sent Events
(Last-Event-ID over since, a client that stops reading), a blocked user's end, Socket.IO's own origin."""

from __future__ import annotations

import json
import os
import queue
import socket
import threading
import time
import uuid
from typing import Any

import pytest
import requests
import socketio
import sqlalchemy as sa

from trellis.db import utcnow
from trellis.models import EventRecord
from trellis.testing.plugin import TEST_MASTER_KEY, reachable_redis
from trellis.testing.sockets import InOrderClient
from trellis_authentication.testing import create_user_over_http

pytestmark = pytest.mark.live

ADMIN = {"masterkey": TEST_MASTER_KEY}
WAIT = 15.0  # seconds; only reached when something is broken
REDIS_URL = os.environ.get("TRELLIS_TEST_DATABASE_REDIS_URL", "redis://127.0.0.1:6379/7")


class Watcher:
    """A Socket.IO client on ``/database/`` recording every ``change`` it receives."""

    def __init__(self, url: str, auth: dict[str, Any] | None, namespace: str = "/database/", **websocket: Any) -> None:
        """``websocket``: options of the websocket connection (``origin``, ``header``)."""
        self.namespace = namespace
        self.changes: queue.Queue = queue.Queue()
        self.disconnected: queue.Queue = queue.Queue()
        self.client = InOrderClient(reconnection=False, websocket_extra_options=websocket)
        self.client.on("change", self.changes.put, namespace=namespace)
        self.client.on("disconnect", lambda *reason: self.disconnected.put(reason), namespace=namespace)
        self.client.connect(
            url,
            socketio_path="realtime",
            namespaces=[namespace],
            transports=["websocket"],
            auth=auth,
            wait_timeout=WAIT,
        )

    def call(self, event: str, data: Any) -> Any:
        return self.client.call(event, data, namespace=self.namespace, timeout=WAIT)

    def subscribe(self, **request: Any) -> str:
        ack = self.call("subscribe", request)
        assert "subscriptionId" in ack, ack
        return ack["subscriptionId"]

    def next(self) -> dict[str, Any]:
        return self.changes.get(timeout=WAIT)

    def take(self, count: int) -> list[dict[str, Any]]:
        return [self.next() for _ in range(count)]

    def quiet(self, seconds: float = 0.5) -> bool:
        try:
            extra = self.changes.get(timeout=seconds)
        except queue.Empty:
            return True
        raise AssertionError(f"unexpected change {extra}")

    def close(self) -> None:
        if self.client.connected:
            self.client.disconnect()


@pytest.fixture()
def watchers():
    opened: list[Watcher] = []

    def connect(
        url: str, auth: dict[str, Any] | None = None, namespace: str = "/database/", **websocket: Any
    ) -> Watcher:
        watcher = Watcher(url, auth, namespace, **websocket)
        opened.append(watcher)
        return watcher

    yield connect
    for watcher in opened:
        watcher.close()


class Api:
    def __init__(self, url: str) -> None:
        self.url = url
        self.http = requests.Session()

    def schema(self, fields: dict[str, Any], **options: Any) -> str:
        name = "Live" + uuid.uuid4().hex[:8]
        body = {"name": name, "fields": fields, **options}
        response = self.http.post(f"{self.url}/admin/database/schemas", json=body, headers=ADMIN, timeout=WAIT)
        assert response.status_code == 201, response.text
        return name

    def create(self, schema: str, doc: dict[str, Any], headers: dict[str, str] = ADMIN) -> dict[str, Any]:
        response = self.http.post(f"{self.url}/database/{schema}", json=doc, headers=headers, timeout=WAIT)
        assert response.status_code == 201, response.text
        return response.json()

    def patch(self, schema: str, doc_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        response = self.http.patch(f"{self.url}/database/{schema}/{doc_id}", json=changes, headers=ADMIN, timeout=WAIT)
        assert response.status_code == 200, response.text
        return response.json()

    def delete(self, schema: str, doc_id: str) -> None:
        response = self.http.delete(f"{self.url}/database/{schema}/{doc_id}", headers=ADMIN, timeout=WAIT)
        assert response.status_code == 200, response.text


@pytest.fixture(scope="module")
def server(module_live_server):
    return module_live_server


def test_every_kind_filters_enter_and_leave(server, watchers):
    api = Api(server.url)
    name = api.schema({"title": "String", "price": "Number"})
    watcher = watchers(server.url, ADMIN)
    everything = watcher.subscribe(schema=name)
    cheap = watcher.subscribe(schema=name, where={"price": {"$lt": 10}})
    deletes = watcher.subscribe(schema=name, events=["delete"])

    a = api.create(name, {"title": "a", "price": 5})
    b = api.create(name, {"title": "b", "price": 50})
    b2 = api.patch(name, b["_id"], {"price": 7})  # enters the filter
    a2 = api.patch(name, a["_id"], {"price": 20})  # leaves it
    api.patch(name, a["_id"], {"title": "a again"})  # outside the filter before and after
    api.delete(name, b["_id"])

    got = watcher.take(11)
    watcher.quiet()
    by_sub: dict[str, list[tuple[str, Any]]] = {}
    for change in got:
        assert change["schema"] == name and change["at"].endswith("Z")
        by_sub.setdefault(change["subscriptionId"], []).append((change["event"], change["document"]))
    assert [event for event, _ in by_sub[everything]] == ["create", "create", "update", "update", "update", "delete"]
    assert by_sub[everything][0][1] == a and by_sub[everything][2][1] == b2
    assert by_sub[cheap] == [("create", a), ("enter", b2), ("leave", a2), ("delete", {"_id": b["_id"]})]
    assert by_sub[deletes] == [("delete", {"_id": b["_id"]})]
    ids = [change["eventId"] for change in got if change["subscriptionId"] == everything]
    assert ids == sorted(ids) and len(set(ids)) == 6
    assert watcher.call("unsubscribe", {"subscriptionId": cheap}) == {"subscriptionId": cheap, "unsubscribed": True}
    api.create(name, {"title": "c", "price": 1})
    assert [change["subscriptionId"] for change in [watcher.next()]] == [everything]
    watcher.quiet()


def test_bad_input_is_an_error_acknowledgement_and_the_connection_stays(server, watchers):
    api = Api(server.url)
    name = api.schema({"title": "String", "price": "Number"})
    watcher = watchers(server.url, None, namespace="/database")  # the spelling without the slash works too
    cases = [
        ({"schema": "NoSuchSchema"}, 404, "NOT_FOUND"),
        ({"schema": name, "where": {"price": {"$near": 1}}}, 400, "INVALID_ARGUMENTS"),
        ({"schema": name, "where": {"nope": 1}}, 400, "INVALID_ARGUMENTS"),
        ({"schema": name, "where": {"price": "cheap"}}, 400, "INVALID_ARGUMENTS"),
        ({"schema": name, "where": "price<3"}, 400, "INVALID_ARGUMENTS"),
        ({"schema": name, "since": "abc"}, 400, "INVALID_ARGUMENTS"),
        ({"schema": name, "since": -1}, 400, "INVALID_ARGUMENTS"),
        ({"schema": name, "since": 10**12}, 400, "INVALID_ARGUMENTS"),
        ({"schema": name, "events": ["explode"]}, 400, "INVALID_ARGUMENTS"),
        ({"schema": name, "extra": 1}, 400, "INVALID_ARGUMENTS"),
        ({"schema": 5}, 400, "INVALID_ARGUMENTS"),
        ("just text", 400, "INVALID_ARGUMENTS"),
    ]
    for request, status, error_name in cases:
        ack = watcher.call("subscribe", request)
        assert set(ack) == {"error"}, (request, ack)
        assert ack["error"]["status"] == status and ack["error"]["name"] == error_name, (request, ack)
        assert ack["error"]["message"]
    missing = watcher.call("unsubscribe", {"subscriptionId": "nope"})
    assert missing["error"]["status"] == 404
    for _ in range(100):
        watcher.subscribe(schema=name)
    flood = watcher.call("subscribe", {"schema": name})
    assert flood["error"]["status"] == 400 and "100" in flood["error"]["message"]
    assert watcher.client.connected
    api.create(name, {"title": "still served"})
    assert {watcher.next()["document"]["title"] for _ in range(100)} == {"still served"}


def test_access_follows_the_list_rules(server, watchers):
    api = Api(server.url)
    crud = {"read": {"enabled": True, "authenticated": True}, "create": {"enabled": True, "authenticated": False}}
    members = api.schema({"title": "String"}, modelOptions={"conduit": {"cms": {"crudOperations": crud}}})
    hidden_crud = {"read": {"enabled": False, "authenticated": False}}
    hidden = api.schema({"title": "String"}, modelOptions={"conduit": {"cms": {"crudOperations": hidden_crud}}})
    user = create_user_over_http(server.url)

    anonymous = watchers(server.url, None)
    assert anonymous.call("subscribe", {"schema": members})["error"]["status"] == 401
    assert anonymous.call("subscribe", {"schema": hidden})["error"]["status"] == 404
    member = watchers(server.url, {"token": user.access_token})
    member.subscribe(schema=members)
    assert member.call("subscribe", {"schema": hidden})["error"]["status"] == 404
    admin = watchers(server.url, ADMIN)
    admin.subscribe(schema=hidden)
    api.create(members, {"title": "for members"})
    assert member.next()["document"]["title"] == "for members"
    anonymous.quiet(0.3)

    for auth in ({"token": "not-a-token"}, {"masterkey": "wrong"}, "text"):
        seen: list[Any] = []
        client = socketio.Client(reconnection=False)
        client.on("connect_error", seen.append, namespace="/database/")
        with pytest.raises(socketio.exceptions.ConnectionError):
            client.connect(
                server.url,
                socketio_path="realtime",
                namespaces=["/database/"],
                transports=["websocket"],
                auth=auth,
                wait_timeout=WAIT,
            )
        assert seen and seen[0]["data"]["status"] == 401, (auth, seen)


def test_a_watcher_hands_changes_on_in_the_order_the_server_sent_them(server, watchers):
    """The tests' client itself (``trellis.testing.sockets.InOrderClient``): five changes of one ``/many``
    write go out in one socket write; handling the first takes a while, and the others still come after
    it. python-socketio's own client starts a thread per message: there they overtook it."""
    api = Api(server.url)
    name = api.schema({"n": "Number"})
    seen: list[int] = []
    done = threading.Event()

    def on_change(change: dict[str, Any]) -> None:
        if change["document"]["n"] == 0:
            time.sleep(0.2)
        seen.append(change["document"]["n"])
        if len(seen) == 5:
            done.set()

    watcher = watchers(server.url, ADMIN)
    watcher.client.on("change", on_change, namespace=watcher.namespace)
    watcher.subscribe(schema=name)
    docs = [{"n": n} for n in range(5)]
    response = api.http.post(f"{server.url}/database/{name}/many", json={"docs": docs}, headers=ADMIN, timeout=WAIT)
    assert response.status_code == 201, response.text
    assert done.wait(WAIT)
    assert seen == [0, 1, 2, 3, 4]


def test_replay_across_a_reconnect_loses_nothing_and_repeats_nothing(server, watchers, app):
    api = Api(server.url)
    name = api.schema({"n": "Number"})
    first = watchers(server.url, ADMIN)
    first.subscribe(schema=name)
    api.create(name, {"n": 0})
    last = first.next()["eventId"]
    first.close()

    # Written while disconnected, and while the new subscription replays: a writer that never pauses.
    missed = [api.create(name, {"n": n}) for n in range(1, 4)]
    stop = threading.Event()
    written: list[int] = []

    def write() -> None:
        writer = Api(server.url)
        n = 100
        while not stop.is_set():
            writer.create(name, {"n": n})
            written.append(n)
            n += 1

    thread = threading.Thread(target=write)
    thread.start()
    try:
        time.sleep(0.2)
        second = watchers(server.url, ADMIN)
        second.subscribe(schema=name, since=last)
        time.sleep(0.5)
    finally:
        stop.set()
        thread.join()
    expected = [doc["n"] for doc in missed] + written
    got = second.take(len(expected))
    second.quiet()
    assert [change["document"]["n"] for change in got] == expected
    ids = [change["eventId"] for change in got]
    assert ids == sorted(set(ids)) and ids[0] > last

    # Older than the log keeps: the family was pruned past ``since`` (as the retention job does).
    prune_below(app, f"database.{name}", ids[-1])
    ack = second.call("subscribe", {"schema": name, "since": last})
    assert ack["error"] == {
        "name": "RESYNC_REQUIRED",
        "status": 410,
        "message": ack["error"]["message"],
    }, ack


def prune_below(app, family: str, keep_from: int, retention_count: int = 10_000) -> None:
    """Delete the family's events below ``keep_from`` and pad the family to the retention count, as a
    pruned family looks (the retention job keeps its last N)."""
    table = EventRecord.__table__
    engine = app.extensions["trellis"].engine
    with engine.begin() as connection:
        connection.execute(table.delete().where(table.c.family == family, table.c.event_id < keep_from))
        kept = connection.execute(sa.select(sa.func.count()).select_from(table).where(table.c.family == family))
        base = connection.execute(sa.select(sa.func.max(table.c.event_id))).scalar_one()
        now = utcnow()
        padding = [
            {"event_id": base + i, "topic": family + ".pad", "family": family, "payload": "{}", "created_at": now}
            for i in range(1, retention_count - kept.scalar_one() + 1)
        ]
        if padding:
            connection.execute(table.insert(), padding)


@pytest.fixture()
def redis_url() -> str:
    return reachable_redis(REDIS_URL)


def test_two_workers_sharing_redis(live_server_factory, redis_url, watchers):
    one = live_server_factory(TRELLIS_REDIS_URL=redis_url)
    two = live_server_factory(TRELLIS_REDIS_URL=redis_url)
    api_one, api_two = Api(one.url), Api(two.url)
    name = api_one.schema({"n": "Number"})
    watcher = watchers(two.url, ADMIN)
    watcher.subscribe(schema=name, where={"n": {"$gte": 10}})
    for n in range(20):
        (api_one if n % 2 else api_two).create(name, {"n": n})
    got = watcher.take(10)
    watcher.quiet()
    assert [change["document"]["n"] for change in got] == list(range(10, 20))
    ids = [change["eventId"] for change in got]
    assert ids == sorted(set(ids))


def _sse_events(lines: Any, count: int) -> tuple[list[dict[str, Any]], list[str]]:
    """Read ``count`` events (and the comments met on the way) from an event stream's lines."""
    found: list[dict[str, Any]] = []
    comments: list[str] = []
    current: dict[str, Any] = {}
    for line in lines:
        if line.startswith(":"):
            comments.append(line)
        elif line == "":
            if current:
                found.append(current)
                current = {}
                if len(found) == count:
                    break
        else:
            key, _, value = line.partition(": ")
            current[key] = json.loads(value) if key == "data" else value
    return found, comments


def test_server_sent_events(live_server_factory):
    server = live_server_factory(TRELLIS_SSE_HEARTBEAT_SECONDS="0.3")
    api = Api(server.url)
    name = api.schema({"title": "String", "price": "Number"})
    first = api.create(name, {"title": "before", "price": 1})
    url = f"{server.url}/database/{name}/changes"
    assert requests.get(url, params={"price[$near]": 1}, timeout=WAIT).json()["status"] == 400
    assert requests.get(url, params={"since": "x"}, timeout=WAIT).json()["name"] == "INVALID_ARGUMENTS"
    assert requests.get(f"{server.url}/database/Nope/changes", timeout=WAIT).status_code == 404
    with requests.get(url, params={"price[$lt]": 10, "since": 0}, stream=True, timeout=WAIT) as response:
        assert response.status_code == 200
        assert response.headers["Content-Type"].startswith("text/event-stream")
        lines = response.iter_lines(decode_unicode=True)
        api.create(name, {"title": "dear", "price": 99})
        cheap = api.create(name, {"title": "cheap", "price": 2})
        api.patch(name, first["_id"], {"price": 50})
        found, comments = _sse_events(lines, 3)
        more, heartbeat = _next_comment(lines)  # nothing else happens: a heartbeat (0.3 s here) comes
    assert [(event["event"], event["data"]["title"]) for event in found] == [
        ("create", "before"),
        ("create", "cheap"),
        ("leave", "before"),
    ]
    assert found[1]["data"] == cheap
    assert comments[0].startswith(": subscribed")
    assert heartbeat == ": heartbeat" and more == []
    last = int(found[1]["id"])
    # Reconnect with the standard header: the events after it, nothing before.
    with requests.get(url, headers={"Last-Event-ID": str(last)}, stream=True, timeout=WAIT) as response:
        again, _ = _sse_events(response.iter_lines(decode_unicode=True), 1)
    assert again[0]["event"] == "update" and int(again[0]["id"]) > last

    spec = requests.get(f"{server.url}/openapi.json", timeout=WAIT).json()
    operation = spec["paths"][f"/database/{name}/changes"]["get"]
    assert "text/event-stream" in operation["responses"]["200"]["content"]
    assert {"400", "401", "404", "410"} <= set(operation["responses"])


def _next_comment(lines: Any) -> tuple[list[str], str | None]:
    """The lines before the next comment, and that comment."""
    before: list[str] = []
    for line in lines:
        if line.startswith(":"):
            return before, line
        if line:
            before.append(line)
    return before, None


def test_a_blocked_users_subscriptions_end(server, watchers):
    api = Api(server.url)
    crud = {"read": {"enabled": True, "authenticated": True}}
    name = api.schema({"title": "String"}, modelOptions={"conduit": {"cms": {"crudOperations": crud}}})
    user, other = create_user_over_http(server.url), create_user_over_http(server.url)
    blocked = watchers(server.url, {"token": user.access_token})
    blocked.subscribe(schema=name)
    bystander = watchers(server.url, {"token": other.access_token})
    bystander.subscribe(schema=name)
    stream = requests.get(f"{server.url}/database/{name}/changes", headers=user.headers, stream=True, timeout=WAIT)
    lines = stream.iter_lines(decode_unicode=True)
    assert next(lines).startswith(": subscribed")

    response = requests.put(f"{server.url}/authentication/users/{user.id}/block", headers=ADMIN, timeout=WAIT)
    assert response.status_code == 200, response.text
    blocked.disconnected.get(timeout=WAIT)
    assert list(lines) == [""]  # the stream ended
    stream.close()
    api.create(name, {"title": "after the block"})
    assert bystander.next()["document"]["title"] == "after the block"
    assert blocked.changes.empty()


def test_a_replay_gives_each_event_as_it_came_live(server, watchers):
    """Replayed after ``since`` (Socket.IO and SSE): every event with its own kind and document, the
    change a live subscriber received, with and without a filter."""
    api = Api(server.url)
    name = api.schema({"title": "String", "price": "Number"})
    live = watchers(server.url, ADMIN)
    everything = live.subscribe(schema=name)
    cheap = live.subscribe(schema=name, where={"price": {"$lt": 10}})
    a = api.create(name, {"title": "a", "price": 5})
    b = api.create(name, {"title": "b", "price": 50})
    api.patch(name, b["_id"], {"price": 7})  # enters the filter
    api.patch(name, a["_id"], {"price": 20})  # leaves it
    api.delete(name, b["_id"])
    got = live.take(9)

    def seen(changes: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(c["eventId"], c["event"], c["document"], c["at"]) for c in changes]

    expected = {
        "all": seen([c for c in got if c["subscriptionId"] == everything]),
        "cheap": seen([c for c in got if c["subscriptionId"] == cheap]),
    }
    assert [kind for _, kind, _, _ in expected["all"]] == ["create", "create", "update", "update", "delete"]
    assert [kind for _, kind, _, _ in expected["cheap"]] == ["create", "enter", "leave", "delete"]
    since = expected["all"][0][0] - 1

    later = watchers(server.url, ADMIN)
    replayed_all = later.subscribe(schema=name, since=since)
    replayed_cheap = later.subscribe(schema=name, where={"price": {"$lt": 10}}, since=since)
    replayed = later.take(9)
    later.quiet()
    assert seen([c for c in replayed if c["subscriptionId"] == replayed_all]) == expected["all"]
    assert seen([c for c in replayed if c["subscriptionId"] == replayed_cheap]) == expected["cheap"]

    url = f"{server.url}/database/{name}/changes"
    for key, params in (("all", {}), ("cheap", {"price[$lt]": 10})):
        with requests.get(url, params={**params, "since": since}, headers=ADMIN, stream=True, timeout=WAIT) as response:
            found, _ = _sse_events(response.iter_lines(decode_unicode=True), len(expected[key]))
        assert [(int(e["id"]), e["event"], e["data"]) for e in found] == [c[:3] for c in expected[key]]


def test_last_event_id_wins_over_since(server):
    """An ``EventSource`` opened with ``?since=N`` reconnects to the same URL with ``Last-Event-ID``: the
    header is where it stopped, so the replay starts there (not at N again)."""
    api = Api(server.url)
    name = api.schema({"n": "Number"})
    url = f"{server.url}/database/{name}/changes"
    with requests.get(url, params={"since": 0}, stream=True, timeout=WAIT) as response:
        lines = response.iter_lines(decode_unicode=True)
        for n in range(3):
            api.create(name, {"n": n})
        first, _ = _sse_events(lines, 3)
    with requests.get(
        url, params={"since": 0}, headers={"Last-Event-ID": first[1]["id"]}, stream=True, timeout=WAIT
    ) as response:
        again, _ = _sse_events(response.iter_lines(decode_unicode=True), 1)
    assert again[0]["id"] == first[2]["id"] and again[0]["data"]["n"] == 2
    bad = requests.get(url, params={"since": 0}, headers={"Last-Event-ID": "x"}, timeout=WAIT)
    assert bad.status_code == 400 and "Last-Event-ID" in bad.json()["errors"]

    # A browser's EventSource polyfill sends the header itself: the preflight must allow it.
    preflight = requests.options(
        url,
        headers={
            "Origin": "https://app.example",
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "last-event-id",
        },
        timeout=WAIT,
    )
    allowed = {h.strip().lower() for h in preflight.headers.get("Access-Control-Allow-Headers", "").split(",")}
    assert "last-event-id" in allowed, preflight.headers


def _raw_stream(port: int, path: str, headers: dict[str, str]) -> socket.socket:
    """An HTTP/1.0 GET (a plain body, ended by closing) on a socket with a small receive buffer, its
    response head read."""
    reader = socket.socket()
    reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window: the server fills it fast
    reader.settimeout(WAIT)
    reader.connect(("127.0.0.1", port))
    head = "".join(f"{key}: {value}\r\n" for key, value in headers.items())
    reader.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n{head}\r\n".encode())
    received = b""
    while not (b": subscribed" in received and received.endswith(b"\n\n")):
        received += reader.recv(4096)
    assert received.startswith(b"HTTP/1.1 200"), received
    return reader


def _complete_events(body: bytes) -> list[dict[str, Any]]:
    """The events of an SSE body that ended (a last event cut by the end is dropped, as a client does)."""
    frames = body.decode().split("\n\n")[:-1]
    found = []
    for frame in frames:
        fields = dict(line.split(": ", 1) for line in frame.split("\n") if not line.startswith(":") and line)
        if fields:
            found.append({"id": int(fields["id"]), "data": json.loads(fields["data"])})
    return found


def test_a_stream_whose_client_stops_reading_is_disconnected_and_resumes(live_server_factory):
    """A client that stops reading falls behind by more than the stream's buffer: the server ends its
    stream (nothing more piles up for it), and the client resumes as an ``EventSource`` does, from the same
    URL with ``Last-Event-ID`` when it received an event (``since`` otherwise), missing nothing."""
    server = live_server_factory(TRELLIS_SSE_BUFFER_BYTES=str(64 * 1024))
    api = Api(server.url)
    name = api.schema({"n": "Number", "text": {"type": "String", "index": False}})
    path = f"/database/{name}/changes?since=0"
    reader = _raw_stream(server.port, path, ADMIN)
    filler = "x" * 10_000
    total = 400  # 4 MB: more than the buffer and the sockets' buffers hold
    for start in range(0, total, 2):
        docs = [{"n": n, "text": filler} for n in range(start, start + 2)]
        response = api.http.post(f"{server.url}/database/{name}/many", json={"docs": docs}, headers=ADMIN, timeout=WAIT)
        assert response.status_code == 201, response.text

    body = b""
    deadline = time.monotonic() + WAIT  # heartbeats would keep an open stream's reads from timing out
    with reader:
        while chunk := reader.recv(65536):  # until the server closes it
            body += chunk
            assert time.monotonic() < deadline, "the stream of a client that fell behind stayed open"
    first = _complete_events(body)
    assert len(first) < total
    assert [event["data"]["n"] for event in first] == list(range(len(first)))

    headers = {**ADMIN, "Last-Event-ID": str(first[-1]["id"])} if first else ADMIN
    with requests.get(server.url + path, headers=headers, stream=True, timeout=WAIT) as response:
        rest, _ = _sse_events(response.iter_lines(decode_unicode=True), total - len(first))
    assert [event["data"]["n"] for event in first + rest] == list(range(total))
    ids = [event["id"] for event in first] + [int(event["id"]) for event in rest]
    assert ids == sorted(set(ids))


def test_socketio_accepts_its_own_origin_when_cors_origins_are_listed(live_server_factory, watchers):
    """python-socketio sends ``Origin: <server URL>`` on the websocket upgrade: same-origin is accepted
    whatever ``TRELLIS_CORS_ORIGINS`` lists (behind a trusted proxy, the forwarded address is the server's);
    a listed origin is accepted, any other refused."""
    listed = "https://app.example"
    server = live_server_factory(TRELLIS_CORS_ORIGINS=listed, TRELLIS_PROXY_COUNT="1")
    api = Api(server.url)
    name = api.schema({"n": "Number"})
    proxied = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "api.example"}
    own = watchers(server.url, ADMIN)  # websocket only: no polling to fall back on
    behind_proxy = watchers(server.url, ADMIN, origin="https://api.example", header=proxied)
    from_listed = watchers(server.url, ADMIN, origin=listed)
    for watcher in (own, behind_proxy, from_listed):
        watcher.subscribe(schema=name)
    api.create(name, {"n": 1})
    for watcher in (own, behind_proxy, from_listed):
        assert watcher.next()["document"]["n"] == 1
    for origin, header in (("https://evil.example", {}), ("https://evil.example", proxied), (server.url, proxied)):
        with pytest.raises(socketio.exceptions.ConnectionError):
            watchers(server.url, ADMIN, origin=origin, header=header)
