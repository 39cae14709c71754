"""Email verification on register, the verify-email hook, resend, and the templates in the Email module."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import update

from trellis import db as trellis_db
from trellis_authentication.models import AuthToken

from .conftest import link_in, path_of

HOOK = "/hook/authentication/verify-email/"


def register_and_link(api, email: str) -> str:
    assert api.register(email).status_code == 201
    mails = api.mails(email)
    assert len(mails) == 1 and mails[0]["templateName"] == "EmailVerification"
    return link_in(mails[0])


def test_register_mails_a_link_that_verifies_the_address_once(api):
    email = api.fresh_email()
    link = register_and_link(api, email)
    assert link.startswith("http://localhost" + HOOK)  # default hostUrl: the request's own base URL
    answer = api.get(path_of(link))
    assert answer.status_code == 200 and answer.get_json() == {"message": "Email address verified"}
    tokens = api.login(email, "long-enough-1").get_json()
    assert api.me(tokens["accessToken"]).get_json()["isVerified"] is True
    again = api.get(path_of(link))
    assert again.status_code == 404 and again.get_json()["name"] == "NOT_FOUND"


def test_unknown_or_expired_verification_link_is_404(api, db):
    assert api.get(HOOK + "no-such-token").status_code == 404
    email = api.fresh_email()
    link = register_and_link(api, email)
    db.execute(update(AuthToken).values(expires_at=trellis_db.utcnow() - timedelta(seconds=1)))
    assert api.get(path_of(link)).status_code == 404


def test_links_use_host_url_and_redirect_uri(api):
    api.configure(
        hostUrl="https://api.example.com/", local={"verification": {"redirectUri": "https://app.example.com/ok"}}
    )
    link = register_and_link(api, api.fresh_email())
    assert link.startswith("https://api.example.com" + HOOK)
    answer = api.get(path_of(link))
    assert answer.status_code == 302 and answer.headers["Location"] == "https://app.example.com/ok"


def test_required_verification_refuses_sign_in_until_verified(api):
    api.configure(local={"verification": {"required": True}})
    email = api.fresh_email()
    link = register_and_link(api, email)
    refused = api.login(email, "long-enough-1")
    assert refused.status_code == 403 and "Verify" in refused.get_json()["message"]
    assert api.get(path_of(link)).status_code == 200
    assert api.login(email, "long-enough-1").status_code == 200


def test_send_email_false_sends_nothing(api):
    api.configure(local={"verification": {"sendEmail": False}})
    email = api.fresh_email()
    assert api.register(email).status_code == 201
    assert api.mails(email) == []


def test_resend_answers_the_same_for_known_and_unknown_addresses(api):
    email = api.fresh_email()
    first = register_and_link(api, email)
    known = api.post("/authentication/local/resend-verification", {"email": email})
    unknown = api.post("/authentication/local/resend-verification", {"email": api.fresh_email()})
    assert known.status_code == unknown.status_code == 200
    assert known.get_json() == unknown.get_json()
    mails = api.mails(email)
    assert len(mails) == 2
    # Only the newest link works.
    assert api.get(path_of(first)).status_code == 404
    assert api.get(path_of(link_in(mails[0]))).status_code == 200
    # A verified address gets nothing more, with the same answer.
    assert api.post("/authentication/local/resend-verification", {"email": email}).get_json() == known.get_json()
    assert len(api.mails(email)) == 2


def test_resend_queues_the_mail_with_its_link_hidden(api, client, admin_headers):
    """The answer leaves the mail queued (the background senders send it); the outbox never lists its link."""
    email = api.fresh_email()
    api.configure(local={"verification": {"sendEmail": False}})
    api.register(email)
    response = client.post("/authentication/local/resend-verification", json={"email": email})
    assert response.status_code == 200
    listed = client.get("/admin/email/outbox?status=queued", headers=admin_headers).get_json()["messages"]
    queued = [m for m in listed if m["to"] == email]
    assert len(queued) == 1 and "[hidden]" in queued[0]["body"] and "verify-email/" not in queued[0]["body"]
    assert api.smtp.messages == []  # nothing sent while answering
    sent = api.mails(email)
    assert [m["status"] for m in sent] == ["sent"] and "/verify-email/" in link_in(sent[0])
    listed = client.get("/admin/email/outbox", headers=admin_headers).get_json()["messages"]
    assert "verify-email/" not in next(m for m in listed if m["to"] == email)["body"]


def test_resend_with_a_malformed_email_is_400(api):
    answer = api.post("/authentication/local/resend-verification", {"email": "not-an-email"})
    assert answer.status_code == 400 and "email" in answer.get_json()["errors"]


def test_email_module_inactive_is_400_naming_it(api):
    api.module("email", active=False)
    email = api.fresh_email()
    refused = api.register(email)
    assert refused.status_code == 400 and "email" in refused.get_json()["message"]
    assert api.login(email, "long-enough-1").status_code == 401  # nothing was created
    resend = api.post("/authentication/local/resend-verification", {"email": email})
    assert resend.status_code == 400 and "email module" in resend.get_json()["message"]
    api.configure(local={"verification": {"sendEmail": False}})
    assert api.register(email).status_code == 201


def test_templates_are_created_in_the_email_module_and_editable(api, client, admin_headers):
    register_and_link(api, api.fresh_email())
    listed = client.get("/admin/email/templates", headers=admin_headers).get_json()["templates"]
    by_name = {t["name"]: t for t in listed}
    assert {"EmailVerification", "ForgotPassword", "ChangeEmailVerification", "MagicLink"} <= set(by_name)
    assert by_name["EmailVerification"]["variables"] == ["link"]
    template_id = by_name["EmailVerification"]["_id"]
    edited = client.put(
        f"/admin/email/templates/{template_id}",
        headers=admin_headers,
        json={"subject": "Welcome aboard", "body": '<a href="{{link}}">confirm</a>'},
    )
    assert edited.status_code == 200
    email = api.fresh_email()
    api.register(email)
    assert api.mails(email)[0]["subject"] == "Welcome aboard"
    # A deleted template comes back with the default text on the next send.
    assert client.delete(f"/admin/email/templates/{template_id}", headers=admin_headers).status_code == 200
    email = api.fresh_email()
    api.register(email)
    assert api.mails(email)[0]["subject"] == "Confirm your email address"


def test_templates_are_created_at_start(app_config, db, admin_headers):
    from trellis import create_app

    client = create_app(app_config).test_client()  # the test database is migrated: init_app creates them
    names = {t["name"] for t in client.get("/admin/email/templates", headers=admin_headers).get_json()["templates"]}
    assert {"EmailVerification", "ForgotPassword", "ChangeEmailVerification", "MagicLink"} <= names


@pytest.mark.parametrize("limit_key", ["sendPerAddress", "sendPerIp"])
def test_resend_is_rate_limited_for_known_and_unknown_addresses(api, limit_key):
    api.configure(rateLimits={limit_key: "2/minute"})
    known = api.fresh_email()
    api.configure(local={"verification": {"sendEmail": False}})
    api.register(known)
    for email in (known, api.fresh_email()):
        ip = api.fresh_ip()
        statuses = [
            api.post(
                "/authentication/local/resend-verification",
                {"email": email},
                ip=ip if limit_key == "sendPerIp" else None,
            ).status_code
            for _ in range(3)
        ]
        assert statuses == [200, 200, 429]


def test_verification_mail_through_a_real_smtp_server(api, client, admin_headers, smtp_server):
    configured = client.put(
        "/admin/email/config",
        headers=admin_headers,
        json={**smtp_server.email_config(), "from": "accounts@example.com"},
    )
    assert configured.status_code == 200, configured.get_json()
    email = api.fresh_email()
    assert api.register(email).status_code == 201
    assert smtp_server.messages == []  # queued: the background senders send it
    assert [m["status"] for m in api.mails(email)] == ["sent"]
    assert len(smtp_server.messages) == 1
    delivery = smtp_server.messages[0]
    assert delivery.rcpt_tos == [email]
    assert delivery.message["Subject"] == "Confirm your email address"
    html = delivery.message.get_body(("html",)).get_content()
    link = link_in({"body": html})
    assert api.get(path_of(link)).status_code == 200
    tokens = api.login(email, "long-enough-1").get_json()
    assert api.me(tokens["accessToken"]).get_json()["isVerified"] is True


def test_register_succeeds_when_the_verification_mail_cannot_be_made(api, client, admin_headers):
    """A template the Email module cannot render must not turn a stored registration into an error."""
    register_and_link(api, api.fresh_email())  # the templates exist now
    templates = client.get("/admin/email/templates", headers=admin_headers).get_json()["templates"]
    template_id = next(t["_id"] for t in templates if t["name"] == "EmailVerification")
    edited = client.put(
        f"/admin/email/templates/{template_id}",
        headers=admin_headers,
        json={"body": "Hello {{firstName}}, confirm: {{link}}"},
    )
    assert edited.status_code == 200
    email = api.fresh_email()
    assert api.register(email).status_code == 201
    assert api.mails(email) == []
    assert api.login(email, "long-enough-1").status_code == 200
