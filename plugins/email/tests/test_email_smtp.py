"""The smtp provider against a real SMTP server (aiosmtpd on 127.0.0.1): MIME, STARTTLS, SSL, AUTH, failures."""

import socket

import pytest
from aiosmtpd.smtp import AuthResult

USER, PASSWORD = "mailer", "s3cret-smtp-password"


def send(client, headers, **body):
    return client.post("/email/send", json=body, headers=headers)


def last_record(client, headers):
    return client.get("/admin/email/outbox?limit=1", headers=headers).get_json()["messages"][0]


def _authenticator(server, session, envelope, mechanism, auth_data):
    ok = (auth_data.login, auth_data.password) == (USER.encode(), PASSWORD.encode())
    return AuthResult(success=ok, handled=False)  # handled=False: aiosmtpd answers 535 itself


@pytest.fixture()
def tls(private_ca, monkeypatch):
    """The client (this process) trusts the private CA through SSL_CERT_FILE; the server context."""
    monkeypatch.setenv("SSL_CERT_FILE", private_ca.ca_file)
    return private_ca.server_context


def test_plain_smtp_delivers_a_proper_mime_message(client, admin_headers, configure_email, smtp_server):
    configure_email(**smtp_server.email_config(), **{"from": "Shop <shop@example.com>"})
    html = "<html><head><style>p{}</style></head><body><p>Hello <b>Ada</b></p><p>Bye</p></body></html>"
    response = send(client, admin_headers, to="Ada <ada@example.com>", subject="Grüße", body=html)
    assert response.status_code == 200, response.get_json()

    (delivery,) = smtp_server.messages
    assert delivery.mail_from == "shop@example.com"
    assert delivery.rcpt_tos == ["ada@example.com"]
    mime = delivery.message
    assert mime["From"] == "Shop <shop@example.com>"
    assert mime["To"] == "Ada <ada@example.com>"
    assert mime["Subject"] == "Grüße"
    assert mime["Date"]
    assert mime.get_content_type() == "multipart/alternative"
    plain = mime.get_body(("plain",)).get_content().replace("\r\n", "\n")
    assert plain.strip() == "Hello Ada\n\nBye"  # the text alternative, without the <style>
    assert mime.get_body(("html",)).get_content().strip() == html

    record = last_record(client, admin_headers)
    assert record["_id"] == response.get_json()["messageId"]
    assert (record["provider"], record["status"]) == ("smtp", "sent")
    assert record["providerMessageId"] == mime["Message-ID"]
    assert mime["Message-ID"].endswith("@example.com>")


def test_display_names_are_kept_readable_and_encoded_on_the_wire(client, admin_headers, configure_email, smtp_server):
    configure_email(**smtp_server.email_config())
    response = send(client, admin_headers, to='"Jürgen, Jr." <j@example.com>', subject="s", body="b")
    assert response.status_code == 200
    assert last_record(client, admin_headers)["to"] == '"Jürgen, Jr." <j@example.com>'
    mime = smtp_server.messages[0].message
    assert mime["To"].addresses[0].display_name == "Jürgen, Jr."
    assert mime["To"].addresses[0].addr_spec == "j@example.com"


def test_template_send_over_smtp_carries_the_escaped_body(client, admin_headers, configure_email, smtp_server):
    configure_email(**smtp_server.email_config())
    template = {"name": "hello", "subject": "Hi {{ who }}", "body": "<p>{{ who }}</p>"}
    assert client.post("/admin/email/templates", json=template, headers=admin_headers).status_code == 201
    response = send(client, admin_headers, to="ada@example.com", templateName="hello", variables={"who": "<i>Ada</i>"})
    assert response.status_code == 200
    mime = smtp_server.messages[0].message
    assert mime["Subject"] == "Hi <i>Ada</i>"
    assert mime.get_body(("html",)).get_content().strip() == "<p>&lt;i&gt;Ada&lt;/i&gt;</p>"


def test_starttls_with_login(client, admin_headers, configure_email, smtp_server_factory, tls):
    server = smtp_server_factory(
        tls_context=tls, require_starttls=True, authenticator=_authenticator, auth_required=True
    )
    configure_email(**server.email_config(secure="starttls", username=USER, password=PASSWORD))
    response = send(client, admin_headers, to="ada@example.com", subject="over tls", body="<p>x</p>")
    assert response.status_code == 200, response.get_json()
    (delivery,) = server.messages
    assert delivery.tls and delivery.authenticated


def test_implicit_tls(client, admin_headers, configure_email, smtp_server_factory, tls):
    server = smtp_server_factory(ssl_context=tls)
    configure_email(**server.email_config(secure="ssl"))
    response = send(client, admin_headers, to="ada@example.com", subject="smtps", body="<p>x</p>")
    assert response.status_code == 200, response.get_json()
    assert server.messages[0].tls


def test_an_untrusted_certificate_is_refused(
    client, admin_headers, configure_email, smtp_server_factory, tls, monkeypatch
):
    server = smtp_server_factory(tls_context=tls, require_starttls=True)
    monkeypatch.delenv("SSL_CERT_FILE")  # the private CA is no longer trusted
    configure_email(**server.email_config(secure="starttls"))
    response = send(client, admin_headers, to="ada@example.com", subject="s", body="b")
    assert response.status_code == 500
    assert response.get_json()["name"] == "PROVIDER_ERROR"
    assert server.messages == []
    assert "certificate verify failed" in last_record(client, admin_headers)["error"]


def test_starttls_never_falls_back_to_plain_text(client, admin_headers, configure_email, smtp_server):
    configure_email(**smtp_server.email_config(secure="starttls"))
    response = send(client, admin_headers, to="ada@example.com", subject="s", body="b")
    assert response.status_code == 500
    assert smtp_server.messages == []
    assert "STARTTLS" in last_record(client, admin_headers)["error"]


def test_wrong_password_fails_without_revealing_it(client, admin_headers, configure_email, smtp_server_factory, tls):
    server = smtp_server_factory(
        tls_context=tls, require_starttls=True, authenticator=_authenticator, auth_required=True
    )
    configure_email(**server.email_config(secure="starttls", username=USER, password="wrong-password-123"))
    response = send(client, admin_headers, to="ada@example.com", subject="s", body="b")
    assert response.status_code == 500
    body = response.get_json()
    assert body["name"] == "PROVIDER_ERROR" and "authentication failed (535)" in body["message"]
    record = last_record(client, admin_headers)
    assert record["status"] == "failed" and record["error"] == "SMTP authentication failed (535)"
    assert "wrong-password-123" not in response.get_data(as_text=True)


def test_server_down_is_a_provider_error_and_the_failure_is_recorded(
    client, admin_headers, configure_email, smtp_server
):
    configure_email(**smtp_server.email_config())
    smtp_server.stop()
    response = send(client, admin_headers, to="ada@example.com", subject="lost?", body="<p>b</p>")
    assert response.status_code == 500
    body = response.get_json()
    assert body["name"] == "PROVIDER_ERROR"
    # The failed record was committed before the error answer: a later request still sees it.
    record = last_record(client, admin_headers)
    assert record["subject"] == "lost?" and record["status"] == "failed"
    assert record["error"] == f"Cannot reach SMTP server 127.0.0.1:{smtp_server.port}: Connection refused"
    assert record["_id"] in body["message"]


def test_refused_recipient_is_recorded(client, admin_headers, configure_email, smtp_server_factory):
    server = smtp_server_factory(refuse={"gone@example.com"})
    configure_email(**server.email_config())
    response = send(client, admin_headers, to="gone@example.com", subject="s", body="b")
    assert response.status_code == 500
    assert "550" in last_record(client, admin_headers)["error"]


def test_a_silent_server_times_out(client, admin_headers, configure_email):
    with socket.socket() as silent:  # accepts connections (backlog) but never greets
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        port = silent.getsockname()[1]
        configure_email(provider="smtp", smtp={"host": "127.0.0.1", "port": port, "secure": "none", "timeout": 0.3})
        response = send(client, admin_headers, to="ada@example.com", subject="s", body="b")
    assert response.status_code == 500
    assert last_record(client, admin_headers)["error"] == f"SMTP server 127.0.0.1:{port} did not answer within 0.3 s"
