"""GET/PUT /admin/sms/config: the core ConfigStore behind it, the specification's body, validation."""

from __future__ import annotations

import pytest

from trellis.module_config import get as get_config

SID = "AC" + "a" * 32


def test_default_config(client, admin_headers):
    response = client.get("/admin/sms/config", headers=admin_headers)
    assert response.status_code == 200
    assert response.get_json() == {"active": True, "provider": "outbox", "outbox": {}, "twilio": {}}


def test_put_spec_body_is_merged_and_shared_with_config_route(client, admin_headers):
    body = {"provider": "twilio", "twilio": {"accountSid": SID, "authToken": "secret", "phoneNumber": "+15005550006"}}
    response = client.put("/admin/sms/config", json=body, headers=admin_headers)
    assert response.status_code == 200, response.get_json()
    config = response.get_json()
    assert config["provider"] == "twilio"
    assert config["twilio"] == {**body["twilio"], "authToken": "********", "baseUrl": "https://api.twilio.com"}
    assert config["active"] is True
    # One store: the core's /config/sms sees the same configuration.
    assert client.get("/config/sms", headers=admin_headers).get_json() == config
    # A later partial change keeps the rest.
    changed = client.put("/admin/sms/config", json={"twilio": {"authToken": "rotated"}}, headers=admin_headers)
    assert changed.status_code == 200
    assert changed.get_json()["twilio"]["accountSid"] == SID
    assert changed.get_json()["twilio"]["authToken"] == "********"
    assert get_config("sms")["twilio"]["authToken"] == "rotated"


def test_put_normalises_sender_number(client, admin_headers):
    body = {"provider": "twilio", "twilio": {"accountSid": SID, "authToken": "t", "phoneNumber": "+1 500 555 0006"}}
    response = client.put("/admin/sms/config", json=body, headers=admin_headers)
    assert response.get_json()["twilio"]["phoneNumber"] == "+15005550006"


def test_twilio_needs_credentials(client, admin_headers):
    response = client.put("/admin/sms/config", json={"provider": "twilio"}, headers=admin_headers)
    assert response.status_code == 400
    errors = response.get_json()["errors"]
    assert set(errors["twilio"]) == {"accountSid", "authToken", "phoneNumber"}
    assert client.get("/admin/sms/config", headers=admin_headers).get_json()["provider"] == "outbox"


@pytest.mark.parametrize(
    "body",
    [
        {"provider": "carrier-pigeon"},
        {"provider": "twilio", "twilio": {"accountSid": "nope", "authToken": "t", "phoneNumber": "+15005550006"}},
        {"provider": "twilio", "twilio": {"accountSid": SID, "authToken": "t", "phoneNumber": "5550006"}},
        {"twilio": {"baseUrl": "ftp://example.com"}},
        {"twilio": {"region": "us1"}},
        {"outbox": {"keep": True}},
        {"colour": "blue"},
        {"active": "maybe"},
    ],
)
def test_put_rejects_invalid_config(client, admin_headers, body):
    response = client.put("/admin/sms/config", json=body, headers=admin_headers)
    assert response.status_code == 400, response.get_json()
    assert response.get_json()["name"] == "INVALID_ARGUMENTS"
    assert client.get("/admin/sms/config", headers=admin_headers).get_json()["provider"] == "outbox"


def test_config_routes_need_admin(client):
    assert client.get("/admin/sms/config").status_code == 401
    assert client.put("/admin/sms/config", json={"provider": "outbox"}).status_code == 401
    assert client.put("/admin/sms/config", json={"provider": "outbox"}, headers={"masterkey": "x"}).status_code == 401


def test_config_accepts_admin_bearer(client, admin_token):
    headers = {"Authorization": f"Bearer {admin_token}"}
    assert client.put("/admin/sms/config", json={"active": False}, headers=headers).get_json()["active"] is False
