"""GET/PUT /admin/pushNotifications/config through the core ConfigStore."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from trellis.module_config import get as get_config

EMAIL = "push@trellis-test.iam.gserviceaccount.com"


def test_default_config(client, admin_headers):
    response = client.get("/admin/pushNotifications/config", headers=admin_headers)
    assert response.status_code == 200
    assert response.get_json() == {"active": True, "provider": "outbox", "outbox": {}, "firebase": {}}


def test_put_firebase_is_merged_and_shared_with_config_route(client, admin_headers, private_key_pem):
    body = {
        "provider": "firebase",
        "firebase": {"projectId": "my-project", "clientEmail": EMAIL, "privateKey": private_key_pem},
    }
    response = client.put("/admin/pushNotifications/config", json=body, headers=admin_headers)
    assert response.status_code == 200, response.get_json()
    config = response.get_json()
    assert config["firebase"] == {
        **body["firebase"],
        "privateKey": "********",  # a secret field: shown masked
        "baseUrl": "https://fcm.googleapis.com",
        "tokenUri": "https://oauth2.googleapis.com/token",
    }
    assert client.get("/config/pushNotifications", headers=admin_headers).get_json() == config
    changed = client.put(
        "/admin/pushNotifications/config", json={"firebase": {"projectId": "other-project"}}, headers=admin_headers
    )
    assert changed.get_json()["firebase"]["clientEmail"] == EMAIL
    assert (
        client.get("/admin/pushNotifications/config", headers=admin_headers).get_json()["firebase"]["projectId"]
        == "other-project"
    )


def test_private_key_with_escaped_newlines_is_accepted(client, admin_headers, private_key_pem):
    escaped = private_key_pem.replace("\n", "\\n")
    body = {
        "provider": "firebase",
        "firebase": {"projectId": "my-project", "clientEmail": EMAIL, "privateKey": escaped},
    }
    response = client.put("/admin/pushNotifications/config", json=body, headers=admin_headers)
    assert response.status_code == 200
    assert response.get_json()["firebase"]["privateKey"] == "********"
    assert get_config("pushNotifications")["firebase"]["privateKey"] == private_key_pem


def test_firebase_needs_its_settings(client, admin_headers):
    response = client.put("/admin/pushNotifications/config", json={"provider": "firebase"}, headers=admin_headers)
    assert response.status_code == 400
    assert set(response.get_json()["errors"]["firebase"]) == {"projectId", "clientEmail", "privateKey"}
    assert client.get("/admin/pushNotifications/config", headers=admin_headers).get_json()["provider"] == "outbox"


def _ec_key() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


@pytest.mark.parametrize(
    "firebase",
    [
        {"privateKey": "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n"},
        {"privateKey": "ec"},
        {"projectId": "Bad_Project"},
        {"clientEmail": "not-an-email"},
        {"baseUrl": "fcm.googleapis.com"},
        {"tokenUri": "ftp://token"},
        {"apiKey": "legacy-server-key"},
    ],
)
def test_put_rejects_invalid_firebase_settings(client, admin_headers, firebase):
    if firebase.get("privateKey") == "ec":
        firebase = {"privateKey": _ec_key()}
    response = client.put("/admin/pushNotifications/config", json={"firebase": firebase}, headers=admin_headers)
    assert response.status_code == 400, response.get_json()
    assert "firebase" in response.get_json()["errors"]


@pytest.mark.parametrize(
    "body", [{"provider": "apns"}, {"outbox": {"x": 1}}, {"colour": "blue"}, {"active": "sometimes"}]
)
def test_put_rejects_invalid_config(client, admin_headers, body):
    response = client.put("/admin/pushNotifications/config", json=body, headers=admin_headers)
    assert response.status_code == 400
    assert response.get_json()["name"] == "INVALID_ARGUMENTS"


def test_config_routes_need_admin(client, user):
    assert client.get("/admin/pushNotifications/config").status_code == 401
    assert client.put("/admin/pushNotifications/config", json={"active": True}).status_code == 401
    assert client.get("/admin/pushNotifications/config", headers=user.headers).status_code == 403
    assert client.put("/admin/pushNotifications/config", json={"active": True}, headers=user.headers).status_code == 403


def test_config_accepts_admin_bearer(client, admin_token):
    headers = {"Authorization": f"Bearer {admin_token}"}
    assert (
        client.put("/admin/pushNotifications/config", json={"active": False}, headers=headers).get_json()["active"]
        is False
    )
