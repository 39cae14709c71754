"""The durable outbox in one process: queueing in the caller's transaction, what the listing shows of a
secret link, sending through a real SMTP server (aiosmtpd), retries and giving up. The background senders
and other processes are covered by the Authentication module's live tests."""

from datetime import timedelta

import pytest
from sqlalchemy import update

from trellis import db
from trellis.errors import APIError
from trellis.testing.plugin import free_port
from trellis_email.models import EmailMessage
from trellis_email.outbox import RETRY_SECONDS, queue_email, queue_template, send_queued

LINK = "https://app.example.com/reset?reset_token=s3cret-token-value"


@pytest.fixture()
def reset_template(client, admin_headers):
    body = {"name": "Reset", "subject": "Reset for {{name}}", "body": '<p>Hi {{name}}, <a href="{{link}}">go</a></p>'}
    assert client.post("/admin/email/templates", json=body, headers=admin_headers).status_code == 201


def listed(client, headers, query=""):
    return client.get(f"/admin/email/outbox{query}", headers=headers).get_json()["messages"]


def test_a_queued_secret_is_listed_hidden_sent_in_clear_then_deleted(
    client, admin_headers, configure_email, smtp_server, reset_template
):
    configure_email(**smtp_server.email_config())
    message_id = queue_template("ada@example.com", "Reset", {"name": "Ada", "link": LINK}, secret=("link",))
    db.session.commit()
    (queued,) = listed(client, admin_headers, "?status=queued")
    assert queued["_id"] == message_id and queued["nextAttemptAt"] and queued["attempts"] == 0
    assert queued["body"] == '<p>Hi Ada, <a href="[hidden]">go</a></p>' and queued["subject"] == "Reset for Ada"
    assert smtp_server.messages == []  # queueing sends nothing

    assert send_queued() == 1
    (delivery,) = smtp_server.messages
    assert delivery.rcpt_tos == ["ada@example.com"]
    assert LINK.replace("&", "&amp;") in delivery.message.get_body(("html",)).get_content()
    (sent,) = listed(client, admin_headers)
    assert (sent["status"], sent["attempts"], sent["nextAttemptAt"]) == ("sent", 1, None)
    assert sent["providerMessageId"] == delivery.message["Message-ID"] and "s3cret" not in str(sent)
    assert db.session.get(EmailMessage, message_id).secret_content is None  # kept no longer than needed
    assert send_queued() == 0  # sent once


def test_the_outbox_provider_delivers_the_secret_into_the_listing(client, admin_headers, reset_template):
    """With the default provider the listing is the only mailbox: the delivered message carries the link."""
    message_id = queue_template("ada@example.com", "Reset", {"name": "Ada", "link": LINK}, secret=("link",))
    db.session.commit()
    (queued,) = listed(client, admin_headers, "?status=queued")
    assert "[hidden]" in queued["body"]  # hidden while it waits
    assert send_queued() == 1
    (sent,) = listed(client, admin_headers)
    assert sent["status"] == "sent" and sent["provider"] == "outbox"
    assert sent["body"] == f'<p>Hi Ada, <a href="{LINK.replace("&", "&amp;")}">go</a></p>'
    assert db.session.get(EmailMessage, message_id).secret_content is None


def test_a_rolled_back_transaction_queues_nothing(client, admin_headers, reset_template):
    queue_template("ada@example.com", "Reset", {"name": "Ada", "link": LINK}, secret=("link",))
    db.session.rollback()
    assert listed(client, admin_headers) == [] and send_queued() == 0


def test_bad_input_is_refused_when_queueing(client, admin_headers, reset_template):
    with pytest.raises(APIError) as refused:
        queue_email("not an address", "Subject", "<p>x</p>")
    assert (refused.value.status, list(refused.value.errors)) == (400, ["to"])
    with pytest.raises(APIError) as refused:
        queue_template("ada@example.com", "Reset", {"name": "Ada"})
    assert refused.value.status == 400  # missing variable
    with pytest.raises(APIError) as refused:
        queue_template("ada@example.com", "Nope", {})
    assert refused.value.status == 404
    assert listed(client, admin_headers) == []


def test_a_failed_send_is_retried_later_then_given_up(client, admin_headers, configure_email, reset_template):
    configure_email(provider="smtp", smtp={"host": "127.0.0.1", "port": free_port(), "secure": "none", "timeout": 2})
    message_id = queue_template("ada@example.com", "Reset", {"name": "Ada", "link": LINK}, secret=("link",))
    db.session.commit()
    before = db.utcnow()
    assert send_queued() == 1  # refused: due again after the first delay, not now
    (retrying,) = listed(client, admin_headers)
    assert (retrying["status"], retrying["attempts"]) == ("queued", 1)
    assert "Cannot reach SMTP server" in retrying["error"]
    row = db.session.get(EmailMessage, message_id)
    db.session.refresh(row)
    assert before + timedelta(seconds=RETRY_SECONDS[0] * 0.89) <= row.next_attempt_at
    assert row.next_attempt_at <= db.utcnow() + timedelta(seconds=RETRY_SECONDS[0] * 1.11)
    assert row.secret_content is not None

    # The last attempt of the schedule, due now, fails too: given up, and the secret deleted.
    db.session.execute(
        update(EmailMessage)
        .where(EmailMessage.id == message_id)
        .values(attempts=len(RETRY_SECONDS), next_attempt_at=db.utcnow())
    )
    db.session.commit()
    assert send_queued() == 1
    db.session.expire_all()  # the test's requests share its session: forget the row as loaded above
    (failed,) = listed(client, admin_headers, "?status=failed")
    assert failed["attempts"] == len(RETRY_SECONDS) + 1 and failed["nextAttemptAt"] is None
    db.session.refresh(row)
    assert row.secret_content is None
