"""The audit log: entries in the change's transaction, actors, secrets masked, GET /admin/audit filters."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import func, select

from trellis import audit
from trellis import db as trellis_db
from trellis.models import AuditEntry
from trellis.redact import MASK

SMTP_SECRET = "smtp-password-do-not-show"
MAILGUN_KEY = "key-mailgun-do-not-show"


def _entries(client, headers, **params):
    response = client.get("/admin/audit", query_string=params, headers=headers)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def test_config_change_is_recorded_with_secrets_masked(client, admin_headers, caplog):
    body = {"provider": "smtp", "smtp": {"host": "127.0.0.1", "username": "u", "password": SMTP_SECRET}}
    with caplog.at_level(logging.INFO, logger="trellis.audit"):
        assert client.put("/config/email", json=body, headers=admin_headers).status_code == 200
    found = _entries(client, admin_headers, module="email")
    assert found["count"] == 1
    entry = found["entries"][0]
    assert entry["action"] == "config.update" and entry["target"] == "email"
    assert entry["actor"] == {"type": "masterkey"}
    assert entry["changes"]["smtp"] == {"host": "127.0.0.1", "username": "u", "password": MASK}
    assert entry["ip"] == "127.0.0.1"
    assert entry["requestId"] and entry["createdAt"].endswith("Z")
    assert SMTP_SECRET not in caplog.text and "config.update" in caplog.text


def test_get_config_masks_secrets_and_a_masked_value_sent_back_keeps_the_secret(client, admin_headers):
    body = {"provider": "mailgun", "mailgun": {"apiKey": MAILGUN_KEY, "domain": "mg.example.com"}}
    assert client.put("/admin/email/config", json=body, headers=admin_headers).status_code == 200
    for path in ("/config/email", "/admin/email/config"):
        shown = client.get(path, headers=admin_headers).get_json()
        assert shown["mailgun"]["apiKey"] == MASK, path
        assert shown["smtp"]["password"] == "", "an unset secret is shown as unset"
        assert MAILGUN_KEY not in str(shown)
    # A form that PUTs back what it read (masked) must not overwrite the key with the mask.
    shown = client.get("/config/email", headers=admin_headers).get_json()
    shown["mailgun"]["domain"] = "mg2.example.com"
    response = client.put("/config/email", json=shown, headers=admin_headers)
    assert response.status_code == 200, response.get_json()
    assert response.get_json()["mailgun"]["apiKey"] == MASK
    with client.application.test_request_context():
        from trellis.module_config import get

        stored = get("email")
    assert stored["mailgun"] == {**stored["mailgun"], "apiKey": MAILGUN_KEY, "domain": "mg2.example.com"}
    same = {"mailgun": {"apiKey": MASK}}
    assert client.put("/admin/email/config", json=same, headers=admin_headers).status_code == 200


def test_secret_paths_come_from_the_config_schemas(app):
    from trellis.redact import secret_paths

    configs = app.extensions["trellis"].configs
    assert set(secret_paths(configs.schema("email"))) == {"smtp.password", "mailgun.apiKey", "sendgrid.apiKey"}
    assert secret_paths(configs.schema("sms")) == ["twilio.authToken"]
    assert secret_paths(configs.schema("pushNotifications")) == ["firebase.privateKey"]
    assert secret_paths(configs.schema("storage")) == ["s3.secretAccessKey"]


def test_admin_token_actor_has_id_and_username(client, admin_headers, admin_token):
    bearer = {"Authorization": f"Bearer {admin_token}"}
    assert client.put("/config/forms", json={"active": True}, headers=bearer).status_code == 200
    entry = _entries(client, admin_headers, module="forms")["entries"][0]
    assert entry["actor"]["type"] == "admin"
    assert entry["actor"]["username"] == "admin" and len(entry["actor"]["id"]) == 32


def test_changes_by_users_are_not_administrative(client, admin_headers):
    """Self-registration runs the same service as the admin's user creation, and records nothing."""
    response = client.post("/authentication/local/new", json={"email": "self@example.com", "password": "password1"})
    assert response.status_code == 201
    assert _entries(client, admin_headers, module="authentication")["count"] == 0
    response = client.post(
        "/authentication/users", json={"email": "made@example.com", "password": "password1"}, headers=admin_headers
    )
    assert response.status_code == 201
    found = _entries(client, admin_headers, module="authentication")
    assert found["count"] == 1
    assert found["entries"][0]["changes"] == {"email": "made@example.com"}, "no password in the log"


def test_a_users_change_is_recorded_only_where_the_service_asks(app, client, admin_headers, make_user):
    """``users=True`` (sharing a document changes who may read it, whoever does it) records a user's change
    with the actor ``{type: user, id}``; without it a user's change records nothing, as before."""
    user = make_user()
    with app.test_request_context(headers=user.headers):
        assert audit.record("core", "test.change", "x", {"a": 1}) is None
        entry = audit.record("core", "test.share", "x", {"a": 2}, users=True)
        assert entry is not None and (entry.actor_type, entry.actor_id) == ("user", user.id)
        trellis_db.session.commit()
    with app.test_request_context(headers=admin_headers):
        assert audit.record("core", "test.share", "y", users=True).actor_type == "masterkey"
        trellis_db.session.rollback()
    with app.test_request_context():
        assert audit.record("core", "test.share", "z", users=True) is None  # nobody signed in
    found = _entries(client, admin_headers, module="core", actor=user.id)["entries"]
    assert [(e["action"], e["actor"]) for e in found] == [("test.share", {"type": "user", "id": user.id})]


def test_a_rolled_back_change_leaves_no_entry(app, db, admin_headers):
    def count() -> int:
        return db.execute(select(func.count()).select_from(AuditEntry)).scalar_one()

    before = count()
    with app.test_request_context(headers=admin_headers):
        assert audit.record("core", "test.change", "x", {"a": 1}) is not None
        trellis_db.session.rollback()
        assert count() == before
        audit.record("core", "test.change", "x", {"a": 2})
        trellis_db.session.commit()
    assert count() == before + 1


def test_failed_validation_records_nothing(client, admin_headers):
    assert client.put("/config/email", json={"provider": "carrier-pigeon"}, headers=admin_headers).status_code == 400
    assert _entries(client, admin_headers, module="email")["count"] == 0


def test_cli_changes_are_recorded_with_a_cli_actor(app, db):
    from trellis.admins import create_admin

    with app.app_context():
        admin = create_admin("second-admin", "a-long-password")
    row = db.execute(select(AuditEntry).where(AuditEntry.target == admin.id)).scalar_one()
    assert (row.actor_type, row.action, row.changes) == ("cli", "admin.create", {"username": "second-admin"})


def test_filters_paging_and_order(client, admin_headers, admin_token):
    bearer = {"Authorization": f"Bearer {admin_token}"}
    start = datetime.now(UTC).isoformat()
    client.put("/config/sms", json={"active": True}, headers=admin_headers)
    client.put("/config/forms", json={"active": True}, headers=bearer)
    client.put("/config/chat", json={"active": True}, headers=admin_headers)

    def recent(**params):  # the session's app recorded its first admin (actor cli) before this test
        return _entries(client, admin_headers, since=start, **params)

    every = recent()
    assert every["count"] == 3, every
    assert [e["module"] for e in every["entries"]] == ["chat", "forms", "sms"], "newest first"
    assert recent(module="forms")["entries"][0]["target"] == "forms"
    assert recent(action="config.update")["count"] == 3
    assert recent(action="user.block")["count"] == 0
    assert recent(actor="masterkey")["count"] == 2
    assert [e["module"] for e in recent(actor="admin")["entries"]] == ["forms"], "by username"
    assert recent(actor=recent(module="forms")["entries"][0]["actor"]["id"])["count"] == 1, "by id"
    assert recent(target="sms")["count"] == 1
    page = recent(skip=1, limit=1)
    assert page["count"] == 3 and [e["module"] for e in page["entries"]] == ["forms"]
    later = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()
    assert _entries(client, admin_headers, since=later)["count"] == 0
    assert recent(until=start)["count"] == 0
    # An offset other than UTC means the same instant.
    plus_two = (datetime.now(UTC) + timedelta(minutes=5)).astimezone(timezone(timedelta(hours=2)))
    assert recent(until=plus_two.isoformat())["count"] == 3
    assert _entries(client, admin_headers, module="forms", action="config.update", actor="masterkey")["count"] == 0


@pytest.mark.parametrize(
    "params", [{"limit": 0}, {"limit": 1001}, {"skip": -1}, {"since": "yesterday"}, {"until": "2026-13-01"}]
)
def test_bad_filters_are_400(client, admin_headers, params):
    response = client.get("/admin/audit", query_string=params, headers=admin_headers)
    assert response.status_code == 400
    assert response.get_json()["name"] == "INVALID_ARGUMENTS"


def test_audit_needs_admin_credentials(client):
    assert client.get("/admin/audit").status_code == 401
