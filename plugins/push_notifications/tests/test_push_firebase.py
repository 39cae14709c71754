"""The firebase provider: FCM HTTP v1 and the OAuth 2.0 JWT grant, against a local server speaking both."""

from __future__ import annotations

from trellis.testing.plugin import free_port


def outbox(client, headers, **query):
    return client.get("/admin/pushNotifications/outbox", query_string=query, headers=headers).get_json()


def deliveries(client, headers, **query):
    """Deliveries of the latest notification."""
    latest = outbox(client, headers, limit=1)["notifications"][0]
    path = f"/admin/pushNotifications/outbox/{latest['_id']}/deliveries"
    return client.get(path, query_string=query, headers=headers).get_json()


def send(client, headers, user, **extra):
    body = {"userId": user.id, "title": "Hello", "body": "World", **extra}
    return client.post("/admin/pushNotifications/send", json=body, headers=headers)


def test_send_through_fcm_with_a_service_account_token(client, admin_headers, user, register, use_firebase):
    register(user, "fcm-token-1", "android")
    response = send(client, admin_headers, user, data={"orderId": "42"})
    assert response.status_code == 200, response.get_json()
    assert response.get_json() == {"sent": 1, "failed": 0}
    # The JWT grant was signed with the service account key, for FCM's scope.
    (grant,) = use_firebase.grants
    assert grant["claims"]["iss"] == use_firebase.client_email
    assert use_firebase.scope in grant["claims"]["scope"].split()
    # The message went to the project's messages:send with that access token and FCM's v1 payload.
    (sent,) = use_firebase.messages
    assert sent["access_token"] in use_firebase.issued
    assert sent["message"] == {
        "token": "fcm-token-1",
        "notification": {"title": "Hello", "body": "World"},
        "data": {"orderId": "42"},
    }
    (record,) = outbox(client, admin_headers)["notifications"]
    assert (record["provider"], record["sent"], record["failed"]) == ("firebase", 1, 0)
    (delivery,) = deliveries(client, admin_headers)["deliveries"]
    assert delivery["status"] == "sent"
    assert delivery["providerMessageId"].startswith(f"projects/{use_firebase.project_id}/messages/")


def test_access_token_and_session_are_reused(client, admin_headers, make_user, register, subscribe, use_firebase):
    users = [make_user() for _ in range(3)]
    for n, user in enumerate(users):
        register(user, f"device-{n}")
        subscribe(user, "news")
    for _ in range(3):
        response = client.post(
            "/admin/pushNotifications/sendToTopic",
            json={"topic": "news", "title": "t", "body": "b"},
            headers=admin_headers,
        )
        assert response.get_json() == {"sent": 3, "failed": 0}
    assert len(use_firebase.grants) == 1
    assert len(use_firebase.messages) == 9
    assert len({m["access_token"] for m in use_firebase.messages}) == 1
    # No data: FCM gets no empty data object.
    assert "data" not in use_firebase.messages[0]["message"]


def test_dead_tokens_are_removed_and_counted_as_failed(client, admin_headers, user, register, use_firebase):
    for token in ("alive", "gone", "garbage", "flaky"):
        register(user, token)
    use_firebase.unregistered.add("gone")
    use_firebase.invalid.add("garbage")
    use_firebase.unavailable.add("flaky")
    response = send(client, admin_headers, user)
    assert response.status_code == 200
    assert response.get_json() == {"sent": 1, "failed": 3}
    failed = {d["token"]: d for d in deliveries(client, admin_headers, status="failed")["deliveries"]}
    assert set(failed) == {"gone", "garbage", "flaky"}
    assert "UNREGISTERED" in failed["gone"]["error"]
    assert "UNAVAILABLE" in failed["flaky"]["error"]
    # Dead tokens are forgotten; the temporarily failing one is kept.
    use_firebase.messages.clear()
    assert send(client, admin_headers, user).get_json() == {"sent": 1, "failed": 1}
    assert {m["message"]["token"] for m in use_firebase.messages} == {"alive", "flaky"}


def test_fcm_refusing_our_access_token_gets_one_new_token(client, admin_headers, user, register, use_firebase):
    register(user, "phone")
    assert send(client, admin_headers, user).get_json() == {"sent": 1, "failed": 0}
    use_firebase.revoke_all()
    assert send(client, admin_headers, user).get_json() == {"sent": 1, "failed": 0}
    assert len(use_firebase.grants) == 2


def test_refused_grant_is_provider_error_and_recorded(client, admin_headers, user, register, use_firebase):
    register(user, "phone")
    register(user, "tablet", "ios")
    use_firebase.refuse_grants = True
    response = send(client, admin_headers, user)
    assert response.status_code == 500
    body = response.get_json()
    assert body["name"] == "PROVIDER_ERROR"
    assert "access token" in body["message"] and "invalid_grant" in body["message"]
    assert "PRIVATE KEY" not in response.get_data(as_text=True)
    (record,) = outbox(client, admin_headers)["notifications"]
    assert (record["sent"], record["failed"]) == (0, 2)
    assert deliveries(client, admin_headers, status="failed")["count"] == 2
    assert "invalid_grant" in deliveries(client, admin_headers)["deliveries"][0]["error"]
    assert use_firebase.messages == []


def test_wrong_service_account_key_is_provider_error(client, admin_headers, user, register, use_firebase):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = other.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    assert (
        client.put(
            "/admin/pushNotifications/config", json={"firebase": {"privateKey": pem}}, headers=admin_headers
        ).status_code
        == 200
    )
    register(user, "phone")
    response = send(client, admin_headers, user)
    assert response.status_code == 500
    assert "Signature verification failed" in response.get_json()["message"]


def test_unreachable_fcm_is_provider_error(client, admin_headers, user, register, use_firebase):
    dead = f"http://127.0.0.1:{free_port()}"
    assert (
        client.put(
            "/admin/pushNotifications/config", json={"firebase": {"baseUrl": dead}}, headers=admin_headers
        ).status_code
        == 200
    )
    register(user, "phone")
    response = send(client, admin_headers, user)
    assert response.status_code == 500
    assert "could not be reached" in response.get_json()["message"]
    (delivery,) = deliveries(client, admin_headers)["deliveries"]
    assert delivery["status"] == "failed"


def test_topic_fan_out_through_fcm(client, admin_headers, make_user, register, subscribe, use_firebase):
    users = [make_user() for _ in range(2)]
    for n in range(5):
        register(users[n % 2], f"a-{n}", "android")
        register(users[n % 2], f"w-{n}", "web")
    for user in users:
        subscribe(user, "deals")
    use_firebase.unregistered.add("w-3")
    body = {"topic": "deals", "title": "Sale", "body": "50% off", "data": {"url": "/sale"}}
    response = client.post("/admin/pushNotifications/sendToTopic", json=body, headers=admin_headers)
    assert response.get_json() == {"sent": 9, "failed": 1}
    assert sorted(m["message"]["token"] for m in use_firebase.messages) == sorted(
        [f"a-{n}" for n in range(5)] + [f"w-{n}" for n in range(5)]
    )
    (record,) = outbox(client, admin_headers, topic="deals")["notifications"]
    assert (record["sent"], record["failed"]) == (9, 1)
    assert deliveries(client, admin_headers)["count"] == 10
