"""Deliveries as a receiver sees them, checked by the README's receiver example (run as documented)."""

from __future__ import annotations

import hashlib
import hmac
import time


def test_ping_is_signed_as_documented_and_the_readme_receiver_accepts_it(
    client, admin_headers, allow_private, receiver, make_webhook, readme_receiver
):
    webhook = make_webhook(receiver.url)
    response = client.post(f"/admin/webhooks/{webhook['_id']}/ping", headers=admin_headers)
    assert response.status_code == 200, response.get_json()
    delivery = response.get_json()
    (got,) = receiver.wait_for(1)
    assert got.path == "/hooks"
    assert got.headers["Content-Type"] == "application/json"
    assert got.headers["Trellis-Event"] == "ping" and got.headers["Trellis-Delivery"] == delivery["_id"]
    assert got.json == {
        "id": None,
        "event": "ping",
        "createdAt": delivery["createdAt"],
        "data": {"webhookId": webhook["_id"], "url": receiver.url},
    }

    # The header, recomputed by hand from the contract's definition.
    t, v1 = (item.split("=", 1)[1] for item in got.headers["Trellis-Signature"].split(","))
    assert abs(int(t) - time.time()) < 60
    expected = hmac.new(webhook["secret"].encode(), f"{t}.".encode() + got.body, hashlib.sha256).hexdigest()
    assert v1 == expected

    # The README's example receiver: accepts it, refuses a changed body, another secret, an old signature.
    example = readme_receiver
    example["SECRET"] = webhook["secret"]
    example_client = example["app"].test_client()
    headers = {k: v for k, v in got.headers.items() if k.startswith("Trellis-")}
    accepted = example_client.post("/hooks", data=got.body, headers=headers, content_type="application/json")
    assert accepted.status_code == 204
    assert delivery["_id"] in example["seen"]
    tampered = got.body.replace(b'"ping"', b'"pong"')
    assert example_client.post("/hooks", data=tampered, headers=headers).status_code == 400
    verify = example["verify"]
    assert verify(webhook["secret"], got.headers["Trellis-Signature"], got.body)
    assert not verify("whsec_another", got.headers["Trellis-Signature"], got.body)
    assert not verify(webhook["secret"], got.headers["Trellis-Signature"], got.body, now=int(t) + 301)
    assert verify(webhook["secret"], got.headers["Trellis-Signature"], got.body, now=int(t) + 299)
    assert not verify(webhook["secret"], "garbage", got.body)
    assert not verify(webhook["secret"], "t=abc,v1=00", got.body)


def test_each_attempt_is_signed_anew_over_the_same_body(
    client, admin_headers, allow_private, receiver, make_webhook, readme_receiver
):
    receiver.statuses = [500]
    webhook = make_webhook(receiver.url, secret="a-fixed-secret-for-this-test")
    first = client.post(f"/admin/webhooks/{webhook['_id']}/ping", headers=admin_headers).get_json()
    time.sleep(1.05)  # signatures carry whole seconds
    path = f"/admin/webhooks/{webhook['_id']}/deliveries/{first['_id']}/retry"
    assert client.post(path, headers=admin_headers).get_json()["status"] == "delivered"
    one, two = receiver.wait_for(2)
    assert one.body == two.body
    assert one.headers["Trellis-Delivery"] == two.headers["Trellis-Delivery"] == first["_id"]
    assert one.headers["Trellis-Signature"] != two.headers["Trellis-Signature"]
    verify = readme_receiver["verify"]
    assert all(verify("a-fixed-secret-for-this-test", r.headers["Trellis-Signature"], r.body) for r in (one, two))
