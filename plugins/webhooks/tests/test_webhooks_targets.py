"""SSRF protection: non-public targets are refused when saved and when delivered, unless allowPrivateTargets."""

from __future__ import annotations

import pytest

from trellis_webhooks.targets import address_problem


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/x",
        "http://localhost/x",
        "http://[::1]/x",
        "http://10.1.2.3/x",
        "http://192.168.0.10/x",
        "http://172.16.5.4/x",
        "http://169.254.169.254/latest/meta-data/",
        "http://100.100.100.200/latest/meta-data/",
        "http://[fd00:ec2::254]/x",
        "http://[::ffff:127.0.0.1]/x",
        "http://0.0.0.0/x",
        "https://224.0.0.1/x",
        "http://2130706433/x",
        # IPv6 forms that embed a private IPv4 address, and site-local (all called global by Python 3.11)
        "http://[64:ff9b::a00:1]/x",
        "http://[::7f00:1]/x",
        "http://[::127.0.0.1]/x",
        "http://[2002:7f00:1::1]/x",
        "http://[::ffff:0:7f00:1]/x",
        "http://[64:ff9b::a9fe:a9fe]/latest/meta-data/",
        "http://[fec0::1]/x",
    ],
)
def test_private_targets_are_refused_when_saved(client, admin_headers, url):
    response = client.post("/admin/webhooks", json={"url": url, "events": ["database.*.*"]}, headers=admin_headers)
    assert response.status_code == 400, response.get_json()
    error = response.get_json()
    assert error["name"] == "INVALID_ARGUMENTS" and "allowPrivateTargets" in error["errors"]["url"][0], error


def test_an_unresolvable_host_is_refused(client, admin_headers):
    body = {"url": "http://no-such-host.invalid/x", "events": ["database.*.*"]}
    response = client.post("/admin/webhooks", json=body, headers=admin_headers)
    assert response.status_code == 400 and "does not resolve" in response.get_json()["message"]


def test_an_update_to_a_private_target_is_refused(client, admin_headers, allow_private, make_webhook):
    webhook = make_webhook("http://127.0.0.1:9/x")
    client.put("/admin/webhooks/config", json={"allowPrivateTargets": False}, headers=admin_headers)
    response = client.put(f"/admin/webhooks/{webhook['_id']}", json={"url": "http://10.0.0.1/"}, headers=admin_headers)
    assert response.status_code == 400
    assert (
        client.put(f"/admin/webhooks/{webhook['_id']}", json={"active": False}, headers=admin_headers).status_code
        == 200
    )


def test_delivery_checks_the_address_it_connects_to(client, admin_headers, allow_private, receiver, make_webhook):
    webhook = make_webhook(receiver.url)
    client.put("/admin/webhooks/config", json={"allowPrivateTargets": False}, headers=admin_headers)
    delivery = client.post(f"/admin/webhooks/{webhook['_id']}/ping", headers=admin_headers).get_json()
    assert delivery["status"] == "pending" and delivery["responseStatus"] is None
    assert delivery["lastError"] == "refused: 127.0.0.1 is a loopback address (allowPrivateTargets is off)"
    assert receiver.received == [], "nothing reached the private target"
    client.put("/admin/webhooks/config", json={"allowPrivateTargets": True}, headers=admin_headers)
    retried = client.post(f"/admin/webhooks/{webhook['_id']}/deliveries/{delivery['_id']}/retry", headers=admin_headers)
    assert retried.get_json()["status"] == "delivered"


@pytest.mark.parametrize(
    "address,public",
    [
        ("93.184.215.14", True),
        ("2606:4700::6810:85e5", True),
        ("127.0.0.2", False),
        ("fe80::1%eth0", False),
        # embedded IPv4: judged by the address the packet ends up at
        ("64:ff9b::a00:1", False),  # NAT64 of 10.0.0.1
        ("64:ff9b::a9fe:a9fe", False),  # NAT64 of link-local 169.254.169.254 (cloud metadata)
        ("64:ff9b::5db8:d70e", True),  # NAT64 of a public address
        ("64:ff9b:1::5db8:d70e", False),  # local-use NAT64 prefix (RFC 8215)
        ("::7f00:1", False),  # IPv4-compatible, deprecated
        ("::127.0.0.1", False),
        ("::5db8:d70e", False),
        ("2002:7f00:1::1", False),  # 6to4 of 127.0.0.1
        ("2002:5db8:d70e::1", True),  # 6to4 of a public address
        ("::ffff:0:7f00:1", False),  # SIIT IPv4-translated
        ("::ffff:0:a00:1", False),
        ("::ffff:10.0.0.1", False),  # IPv4-mapped
        ("2001:0:4136:e378:8000:63bf:f5ff:fffe", False),  # Teredo whose client is 10.0.0.1
        ("2606:4700::5efe:a00:1", False),  # ISATAP interface id holding 10.0.0.1
        ("fec0::1", False),  # site-local
        ("fd00:ec2::254", False),
    ],
)
def test_address_classes(address, public):
    assert (address_problem(address) is None) is public
