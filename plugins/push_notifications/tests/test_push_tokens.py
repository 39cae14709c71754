"""User routes: device token registration and removal, topic subscriptions."""

from __future__ import annotations

import pytest


def devices_of(client, admin_headers, user):
    """The user's devices, seen through a send on the outbox provider."""
    response = client.post(
        "/admin/pushNotifications/send", json={"userId": user.id, "title": "t", "body": "b"}, headers=admin_headers
    )
    assert response.status_code == 200, response.get_json()
    return response.get_json()["sent"]


@pytest.mark.parametrize("platform", ["android", "ios", "web"])
def test_register_token_answers_201_with_record(client, user, platform):
    response = client.post(
        "/pushNotifications/token", json={"token": "tok-1", "platform": platform}, headers=user.headers
    )
    assert response.status_code == 201
    record = response.get_json()
    assert record["userId"] == user.id
    assert record["token"] == "tok-1"
    assert record["platform"] == platform
    assert record["_id"] and record["createdAt"].endswith("Z") and record["updatedAt"]


def test_register_again_updates_the_same_device(client, admin_headers, user, register):
    first = register(user, "tok-1", "android")
    again = register(user, "tok-1", "web")
    assert again["_id"] == first["_id"]
    assert again["platform"] == "web"
    assert devices_of(client, admin_headers, user) == 1


def test_a_token_moves_to_the_user_who_registers_it(client, admin_headers, make_user, register):
    alice, bob = make_user(), make_user()
    register(alice, "shared-device")
    moved = register(bob, "shared-device")
    assert moved["userId"] == bob.id
    assert devices_of(client, admin_headers, alice) == 0
    assert devices_of(client, admin_headers, bob) == 1


def test_a_user_may_have_several_devices(client, admin_headers, user, register):
    register(user, "phone", "android")
    register(user, "tablet", "ios")
    register(user, "browser", "web")
    assert devices_of(client, admin_headers, user) == 3


@pytest.mark.parametrize(
    "body, field",
    [
        ({"token": "t", "platform": "windows"}, "platform"),
        ({"token": "t", "platform": "ANDROID"}, "platform"),
        ({"token": "t"}, "platform"),
        ({"platform": "android"}, "token"),
        ({"token": "", "platform": "android"}, "token"),
        ({"token": "x" * 1025, "platform": "android"}, "token"),
        ({"token": 12, "platform": "android"}, "token"),
        ({"token": "t", "platform": "android", "userId": "someone-else"}, "userId"),
    ],
)
def test_register_validates(client, admin_headers, user, body, field):
    response = client.post("/pushNotifications/token", json=body, headers=user.headers)
    assert response.status_code == 400
    assert field in response.get_json()["errors"]
    assert devices_of(client, admin_headers, user) == 0


def test_token_routes_need_a_user(client, admin_headers, admin_token):
    body = {"token": "t", "platform": "android"}
    assert client.post("/pushNotifications/token", json=body).status_code == 401
    assert (
        client.post("/pushNotifications/token", json=body, headers={"Authorization": "Bearer junk"}).status_code == 401
    )
    # Administrators are not users: they have no devices.
    assert client.post("/pushNotifications/token", json=body, headers=admin_headers).status_code == 403
    assert (
        client.post(
            "/pushNotifications/token", json=body, headers={"Authorization": f"Bearer {admin_token}"}
        ).status_code
        == 403
    )
    assert client.delete("/pushNotifications/token").status_code == 401
    assert client.delete("/pushNotifications/token", headers=admin_headers).status_code == 403


def test_delete_one_token_by_body_or_query(client, admin_headers, user, register):
    phone = register(user, "phone")
    tablet = register(user, "tablet")
    register(user, "browser", "web")
    response = client.delete("/pushNotifications/token", json={"token": "phone"}, headers=user.headers)
    assert response.status_code == 200
    assert response.get_json() == {"_id": phone["_id"], "deleted": True, "count": 1}
    response = client.delete("/pushNotifications/token", query_string={"token": "tablet"}, headers=user.headers)
    assert response.get_json() == {"_id": tablet["_id"], "deleted": True, "count": 1}
    assert devices_of(client, admin_headers, user) == 1


def test_delete_without_token_removes_all_of_the_users_tokens(client, admin_headers, make_user, register):
    alice, bob = make_user(), make_user()
    register(alice, "a1")
    register(alice, "a2", "ios")
    register(bob, "b1")
    response = client.delete("/pushNotifications/token", headers=alice.headers)
    assert response.status_code == 200
    assert response.get_json() == {"deleted": True, "count": 2}
    assert devices_of(client, admin_headers, alice) == 0
    assert devices_of(client, admin_headers, bob) == 1
    # Nothing left: still a success, with nothing removed.
    assert client.delete("/pushNotifications/token", headers=alice.headers).get_json() == {"deleted": True, "count": 0}


def test_delete_someone_elses_or_unknown_token_is_404(client, admin_headers, make_user, register):
    alice, bob = make_user(), make_user()
    register(bob, "bobs-phone")
    response = client.delete("/pushNotifications/token", json={"token": "bobs-phone"}, headers=alice.headers)
    assert response.status_code == 404
    assert client.delete("/pushNotifications/token", json={"token": "nope"}, headers=alice.headers).status_code == 404
    assert devices_of(client, admin_headers, bob) == 1


@pytest.mark.parametrize("kwargs", [{"json": {"token": ""}}, {"json": {"device": "x"}}, {"query_string": {"tok": "x"}}])
def test_delete_validates(client, user, kwargs):
    assert client.delete("/pushNotifications/token", headers=user.headers, **kwargs).status_code == 400


def test_subscribe_and_unsubscribe(client, user):
    response = client.post("/pushNotifications/subscribe", json={"topic": "news"}, headers=user.headers)
    assert response.status_code == 200
    assert response.get_json() == {"topic": "news", "subscribed": True}
    # Idempotent.
    assert client.post("/pushNotifications/subscribe", json={"topic": "news"}, headers=user.headers).status_code == 200
    response = client.post("/pushNotifications/unsubscribe", json={"topic": "news"}, headers=user.headers)
    assert response.status_code == 200
    assert response.get_json() == {"topic": "news", "subscribed": False}
    assert (
        client.post("/pushNotifications/unsubscribe", json={"topic": "news"}, headers=user.headers).status_code == 200
    )


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"topic": ""},
        {"topic": "bad topic"},
        {"topic": "a/b"},
        {"topic": "x" * 257},
        {"topic": "news", "extra": 1},
        {"topic": ["news"]},
    ],
)
@pytest.mark.parametrize("route", ["subscribe", "unsubscribe"])
def test_topic_routes_validate(client, user, route, body):
    response = client.post(f"/pushNotifications/{route}", json=body, headers=user.headers)
    assert response.status_code == 400
    assert response.get_json()["name"] == "INVALID_ARGUMENTS"


@pytest.mark.parametrize("route", ["subscribe", "unsubscribe"])
def test_topic_routes_need_a_user(client, admin_headers, route):
    assert client.post(f"/pushNotifications/{route}", json={"topic": "news"}).status_code == 401
    assert client.post(f"/pushNotifications/{route}", json={"topic": "news"}, headers=admin_headers).status_code == 403


def test_inactive_module_hides_user_routes(client, admin_headers, user):
    assert (
        client.put("/admin/pushNotifications/config", json={"active": False}, headers=admin_headers).status_code == 200
    )
    body = {"token": "t", "platform": "android"}
    assert client.post("/pushNotifications/token", json=body, headers=user.headers).status_code == 404
    assert client.post("/pushNotifications/subscribe", json={"topic": "n"}, headers=user.headers).status_code == 404
    assert client.delete("/pushNotifications/token", headers=user.headers).status_code == 404


def test_deleting_a_user_forgets_devices_and_subscriptions(client, admin_headers, user, register, subscribe):
    register(user, "phone")
    subscribe(user, "news")
    assert client.delete(f"/authentication/users/{user.id}", headers=admin_headers).status_code == 200
    response = client.post(
        "/admin/pushNotifications/sendToTopic", json={"topic": "news", "title": "t", "body": "b"}, headers=admin_headers
    )
    assert response.get_json() == {"sent": 0, "failed": 0}
    # The token is free again: another user registers it as a new device.
    from trellis import db
    from trellis_push_notifications.models import PushDevice, PushSubscription

    assert db.session.query(PushDevice).count() == 0
    assert db.session.query(PushSubscription).count() == 0
