"""GET/PUT /admin/email/config: the core ConfigStore behind it, the specification's PUT shape, validation."""

import pytest

from trellis.module_config import get as get_config

MAILGUN_KEY = "key-config-test"


def test_default_config_is_the_outbox(client, admin_headers):
    response = client.get("/admin/email/config", headers=admin_headers)
    assert response.status_code == 200
    config = response.get_json()
    assert config["provider"] == "outbox"
    assert config["active"] is True
    assert config["from"] == "no-reply@localhost"
    assert config["smtp"] == {
        "host": "",
        "port": 587,
        "username": "",
        "password": "",
        "secure": "starttls",
        "timeout": 10.0,
    }
    assert config["mailgun"]["baseUrl"] == "https://api.mailgun.net/v3"
    assert config["sendgrid"]["baseUrl"] == "https://api.sendgrid.com/v3"


def test_config_needs_admin_credentials(client, admin_token):
    assert client.get("/admin/email/config").status_code == 401
    assert client.put("/admin/email/config", json={"provider": "outbox"}).status_code == 401
    assert client.get("/admin/email/config", headers={"masterkey": "wrong"}).status_code == 401
    bearer = {"Authorization": f"Bearer {admin_token}"}
    assert client.get("/admin/email/config", headers=bearer).status_code == 200


def test_put_accepts_the_specification_shape_and_merges(client, admin_headers):
    body = {"provider": "mailgun", "mailgun": {"apiKey": MAILGUN_KEY, "domain": "mg.example.com"}}
    response = client.put("/admin/email/config", json=body, headers=admin_headers)
    assert response.status_code == 200, response.get_json()
    config = response.get_json()
    assert config["provider"] == "mailgun"
    assert config["mailgun"] == {  # the key is a secret field: shown masked
        "apiKey": "********",
        "domain": "mg.example.com",
        "baseUrl": "https://api.mailgun.net/v3",
        "timeout": 10.0,
    }
    # One store: the core route sees the same configuration, and later PUTs merge into it.
    assert client.get("/config/email", headers=admin_headers).get_json() == config
    response = client.put("/admin/email/config", json={"from": "Shop <shop@example.com>"}, headers=admin_headers)
    assert response.get_json()["provider"] == "mailgun"
    assert response.get_json()["from"] == "Shop <shop@example.com>"


def test_sendgrid_accepts_apikey_and_domain_as_the_specification_sends_them(client, admin_headers):
    body = {"provider": "sendgrid", "sendgrid": {"apiKey": "SG.x", "domain": "example.com"}}
    response = client.put("/admin/email/config", json=body, headers=admin_headers)
    assert response.status_code == 200
    assert response.get_json()["sendgrid"]["apiKey"] == "********"
    assert get_config("email")["sendgrid"]["apiKey"] == "SG.x"


def test_chosen_provider_must_be_configured(client, admin_headers):
    response = client.put("/admin/email/config", json={"provider": "mailgun"}, headers=admin_headers)
    assert response.status_code == 400
    assert response.get_json()["errors"] == {
        "mailgun": {"apiKey": ["Required when provider is mailgun."], "domain": ["Required when provider is mailgun."]}
    }
    response = client.put("/admin/email/config", json={"provider": "smtp"}, headers=admin_headers)
    assert response.status_code == 400
    assert response.get_json()["errors"] == {"smtp": {"host": ["Required when provider is smtp."]}}
    # Nothing was stored by the refused changes.
    assert client.get("/admin/email/config", headers=admin_headers).get_json()["provider"] == "outbox"


def test_invalid_values_and_unknown_fields_are_400(client, admin_headers):
    cases = [
        ({"provider": "pigeon"}, "provider"),
        ({"smtp": {"secure": "maybe"}}, "smtp"),
        ({"smtp": {"port": 70000}}, "smtp"),
        ({"mailgun": {"baseUrl": "ftp://x"}}, "mailgun"),
        ({"colour": "blue"}, "colour"),
        ({"smtp": {"hots": "typo"}}, "smtp"),
        ({"from": "not an address"}, "from"),
    ]
    for body, field in cases:
        response = client.put("/admin/email/config", json=body, headers=admin_headers)
        assert response.status_code == 400, body
        assert response.get_json()["name"] == "INVALID_ARGUMENTS"
        assert field in response.get_json()["errors"], (body, response.get_json())


def test_templates_are_listed_as_an_owned_schema(app, client, admin_headers):
    """The Database module's schema list shows EmailTemplate with ownerModule email (when it is loaded)."""
    if app.extensions["trellis"].module("database") is None:
        pytest.skip("needs the database module")
    schemas = client.get("/database/schemas?owner=email", headers=admin_headers).get_json()["schemas"]
    assert [(s["name"], s["ownerModule"]) for s in schemas] == [("EmailTemplate", "email")]
