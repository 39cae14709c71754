"""The real server (eventlet): a topic fan-out through FCM runs in parallel green threads."""

from __future__ import annotations

import pytest
import requests

from trellis_authentication.testing import create_user_over_http

pytestmark = pytest.mark.live


def test_topic_fan_out_through_fcm_on_the_eventlet_server(live_server, admin_headers, fake_fcm, private_key_pem):
    base = live_server.url
    config = {"provider": "firebase", "firebase": fake_fcm.settings(private_key_pem)}
    response = requests.put(f"{base}/admin/pushNotifications/config", json=config, headers=admin_headers, timeout=30)
    assert response.status_code == 200, response.text
    users = [create_user_over_http(base) for _ in range(2)]
    for n in range(20):
        user = users[n % 2]
        body = {"token": f"device-{n}", "platform": ("android", "ios", "web")[n % 3]}
        assert (
            requests.post(f"{base}/pushNotifications/token", json=body, headers=user.headers, timeout=30).status_code
            == 201
        )
    for user in users:
        response = requests.post(
            f"{base}/pushNotifications/subscribe", json={"topic": "live"}, headers=user.headers, timeout=30
        )
        assert response.status_code == 200
    fake_fcm.unregistered.add("device-7")
    fake_fcm.delay = 0.05

    body = {"topic": "live", "title": "Live", "body": "from eventlet", "data": {"k": "v"}}
    response = requests.post(
        f"{base}/admin/pushNotifications/sendToTopic", json=body, headers=admin_headers, timeout=60
    )

    assert response.status_code == 200, response.text
    assert response.json() == {"sent": 19, "failed": 1}
    assert len(fake_fcm.grants) == 1
    assert len(fake_fcm.messages) == 20
    assert fake_fcm.max_in_flight > 1  # green threads, not one request after another
    outbox = requests.get(
        f"{base}/admin/pushNotifications/outbox",
        params={"topic": "live", "limit": 100},
        headers=admin_headers,
        timeout=30,
    ).json()
    assert outbox["count"] == 1
    assert (outbox["notifications"][0]["sent"], outbox["notifications"][0]["failed"]) == (19, 1)
    # The dead token is gone: a second send reaches the 19 live devices only.
    fake_fcm.messages.clear()
    response = requests.post(
        f"{base}/admin/pushNotifications/sendToTopic", json=body, headers=admin_headers, timeout=60
    )
    assert response.json() == {"sent": 19, "failed": 0}
