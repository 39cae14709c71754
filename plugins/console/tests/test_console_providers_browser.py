"""The console configures sign-in providers (the authentication card is generated from the config schema):
a named provider through its group of fields, a generic OpenID Connect provider through the JSON list."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from playwright.sync_api import expect

from .test_console_browser import Console, browser, console  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.live]


def test_configure_sign_in_providers(console: Console, app: Any) -> None:
    page = console.page
    console.sign_in()
    console.open("modules")
    card = page.locator("#module-authentication")
    google = card.locator("fieldset[data-error-key='oauth.google']")
    expect(google.locator("input[name='oauth.google.clientSecret']")).to_have_attribute("type", "password")

    # Enabled without a client id: refused next to the field, nothing stored.
    google.locator("input[name='oauth.google.enabled']").check()
    card.locator("button[type=submit]").click()
    expect(card.locator(".field-error")).not_to_have_count(0)
    assert console.api("GET", "/config/authentication")["oauth"]["google"]["enabled"] is False

    client_id = f"{uuid.uuid4().hex}.apps.googleusercontent.com"
    google.locator("input[name='oauth.google.clientId']").fill(client_id)
    google.locator("input[name='oauth.google.clientSecret']").fill("console-secret")
    oidc = [{"name": "acme", "issuer": "https://id.acme.example", "clientId": "acme-app", "clientSecret": "s3"}]
    card.locator("textarea[name='oauth.oidc']").fill(json.dumps(oidc))
    card.locator("button[type=submit]").click()
    expect(card.locator(".form-status")).to_have_text("Saved.")

    stored: dict[str, Any] = console.api("GET", "/config/authentication")["oauth"]
    assert (stored["google"]["enabled"], stored["google"]["clientId"]) == (True, client_id)
    assert stored["google"]["clientSecret"] == "********"  # secrets are masked in answers
    with app.app_context():  # the live server shares the test database: read what it stored
        from trellis.module_config import get as get_config

        assert get_config("authentication")["oauth"]["google"]["clientSecret"] == "console-secret"
    assert [(p["name"], p["issuer"], p["enabled"]) for p in stored["oidc"]] == [
        ("acme", "https://id.acme.example", True)
    ]
    # The providers answer at once: init redirects to Google's sign-in page with our client id.
    import requests

    started = requests.get(f"{console.url}/authentication/init/google", allow_redirects=False, timeout=10)
    assert started.status_code == 302
    assert started.headers["Location"].startswith("https://accounts.google.com/o/oauth2/v2/auth?")
    assert f"client_id={client_id}" in started.headers["Location"]
