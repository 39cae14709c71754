"""The Socket.IO channel against a real eventlet server (``chat_server``), driven by python-socketio clients."""

from __future__ import annotations

import queue
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from trellis.testing.plugin import TEST_MASTER_KEY
from trellis_authentication.testing import create_user_over_http

pytestmark = pytest.mark.live

ADMIN = {"masterkey": TEST_MASTER_KEY}


def test_connect_needs_a_valid_user_token(chat_server, refused, sockets):
    url = chat_server.url
    missing = refused(url, None)
    assert missing["data"] == {"name": "UNAUTHORIZED", "status": 401, "message": missing["message"]}
    assert refused(url, "not-a-jwt")["data"]["status"] == 401
    admin_token = requests.post(
        f"{url}/login", json={"username": "admin", "password": "admin-password"}, headers=ADMIN, timeout=10
    ).json()["token"]
    assert refused(url, admin_token)["data"]["status"] == 403

    user = create_user_over_http(url)
    assert sockets(url, user.access_token).client.connected
    assert sockets(url, user.access_token, namespace="/chat").client.connected


def test_messages_reach_participants_only_and_are_stored(chat_server, http, sockets):
    api = http(chat_server.url)
    alice, bob, carol = (create_user_over_http(chat_server.url) for _ in range(3))
    room = api.create_room(alice, [bob.id])
    carols_room = api.create_room(carol, [alice.id])
    a, b, c = (sockets(chat_server.url, u.access_token) for u in (alice, bob, carol))

    ack = a.call("message", room, "hello bob")
    assert set(ack) == {"_id", "room", "sender", "message", "createdAt"}
    assert (ack["room"], ack["sender"], ack["message"]) == (room, alice.id, "hello bob")
    assert b.next() == ack and a.next() == ack  # the sender's own sockets get it too

    a.call("message", carols_room, "hello carol")
    assert c.texts_until("hello carol") == ["hello carol"]  # carol never saw the message to bob

    stored = requests.get(f"{chat_server.url}/chat/rooms/{room}/messages", headers=bob.headers, timeout=10).json()
    assert stored == {"messages": [ack], "count": 1}


def test_rest_messages_and_deletions_reach_sockets_on_both_namespaces(chat_server, http, sockets):
    api = http(chat_server.url)
    alice, bob = create_user_over_http(chat_server.url), create_user_over_http(chat_server.url)
    room = api.create_room(alice, [bob.id])
    slash = sockets(chat_server.url, bob.access_token, "/chat/")
    plain = sockets(chat_server.url, bob.access_token, "/chat")

    sent = api.send(alice, room, "over REST")
    assert slash.next() == sent and plain.next() == sent

    deleted = requests.delete(f"{chat_server.url}/chat/messages/{sent['_id']}", headers=alice.headers, timeout=10)
    assert deleted.status_code == 200
    assert slash.next("messageDeleted") == {"_id": sent["_id"], "room": room}


def test_socket_errors_come_back_in_the_acknowledgement(chat_server, http, sockets):
    api = http(chat_server.url)
    alice, bob = create_user_over_http(chat_server.url), create_user_over_http(chat_server.url)
    room = api.create_room(alice, [])
    b = sockets(chat_server.url, bob.access_token)

    assert b.call("message", room, "intrusion")["error"]["status"] == 404
    assert b.call("join", room)["error"]["status"] == 404
    a = sockets(chat_server.url, alice.access_token)
    assert a.call("message", room, "")["error"]["status"] == 400
    assert a.call("message", {"roomId": room, "message": "as one object"})["message"] == "as one object"
    listed = requests.get(f"{chat_server.url}/chat/rooms/{room}/messages", headers=alice.headers, timeout=10).json()
    assert [m["message"] for m in listed["messages"]] == ["as one object"]


def test_join_and_leave_a_room_on_one_socket(chat_server, http, sockets):
    api = http(chat_server.url)
    alice, bob = create_user_over_http(chat_server.url), create_user_over_http(chat_server.url)
    room = api.create_room(alice, [bob.id])
    other = api.create_room(alice, [bob.id])
    b = sockets(chat_server.url, bob.access_token)

    assert b.call("leave", room) == {"roomId": room, "left": True}
    api.send(alice, room, "while away")
    api.send(alice, other, "marker")
    assert b.texts_until("marker") == ["marker"]

    assert b.call("join", room) == {"roomId": room, "joined": True}
    api.send(alice, room, "back")
    assert b.next()["message"] == "back"
    assert b.call("leave", f"user:{bob.id}")["error"]["status"] == 400  # its own user room is not a chat room


def test_room_membership_changes_reach_connected_sockets(chat_server, http, sockets):
    api = http(chat_server.url)
    alice, bob, dave = (create_user_over_http(chat_server.url) for _ in range(3))
    b, d = sockets(chat_server.url, bob.access_token), sockets(chat_server.url, dave.access_token)

    room = api.create_room(alice, [bob.id])  # bob was connected before the room existed
    api.send(alice, room, "welcome bob")
    assert b.next()["message"] == "welcome bob"

    added = api.put(f"/chat/rooms/{room}/addUsers", alice.headers, {"users": [dave.id]})
    assert added.status_code == 200
    api.send(alice, room, "welcome dave")
    assert d.next()["message"] == "welcome dave"

    assert api.put(f"/chat/leave/{room}", bob.headers).status_code == 200
    dm = api.create_room(alice, [bob.id])
    api.send(alice, room, "bob is gone")
    api.send(alice, dm, "marker")
    assert b.texts_until("marker") == ["welcome dave", "marker"]

    deleted = requests.delete(f"{chat_server.url}/admin/chat/rooms/{room}", headers=ADMIN, timeout=10)
    assert deleted.status_code == 200
    assert d.next("roomDeleted") == {"_id": room}


def test_blocking_a_user_disconnects_their_sockets(chat_server, http, sockets, refused):
    api = http(chat_server.url)
    alice, bob = create_user_over_http(chat_server.url), create_user_over_http(chat_server.url)
    room = api.create_room(alice, [bob.id])
    first, second = sockets(chat_server.url, bob.access_token), sockets(chat_server.url, bob.access_token, "/chat")
    watcher = sockets(chat_server.url, alice.access_token)

    assert api.put(f"/authentication/users/{bob.id}/block", ADMIN).status_code == 200
    first.disconnected.get(timeout=10)
    second.disconnected.get(timeout=10)
    refusal = refused(chat_server.url, bob.access_token)
    assert refusal["data"] == {"name": "FORBIDDEN", "status": 403, "message": "This user is blocked"}
    api.send(alice, room, "still here")
    assert watcher.next()["message"] == "still here"


def test_deleting_a_user_disconnects_their_sockets(chat_server, http, sockets):
    api = http(chat_server.url)
    alice, bob = create_user_over_http(chat_server.url), create_user_over_http(chat_server.url)
    room = api.create_room(alice, [bob.id])
    b = sockets(chat_server.url, bob.access_token)

    gone = requests.delete(f"{chat_server.url}/authentication/users/{bob.id}", headers=ADMIN, timeout=10)
    assert gone.status_code == 200
    b.disconnected.get(timeout=10)
    room_now = requests.get(f"{chat_server.url}/chat/rooms/{room}", headers=alice.headers, timeout=10).json()
    assert room_now["participants"] == [alice.id]


# A session idle in its transaction this long, unchanged, was left so (a pass stalled by a loaded machine ends).
LEAKED_AFTER_SECONDS = 5.0


def test_many_events_on_one_socket_hold_no_database_session(chat_server, http, sockets, app_config):
    """Each event ends its session: leaked ones would exhaust the pool (and stay idle in transaction)."""
    api = http(chat_server.url)
    alice = create_user_over_http(chat_server.url)
    room = api.create_room(alice, [])
    a = sockets(chat_server.url, alice.access_token)
    for n in range(40):
        assert a.call("join", room) == {"roomId": room, "joined": True}
        assert a.call("message", room, f"n{n}")["message"] == f"n{n}"
    if app_config["DATABASE_URL"].startswith("postgresql"):
        import psycopg2
        from sqlalchemy.engine import make_url

        url = make_url(app_config["DATABASE_URL"])
        # A leaked event session is idle in a transaction after its last statement, for good: the same backend
        # in the same state (same state_change) however long one looks. Background passes (event log,
        # webhooks) are so for an instant, longer on a loaded machine (CI caught a webhook pass idle after its
        # SELECT through 30 looks 0.1 s apart), and under load a pooled connection was seen idle right after a
        # bare BEGIN (no statement, so no snapshot or lock held): neither is counted here.
        with psycopg2.connect(host=url.host, port=url.port or 5432, user=url.username, dbname="postgres") as conn:
            conn.autocommit = True
            with conn.cursor() as cur:
                first_seen: dict[tuple, float] = {}
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    cur.execute(
                        "SELECT pid, state_change, query FROM pg_stat_activity WHERE datname = %s"
                        " AND state = 'idle in transaction' AND query NOT LIKE 'BEGIN%%'",
                        (url.database,),
                    )
                    idle = {(pid, changed): query for pid, changed, query in cur.fetchall()}
                    if not idle:
                        break
                    now = time.monotonic()
                    first_seen = {key: first_seen.get(key, now) for key in idle}
                    stuck = [query for key, query in idle.items() if now - first_seen[key] >= LEAKED_AFTER_SECONDS]
                    assert stuck == []
                    time.sleep(0.1)


def test_an_inactive_module_refuses_sockets(chat_server, refused, sockets):
    user = create_user_over_http(chat_server.url)
    config = f"{chat_server.url}/config/chat"
    assert requests.put(config, json={"active": False}, headers=ADMIN, timeout=10).status_code == 200
    try:
        assert refused(chat_server.url, user.access_token)["data"]["status"] == 404
    finally:
        assert requests.put(config, json={"active": True}, headers=ADMIN, timeout=10).status_code == 200
    assert sockets(chat_server.url, user.access_token).client.connected


def test_a_busy_socket_and_an_idle_one_receive_a_burst_in_the_same_order(chat_server, http, sockets):
    """Room emits are written straight to idle sockets and queued behind pending packets on busy ones
    (``trellis.server.socket_fanout``): every socket of the room still gets every message in emit order."""
    api = http(chat_server.url)
    alice, bob = create_user_over_http(chat_server.url), create_user_over_http(chat_server.url)
    room = api.create_room(alice, [bob.id])
    a, b = sockets(chat_server.url, alice.access_token), sockets(chat_server.url, bob.access_token)
    acks: queue.Queue = queue.Queue()
    # Alice's socket is kept busy with acknowledgements (queued packets) while bob sends over REST. Waves
    # of 10 events: each event holds a database connection, and the shared PostgreSQL has few to spare.
    acknowledged = []
    with ThreadPoolExecutor(1) as pool:
        rest = pool.submit(lambda: [api.send(bob, room, f"rest {n}")["message"] for n in range(20)])
        for wave in range(6):
            for n in range(wave * 10, wave * 10 + 10):
                a.client.emit("message", (room, f"socket {n}"), namespace=a.namespace, callback=lambda *r: acks.put(r))
            acknowledged += [acks.get(timeout=30)[0] for _ in range(10)]
        assert rest.result() == [f"rest {n}" for n in range(20)]
    assert sorted(ack.get("message") or str(ack) for ack in acknowledged) == sorted(f"socket {n}" for n in range(60))
    received_by_alice = [a.next()["message"] for _ in range(80)]
    received_by_bob = [b.next()["message"] for _ in range(80)]
    assert received_by_alice == received_by_bob
    assert sorted(received_by_bob) == sorted([f"socket {n}" for n in range(60)] + [f"rest {n}" for n in range(20)])
