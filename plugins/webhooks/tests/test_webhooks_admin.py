"""Admin CRUD of webhooks: generated and masked secrets, pattern and URL validation, audit entries, 400s."""

from __future__ import annotations

import pytest

from trellis.redact import MASK

URL = "http://127.0.0.1:9/hooks"


def webhook_entries(client, admin_headers):
    entries = client.get("/admin/audit?module=webhooks", headers=admin_headers).get_json()["entries"]
    return [entry for entry in entries if entry["action"].startswith("webhook.")]


@pytest.fixture(autouse=True)
def _private_targets(allow_private):
    """These tests are about the records; target checks are in test_webhooks_targets.py."""


def test_create_generates_a_secret_shown_once(client, admin_headers):
    body = {"url": URL, "events": ["database.Item.*", "authentication.user.create"], "description": "CRM sync"}
    response = client.post("/admin/webhooks", json=body, headers=admin_headers)
    assert response.status_code == 201, response.get_json()
    webhook = response.get_json()
    assert webhook["secret"].startswith("whsec_") and len(webhook["secret"]) > 40
    assert (webhook["url"], webhook["events"], webhook["active"]) == (URL, body["events"], True)
    assert webhook["description"] == "CRM sync" and webhook["createdAt"].endswith("Z")
    shown = client.get(f"/admin/webhooks/{webhook['_id']}", headers=admin_headers).get_json()
    assert shown == {**webhook, "secret": MASK}
    listed = client.get("/admin/webhooks", headers=admin_headers).get_json()
    assert listed == {"webhooks": [{**webhook, "secret": MASK}], "count": 1}


def test_a_given_secret_is_kept_and_masked_in_the_audit_log(client, admin_headers, make_webhook):
    secret = "my-own-secret-of-some-length"
    webhook = make_webhook(URL, secret=secret)
    assert webhook["secret"] == secret
    entries = webhook_entries(client, admin_headers)
    assert [e["action"] for e in entries] == ["webhook.create"]
    assert entries[0]["target"] == webhook["_id"] and entries[0]["changes"]["secret"] == MASK
    assert secret not in str(entries)


def test_update_and_delete_are_audited(client, admin_headers, make_webhook):
    webhook = make_webhook(URL)
    path = f"/admin/webhooks/{webhook['_id']}"
    response = client.put(path, json={"active": False, "events": ["chat.message.create"]}, headers=admin_headers)
    assert response.status_code == 200, response.get_json()
    changed = response.get_json()
    assert (changed["active"], changed["events"], changed["secret"]) == (False, ["chat.message.create"], MASK)
    assert changed["url"] == URL and changed["updatedAt"] >= webhook["updatedAt"]
    replaced = client.put(path, json={"secret": "a-new-secret-0123456789"}, headers=admin_headers).get_json()
    assert replaced["secret"] == "a-new-secret-0123456789", "a replaced secret is shown in that answer"
    assert client.delete(path, headers=admin_headers).get_json() == {"_id": webhook["_id"], "deleted": True}
    assert client.get(path, headers=admin_headers).status_code == 404
    entries = webhook_entries(client, admin_headers)
    assert [e["action"] for e in entries] == ["webhook.delete", "webhook.update", "webhook.update", "webhook.create"]
    assert entries[1]["changes"] == {"secret": MASK}


@pytest.mark.parametrize(
    "body,field",
    [
        ({"events": ["database.*.*"]}, "url"),
        ({"url": URL}, "events"),
        ({"url": URL, "events": []}, "events"),
        ({"url": URL, "events": ["database.Item.remove"]}, "events"),
        ({"url": URL, "events": ["forms.*"]}, "events"),
        ({"url": URL, "events": ["storage.folder.create"]}, "events"),
        ({"url": URL, "events": ["database.Item.create", "database.Item.create"]}, "events"),
        ({"url": URL, "events": ["database..create"]}, "events"),
        ({"url": URL, "events": [7]}, "events"),
        ({"url": "ftp://example.com/x", "events": ["database.*.*"]}, "url"),
        ({"url": "http:///nohost", "events": ["database.*.*"]}, "url"),
        ({"url": "http://user:pw@example.com/", "events": ["database.*.*"]}, "url"),
        ({"url": "http://example.com/a b", "events": ["database.*.*"]}, "url"),
        ({"url": "http://example.com:99999/", "events": ["database.*.*"]}, "url"),
        ({"url": URL, "events": ["database.*.*"], "secret": "short"}, "secret"),
        ({"url": URL, "events": ["database.*.*"], "active": "maybe"}, "active"),
        ({"url": URL, "events": ["database.*.*"], "colour": "red"}, "colour"),
    ],
)
def test_invalid_bodies_are_400_with_the_field(client, admin_headers, body, field):
    response = client.post("/admin/webhooks", json=body, headers=admin_headers)
    assert response.status_code == 400, response.get_json()
    error = response.get_json()
    assert error["name"] == "INVALID_ARGUMENTS" and field in error["errors"], error


@pytest.mark.parametrize(
    "raw",
    [b"{", b'{"url": "x", "url": "y"}', b"[1, 2]", b'{"url": NaN}', b"\xff\xfe", b'"just a string"'],
)
def test_malformed_bodies_are_400(client, admin_headers, raw):
    response = client.post("/admin/webhooks", data=raw, content_type="application/json", headers=admin_headers)
    assert response.status_code == 400, response.get_json()
    assert response.get_json()["status"] == 400


def test_non_json_body_is_415_and_empty_update_400(client, admin_headers, make_webhook):
    response = client.post("/admin/webhooks", data="url=x", content_type="text/plain", headers=admin_headers)
    assert response.status_code == 415
    webhook = make_webhook(URL)
    response = client.put(f"/admin/webhooks/{webhook['_id']}", json={}, headers=admin_headers)
    assert response.status_code == 400
    response = client.put(f"/admin/webhooks/{webhook['_id']}", json={"secret": None}, headers=admin_headers)
    assert response.status_code == 400 and "secret" in response.get_json()["errors"]


def test_unknown_ids_are_404_and_credentials_are_needed(client, admin_headers, make_user):
    for method, path in (
        ("GET", "/admin/webhooks/nope"),
        ("PUT", "/admin/webhooks/nope"),
        ("DELETE", "/admin/webhooks/nope"),
        ("GET", "/admin/webhooks/nope/deliveries"),
        ("POST", "/admin/webhooks/nope/ping"),
        ("POST", "/admin/webhooks/nope/deliveries/nada/retry"),
    ):
        kwargs = {"json": {"active": True}} if method == "PUT" else {}
        response = client.open(path, method=method, headers=admin_headers, **kwargs)
        assert response.status_code == 404, (method, path, response.get_json())
        assert response.get_json()["name"] == "NOT_FOUND"
    assert client.get("/admin/webhooks").status_code == 401
    assert client.get("/admin/webhooks", headers=make_user().headers).status_code == 403


def test_list_pages(client, admin_headers, make_webhook):
    made = [make_webhook(f"http://127.0.0.1:9/{n}") for n in range(3)]
    page = client.get("/admin/webhooks?skip=1&limit=1", headers=admin_headers).get_json()
    assert page["count"] == 3 and [w["_id"] for w in page["webhooks"]] == [made[1]["_id"]]
    assert client.get("/admin/webhooks?limit=1001", headers=admin_headers).status_code == 400


def test_config_routes_show_the_private_targets_switch(client, admin_headers):
    shown = client.get("/admin/webhooks/config", headers=admin_headers).get_json()
    assert shown == {"active": True, "allowPrivateTargets": True}
    assert (
        client.put("/admin/webhooks/config", json={"allowPrivateTargets": "x"}, headers=admin_headers).status_code
        == 400
    )
