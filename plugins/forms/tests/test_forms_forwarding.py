"""Forwarding submissions by e-mail through the Email module: a real SMTP server, a dead one, inactive Email."""

import pytest


@pytest.fixture(autouse=True)
def needs_email_module(app):
    if app.extensions["trellis"].module("email") is None:
        pytest.skip("forwarding tests need the Email module (TRELLIS_MODULES=email,forms)")


@pytest.fixture()
def forwarding_form(make_form):
    return make_form(forwardTo="owner@example.com")


def configure_email(client, admin_headers, **changes):
    response = client.put("/admin/email/config", json=changes, headers=admin_headers)
    assert response.status_code == 200, response.get_json()


def submission(client, admin_headers, submission_id):
    response = client.get(f"/admin/forms/submissions/{submission_id}", headers=admin_headers)
    assert response.status_code == 200
    return response.get_json()


def test_submission_is_forwarded_through_smtp(client, admin_headers, smtp_server, forwarding_form, valid_submission):
    configure_email(client, admin_headers, **smtp_server.email_config(), **{"from": "Forms <forms@example.com>"})
    body = {**valid_submission, "message": "<b>hi</b> & bye\nsecond line", "newsletter": True}
    response = client.post(f"/forms/submit/{forwarding_form['_id']}", json=body)
    assert response.status_code == 201
    submission_id = response.get_json()["submissionId"]

    (delivery,) = smtp_server.messages
    assert delivery.rcpt_tos == ["owner@example.com"]
    mime = delivery.message
    assert (mime["To"], mime["From"], mime["Subject"]) == (
        "owner@example.com",
        "Forms <forms@example.com>",
        "New submission: Contact",
    )
    html = mime.get_body(("html",)).get_content()
    assert "&lt;b&gt;hi&lt;/b&gt; &amp; bye<br>second line" in html  # submitted text cannot inject HTML
    assert '<th align="left">email</th><td>Ada@example.com</td>' in html
    assert '<th align="left">newsletter</th><td>yes</td>' in html
    assert submission_id in html

    stored = submission(client, admin_headers, submission_id)
    assert (stored["forwardStatus"], stored["forwardError"]) == ("sent", None)
    outbox = client.get("/admin/email/outbox", headers=admin_headers).get_json()["messages"]
    assert outbox[0]["_id"] == stored["forwardMessageId"]
    assert outbox[0]["to"] == "owner@example.com" and outbox[0]["status"] == "sent"


def test_failed_forward_keeps_the_submission_and_shows_why(
    client, admin_headers, smtp_server, forwarding_form, valid_submission
):
    configure_email(client, admin_headers, **smtp_server.email_config())
    smtp_server.stop()  # the mail server is down
    response = client.post(f"/forms/submit/{forwarding_form['_id']}", json=valid_submission)
    assert response.status_code == 201  # the visitor's submission was accepted all the same
    stored = submission(client, admin_headers, response.get_json()["submissionId"])
    assert stored["data"]["name"] == "Ada Lovelace"
    assert stored["forwardStatus"] == "failed"
    assert stored["forwardError"] == f"Cannot reach SMTP server 127.0.0.1:{smtp_server.port}: Connection refused"
    record = client.get("/admin/email/outbox", headers=admin_headers).get_json()["messages"][0]
    assert (record["_id"], record["status"]) == (stored["forwardMessageId"], "failed")


def test_outbox_provider_keeps_the_forwarded_message(client, admin_headers, forwarding_form, valid_submission):
    response = client.post(f"/forms/submit/{forwarding_form['_id']}", json=valid_submission)
    stored = submission(client, admin_headers, response.get_json()["submissionId"])
    assert stored["forwardStatus"] == "sent"
    record = client.get("/admin/email/outbox", headers=admin_headers).get_json()["messages"][0]
    assert (record["provider"], record["subject"]) == ("outbox", "New submission: Contact")


def test_inactive_email_module_skips_forwarding(client, admin_headers, forwarding_form, valid_submission):
    configure_email(client, admin_headers, active=False)
    response = client.post(f"/forms/submit/{forwarding_form['_id']}", json=valid_submission)
    assert response.status_code == 201
    stored = submission(client, admin_headers, response.get_json()["submissionId"])
    assert (stored["forwardStatus"], stored["forwardMessageId"]) == ("skipped", None)
    assert client.get("/admin/email/outbox", headers=admin_headers).get_json()["count"] == 0


def test_without_forward_to_nothing_is_sent(client, admin_headers, contact, valid_submission):
    response = client.post(f"/forms/submit/{contact['_id']}", json=valid_submission)
    assert submission(client, admin_headers, response.get_json()["submissionId"])["forwardStatus"] is None
    assert client.get("/admin/email/outbox", headers=admin_headers).get_json()["count"] == 0


def test_honeypot_submissions_are_not_forwarded(client, admin_headers, forwarding_form, valid_submission):
    client.post(f"/forms/submit/{forwarding_form['_id']}", json={**valid_submission, "_gotcha": "bot"})
    assert client.get("/admin/email/outbox", headers=admin_headers).get_json()["count"] == 0
