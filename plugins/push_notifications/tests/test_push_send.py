"""Admin sends on the outbox provider: send, sendMany, sendToTopic, the outbox, validation, query count."""

from __future__ import annotations

import contextlib
import threading

import pytest
from sqlalchemy import event


def outbox(client, headers, **query):
    response = client.get("/admin/pushNotifications/outbox", query_string=query, headers=headers)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def deliveries(client, headers, notification_id, **query):
    response = client.get(
        f"/admin/pushNotifications/outbox/{notification_id}/deliveries", query_string=query, headers=headers
    )
    assert response.status_code == 200, response.get_json()
    return response.get_json()


@contextlib.contextmanager
def count_statements(app):
    statements: list[str] = []
    me = threading.get_ident()

    def record(conn, cursor, statement, parameters, context, executemany):
        # The test's own transaction wraps each request in savepoints; those are not the route's work, and
        # neither is what the app's background threads run meanwhile (outboxes, the event log: seen in a
        # full run, 7 statements counted for 3).
        if "SAVEPOINT" not in statement and threading.get_ident() == me:
            statements.append(statement)

    engine = app.extensions["trellis"].engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", record)


def test_send_reaches_every_device_of_the_user(client, admin_headers, make_user, register):
    alice, bob = make_user(), make_user()
    register(alice, "alice-phone", "android")
    register(alice, "alice-browser", "web")
    register(bob, "bob-phone", "ios")
    body = {"userId": alice.id, "title": "Hello", "body": "World", "data": {"orderId": "42"}}
    response = client.post("/admin/pushNotifications/send", json=body, headers=admin_headers)
    assert response.status_code == 200, response.get_json()
    assert response.get_json() == {"sent": 2, "failed": 0}
    listed = outbox(client, admin_headers)
    assert listed["count"] == 1
    (record,) = listed["notifications"]
    assert {k: v for k, v in record.items() if k not in ("_id", "createdAt")} == {
        "target": "user",
        "topic": None,
        "userIds": [alice.id],
        "title": "Hello",
        "body": "World",
        "data": {"orderId": "42"},
        "provider": "outbox",
        "sent": 2,
        "failed": 0,
    }
    assert record["_id"] and record["createdAt"].endswith("Z")
    devices = deliveries(client, admin_headers, record["_id"])
    assert devices["count"] == 2
    assert sorted((d["token"], d["platform"], d["userId"], d["status"]) for d in devices["deliveries"]) == [
        ("alice-browser", "web", alice.id, "sent"),
        ("alice-phone", "android", alice.id, "sent"),
    ]


def test_send_to_user_without_devices_is_still_recorded(client, admin_headers, user):
    response = client.post(
        "/admin/pushNotifications/send", json={"userId": user.id, "title": "t", "body": "b"}, headers=admin_headers
    )
    assert response.status_code == 200
    assert response.get_json() == {"sent": 0, "failed": 0}
    (record,) = outbox(client, admin_headers)["notifications"]
    assert (record["sent"], record["failed"]) == (0, 0)
    assert deliveries(client, admin_headers, record["_id"])["count"] == 0


def test_send_to_unknown_user_is_404(client, admin_headers):
    response = client.post(
        "/admin/pushNotifications/send", json={"userId": "nobody", "title": "t", "body": "b"}, headers=admin_headers
    )
    assert response.status_code == 404
    assert response.get_json()["name"] == "NOT_FOUND"


def test_send_with_admin_bearer(client, admin_token, user, register):
    register(user, "phone")
    headers = {"Authorization": f"Bearer {admin_token}"}
    response = client.post(
        "/admin/pushNotifications/send", json={"userId": user.id, "title": "t", "body": "b"}, headers=headers
    )
    assert response.get_json() == {"sent": 1, "failed": 0}


def test_send_many(client, admin_headers, make_user, register):
    users = [make_user() for _ in range(3)]
    register(users[0], "u0")
    register(users[1], "u1a")
    register(users[1], "u1b", "ios")
    register(users[2], "u2")
    ids = [users[0].id, users[1].id, users[1].id, "not-a-user"]
    response = client.post(
        "/admin/pushNotifications/sendMany", json={"userIds": ids, "title": "t", "body": "b"}, headers=admin_headers
    )
    assert response.status_code == 200
    assert response.get_json() == {"sent": 3, "failed": 0}  # the repeated id is served once
    (record,) = outbox(client, admin_headers)["notifications"]
    assert record["target"] == "users"
    assert record["userIds"] == [users[0].id, users[1].id, "not-a-user"]
    assert {d["token"] for d in deliveries(client, admin_headers, record["_id"])["deliveries"]} == {"u0", "u1a", "u1b"}


def test_send_to_topic_reaches_subscribers_only(client, admin_headers, make_user, register, subscribe):
    fan, other, quitter = make_user(), make_user(), make_user()
    register(fan, "fan-phone")
    register(fan, "fan-web", "web")
    register(other, "other-phone")
    register(quitter, "quitter-phone")
    subscribe(fan, "scores")
    subscribe(other, "weather")
    subscribe(quitter, "scores")
    assert (
        client.post("/pushNotifications/unsubscribe", json={"topic": "scores"}, headers=quitter.headers).status_code
        == 200
    )
    body = {"topic": "scores", "title": "Goal!", "body": "1-0"}
    response = client.post("/admin/pushNotifications/sendToTopic", json=body, headers=admin_headers)
    assert response.status_code == 200
    assert response.get_json() == {"sent": 2, "failed": 0}
    (record,) = outbox(client, admin_headers, topic="scores")["notifications"]
    assert (record["target"], record["topic"], record["userIds"]) == ("topic", "scores", None)
    sent_to = deliveries(client, admin_headers, record["_id"])["deliveries"]
    assert {d["token"] for d in sent_to} == {"fan-phone", "fan-web"}


def test_send_to_topic_without_subscribers(client, admin_headers):
    response = client.post(
        "/admin/pushNotifications/sendToTopic",
        json={"topic": "empty", "title": "t", "body": "b"},
        headers=admin_headers,
    )
    assert response.get_json() == {"sent": 0, "failed": 0}


def seed(db, topic: str, users: int, devices_per_user: int = 2) -> list[str]:
    """Subscribed users with devices, inserted directly (the audience size is what matters here)."""
    from trellis_push_notifications.models import PushDevice, PushSubscription

    ids = [f"{topic}-user-{n}" for n in range(users)]
    for user_id in ids:
        db.add(PushSubscription(topic=topic, user_id=user_id))
        db.add_all(
            PushDevice(user_id=user_id, token=f"{user_id}-{d}", platform="android") for d in range(devices_per_user)
        )
    db.commit()
    return ids


def test_sends_take_a_constant_number_of_statements(app, db, client, admin_headers):
    """One query for the audience, one bulk insert: 3 or 150 recipients cost the same statements."""
    audiences = {"small": seed(db, "small", 3), "big": seed(db, "big", 75)}
    # Warm the per-process caches (module configuration) so every counted request starts alike.
    client.post(
        "/admin/pushNotifications/sendToTopic", json={"topic": "none", "title": "t", "body": "b"}, headers=admin_headers
    )
    counts = {}
    for topic, expected in (("small", 6), ("big", 150)):
        with count_statements(app) as statements:
            response = client.post(
                "/admin/pushNotifications/sendToTopic",
                json={"topic": topic, "title": "t", "body": "b"},
                headers=admin_headers,
            )
        assert response.get_json() == {"sent": expected, "failed": 0}
        counts[topic] = len(statements)
    assert counts["small"] == counts["big"] <= 8, statements
    for topic, expected in (("small", 6), ("big", 150)):
        with count_statements(app) as statements:
            response = client.post(
                "/admin/pushNotifications/sendMany",
                json={"userIds": audiences[topic], "title": "t", "body": "b"},
                headers=admin_headers,
            )
        assert response.get_json() == {"sent": expected, "failed": 0}
        counts[f"many-{topic}"] = len(statements)
    assert counts["many-small"] == counts["many-big"] <= 8


@pytest.mark.parametrize(
    "route, body, field",
    [
        ("send", {"title": "t", "body": "b"}, "userId"),
        ("send", {"userId": "u", "body": "b"}, "title"),
        ("send", {"userId": "u", "title": "t"}, "body"),
        ("send", {"userId": "u", "title": "", "body": "b"}, "title"),
        ("send", {"userId": "u", "title": "t", "body": "b", "data": {"n": 1}}, "data"),
        ("send", {"userId": "u", "title": "t", "body": "b", "data": ["x"]}, "data"),
        ("send", {"userId": "u", "title": "t", "body": "b", "data": {"from": "me"}}, "data"),
        ("send", {"userId": "u", "title": "t", "body": "b", "data": {"google.c": "x"}}, "data"),
        ("send", {"userId": "u", "title": "t", "body": "b", "badge": 1}, "badge"),
        ("send", {"userId": "u", "title": "t", "body": "b", "data": {"big": "x" * 4100}}, "_schema"),
        ("sendMany", {"userIds": [], "title": "t", "body": "b"}, "userIds"),
        ("sendMany", {"userIds": "u", "title": "t", "body": "b"}, "userIds"),
        ("sendMany", {"userIds": ["u"] * 1001, "title": "t", "body": "b"}, "userIds"),
        ("sendMany", {"userIds": [""], "title": "t", "body": "b"}, "userIds"),
        ("sendToTopic", {"title": "t", "body": "b"}, "topic"),
        ("sendToTopic", {"topic": "no spaces", "title": "t", "body": "b"}, "topic"),
    ],
)
def test_sends_validate(client, admin_headers, route, body, field):
    response = client.post(f"/admin/pushNotifications/{route}", json=body, headers=admin_headers)
    assert response.status_code == 400
    assert field in response.get_json()["errors"]


@pytest.mark.parametrize("route", ["send", "sendMany", "sendToTopic"])
def test_sends_need_admin(client, user, route):
    body = {"userId": user.id, "userIds": [user.id], "topic": "t", "title": "t", "body": "b"}
    assert client.post(f"/admin/pushNotifications/{route}", json=body).status_code == 401
    assert (
        client.post(f"/admin/pushNotifications/{route}", json=body, headers={"masterkey": "wrong"}).status_code == 401
    )
    assert client.post(f"/admin/pushNotifications/{route}", json=body, headers=user.headers).status_code == 403


def test_inactive_module_refuses_to_send(client, admin_headers, user, register):
    register(user, "phone")
    assert (
        client.put("/admin/pushNotifications/config", json={"active": False}, headers=admin_headers).status_code == 200
    )
    body = {"userId": user.id, "title": "t", "body": "b"}
    assert client.post("/admin/pushNotifications/send", json=body, headers=admin_headers).status_code == 404
    assert outbox(client, admin_headers)["count"] == 0


def test_outbox_pages_filters_and_needs_admin(client, admin_headers, make_user, register, subscribe):
    alice, bob = make_user(), make_user()
    register(alice, "a")
    register(bob, "b")
    subscribe(bob, "news")
    for title in ("first", "second"):
        client.post(
            "/admin/pushNotifications/send",
            json={"userId": alice.id, "title": title, "body": "x"},
            headers=admin_headers,
        )
    client.post(
        "/admin/pushNotifications/sendToTopic",
        json={"topic": "news", "title": "third", "body": "x"},
        headers=admin_headers,
    )
    page = outbox(client, admin_headers, limit=2)
    assert page["count"] == 3
    assert [n["title"] for n in page["notifications"]] == ["third", "second"]
    assert outbox(client, admin_headers, skip=2)["notifications"][0]["title"] == "first"
    assert outbox(client, admin_headers, userId=alice.id)["count"] == 2
    assert [n["title"] for n in outbox(client, admin_headers, userId=bob.id)["notifications"]] == ["third"]
    assert outbox(client, admin_headers, target="topic")["count"] == 1
    assert outbox(client, admin_headers, topic="news")["count"] == 1
    assert outbox(client, admin_headers, provider="outbox")["count"] == 3
    assert outbox(client, admin_headers, provider="firebase")["count"] == 0
    for query in ({"limit": 1001}, {"target": "everyone"}, {"topic": "bad topic"}, {"skip": -1}):
        assert (
            client.get("/admin/pushNotifications/outbox", query_string=query, headers=admin_headers).status_code == 400
        )
    assert client.get("/admin/pushNotifications/outbox").status_code == 401
    assert client.get("/admin/pushNotifications/outbox", headers=alice.headers).status_code == 403


def test_deliveries_page_filter_and_404(client, admin_headers, make_user, register):
    user = make_user()
    for n in range(5):
        register(user, f"device-{n}")
    client.post(
        "/admin/pushNotifications/send", json={"userId": user.id, "title": "t", "body": "b"}, headers=admin_headers
    )
    (record,) = outbox(client, admin_headers)["notifications"]
    page = deliveries(client, admin_headers, record["_id"], skip=1, limit=2)
    assert page["count"] == 5
    assert [d["token"] for d in page["deliveries"]] == ["device-1", "device-2"]
    assert deliveries(client, admin_headers, record["_id"], status="sent")["count"] == 5
    assert deliveries(client, admin_headers, record["_id"], status="failed")["count"] == 0
    assert deliveries(client, admin_headers, record["_id"], userId="someone")["count"] == 0
    path = f"/admin/pushNotifications/outbox/{record['_id']}/deliveries"
    assert client.get(path, query_string={"status": "lost"}, headers=admin_headers).status_code == 400
    assert client.get("/admin/pushNotifications/outbox/nope/deliveries", headers=admin_headers).status_code == 404
    assert client.get(path).status_code == 401
    assert client.get(path, headers=user.headers).status_code == 403


def test_routes_are_documented(client):
    paths = client.get("/openapi.json").get_json()["paths"]
    for path in (
        "/pushNotifications/token",
        "/pushNotifications/subscribe",
        "/pushNotifications/unsubscribe",
        "/admin/pushNotifications/send",
        "/admin/pushNotifications/sendMany",
        "/admin/pushNotifications/sendToTopic",
        "/admin/pushNotifications/config",
        "/admin/pushNotifications/outbox",
        "/admin/pushNotifications/outbox/{notificationId}/deliveries",
    ):
        assert path in paths
    assert set(paths["/pushNotifications/token"]) >= {"post", "delete"}
    assert "201" in paths["/pushNotifications/token"]["post"]["responses"]
