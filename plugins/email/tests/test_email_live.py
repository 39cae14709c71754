"""The real server process (eventlet, monkey-patched sockets and ssl) sending over STARTTLS with AUTH."""

import pytest
import requests
from aiosmtpd.smtp import AuthResult

from trellis.testing.plugin import TEST_MASTER_KEY

pytestmark = pytest.mark.live

ADMIN = {"masterkey": TEST_MASTER_KEY}


def test_eventlet_server_sends_over_starttls(live_server_factory, smtp_server_factory, private_ca):
    def authenticate(server, session, envelope, mechanism, auth_data):
        return AuthResult(success=(auth_data.login, auth_data.password) == (b"live", b"live-password"), handled=False)

    smtp = smtp_server_factory(
        tls_context=private_ca.server_context, require_starttls=True, authenticator=authenticate, auth_required=True
    )
    live = live_server_factory(SSL_CERT_FILE=private_ca.ca_file)
    config = smtp.email_config(secure="starttls", username="live", password="live-password")
    assert requests.put(f"{live.url}/admin/email/config", json=config, headers=ADMIN, timeout=10).status_code == 200

    response = requests.post(
        f"{live.url}/email/send",
        json={"to": "ada@example.com", "subject": "live", "body": "<p>x</p>"},
        headers=ADMIN,
        timeout=30,
    )
    assert response.status_code == 200, response.text
    (delivery,) = smtp.messages
    assert delivery.tls and delivery.authenticated
    assert delivery.message["Subject"] == "live"
    outbox = requests.get(f"{live.url}/admin/email/outbox", headers=ADMIN, timeout=10).json()
    assert outbox["messages"][0]["_id"] == response.json()["messageId"]
