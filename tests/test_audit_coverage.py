"""Every administrative write records an audit entry: the routes come from the OpenAPI document.

A write operation whose security accepts the master key is administrative. Each one is either exercised
below (``RECIPES``: a successful call, then an audit entry with that call's request id must exist) or
listed in ``NOT_CHANGES`` with the reason it changes no administrative state. A new admin write route
that is in neither fails ``test_every_admin_write_route_is_covered``.
"""

from __future__ import annotations

import io
import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from trellis.openapi import document

WRITE_METHODS = ("post", "put", "patch", "delete")

NOT_CHANGES = {
    "POST /login": "issues an admin token; nothing is changed",
    "POST /email/send": "a send: kept in the email outbox and counted in /metrics, changes no setting or record",
    "POST /sms/send": "a send: kept in the SMS outbox and counted in /metrics",
    "POST /sms/sendMany": "a send: kept in the SMS outbox and counted in /metrics",
    "POST /admin/pushNotifications/send": "a send: kept in the push outbox and counted in /metrics",
    "POST /admin/pushNotifications/sendMany": "a send: kept in the push outbox and counted in /metrics",
    "POST /admin/pushNotifications/sendToTopic": "a send: kept in the push outbox and counted in /metrics",
    "POST /graphql": "queries, and mutations of documents: application data like the document routes below",
    "POST /admin/webhooks/{webhookId}/ping": "a send: kept in the webhook's delivery log and counted in /metrics",
    "POST /admin/webhooks/{webhookId}/deliveries/{deliveryId}/retry": "a send: kept in the delivery log and counted",
    "POST /admin/functions/schedules/{name}/run": "a run of a schedule now: kept in the function log (with its outcome)",
    "POST /admin/project/plan": "a plan: the changes run in a transaction that is rolled back",
}
# Writes of application data, not administration: the documents of admin-defined schemas and the calls of
# custom endpoints (any caller the schema's rules allow, admins included). They are the event log's
# business (live data, webhooks).
DOCUMENT_ROUTES = re.compile(r"^/database/(?!schemas($|/))")

# Covered by a module's own tests, which need that module's fake provider server.
COVERED_IN_MODULE_TESTS = {
    "POST /admin/project/apply": ("tests/test_project.py", "test_a_failure_anywhere_leaves_nothing_applied"),
    **{
        operation: ("tests/test_backups.py", "test_admin_routes_start_list_download_upload_restore_delete")
        for operation in (
            "POST /admin/backups",
            "POST /admin/backups/upload",
            "POST /admin/backups/{name}/restore",
            "DELETE /admin/backups/{name}",
        )
    },
    "POST /admin/email/templates/{templateId}/upload": (
        "plugins/email/tests/test_email_mailgun.py",
        "test_upload_creates_then_updates_the_provider_template",
    ),
    "POST /admin/email/sync": (
        "plugins/email/tests/test_email_mailgun.py",
        "test_sync_pulls_every_page_and_matches_by_id_then_name",
    ),
}


class Caller:
    """Runs one admin write with a known request id, so its audit entry can be found."""

    def __init__(self, client: Any, admin_headers: dict[str, str], make_user: Callable[..., Any]) -> None:
        self.client, self.admin, self.make_user = client, admin_headers, make_user
        self.request_id = uuid.uuid4().hex

    def admin_call(self, method: str, path: str, **kwargs: Any) -> Any:
        headers = {**self.admin, "X-Request-ID": self.request_id}
        response = self.client.open(path, method=method, headers=headers, **kwargs)
        assert response.status_code in (200, 201), (method, path, response.get_json())
        return response

    def setup(self, method: str, path: str, headers: dict[str, str] | None = None, **kwargs: Any) -> Any:
        response = self.client.open(path, method=method, headers=headers or self.admin, **kwargs)
        assert response.status_code in (200, 201), (method, path, response.get_json())
        return response.get_json()

    def schema(self, name: str = "AuditThing") -> str:
        body = {"name": name, "fields": {"title": "String"}}
        return self.setup("POST", "/admin/database/schemas", json=body)["_id"]

    def endpoint(self) -> str:
        return self.setup("POST", "/admin/database/customEndpoints", json=endpoint_body(self.schema()))["_id"]

    def template(self) -> str:
        body = {"name": "audit-template", "subject": "Hi {{ name }}", "body": "<p>{{ name }}</p>"}
        return self.setup("POST", "/admin/email/templates", json=body)["_id"]

    def form(self) -> str:
        body = {"name": "audit-form", "fields": [{"name": "email", "type": "email", "required": True}]}
        return self.setup("POST", "/admin/forms", json=body)["_id"]

    def webhook(self) -> str:
        # A public address literal: saving it resolves nothing and passes the private-target check.
        body = {"url": "http://93.184.215.14/hooks", "events": ["database.*.create"]}
        return self.setup("POST", "/admin/webhooks", json=body)["_id"]

    def room(self) -> tuple[Any, str]:
        owner = self.make_user()
        return owner, self.setup("POST", "/chat/rooms", owner.headers, json={"roomName": "audit", "users": []})[
            "roomId"
        ]

    def shared_schema(self, name: str = "AuditShared") -> str:
        """A schema under access control (per-document grants)."""
        options = {"conduit": {"authorization": {"enabled": True}}}
        self.setup(
            "POST",
            "/admin/database/schemas",
            json={"name": name, "fields": {"title": "String"}, "modelOptions": options},
        )
        return name

    def shared_document(self) -> tuple[Any, str]:
        """A user and a document of theirs in a schema under access control."""
        schema, owner = self.shared_schema(), self.make_user()
        return owner, self.setup("POST", f"/database/{schema}", owner.headers, json={"title": "t"})["_id"]

    def relation(self) -> str:
        owner, doc_id = self.shared_document()
        body = {"subject": "User:*", "relation": "reader", "resource": f"AuditShared:{doc_id}"}
        return self.setup("POST", "/admin/authorization/relations", json=body)["_id"]

    def upload_as(self, user: Any) -> str:
        data = {"file": (io.BytesIO(b"hello\n"), "hello.txt")}
        return self.setup("POST", "/storage/upload", user.headers, data=data, content_type="multipart/form-data")["id"]


def endpoint_body(schema_id: str, name: str = "auditFn") -> dict[str, Any]:
    condition = {"schemaField": "title", "operation": "eq", "comparisonField": {"type": "Input", "value": "title"}}
    inputs = [{"name": "title", "type": "String", "location": "query"}]
    return {
        "name": name,
        "operation": "GET",
        "selectedSchema": schema_id,
        "inputs": inputs,
        "query": {"AND": [condition]},
    }


def _config(module: str) -> Callable[[Caller], Any]:
    return lambda c: c.admin_call("PUT", f"/admin/{module}/config", json={"active": True})


def _new_user(c: Caller) -> str:
    return c.make_user().id


RECIPES: dict[str, Callable[[Caller], Any]] = {
    "PUT /config/{moduleName}": lambda c: c.admin_call("PUT", "/config/forms", json={"active": True}),
    "PUT /admin/email/config": _config("email"),
    "PUT /admin/sms/config": _config("sms"),
    "PUT /admin/pushNotifications/config": _config("pushNotifications"),
    "PUT /admin/storage/config": _config("storage"),
    "PUT /admin/webhooks/config": _config("webhooks"),
    "POST /admin/webhooks": lambda c: c.admin_call(
        "POST", "/admin/webhooks", json={"url": "http://93.184.215.14/x", "events": ["authentication.user.*"]}
    ),
    "PUT /admin/webhooks/{webhookId}": lambda c: c.admin_call(
        "PUT", f"/admin/webhooks/{c.webhook()}", json={"active": False}
    ),
    "DELETE /admin/webhooks/{webhookId}": lambda c: c.admin_call("DELETE", f"/admin/webhooks/{c.webhook()}"),
    "POST /authentication/users": lambda c: c.admin_call(
        "POST", "/authentication/users", json={"email": f"{uuid.uuid4().hex[:8]}@example.com", "password": "password1"}
    ),
    "PUT /authentication/users/{userId}/block": lambda c: c.admin_call(
        "PUT", f"/authentication/users/{_new_user(c)}/block"
    ),
    "PUT /authentication/users/{userId}/unblock": lambda c: c.admin_call(
        "PUT", f"/authentication/users/{_new_user(c)}/unblock"
    ),
    "PATCH /authentication/users/{userId}": lambda c: c.admin_call(
        "PATCH", f"/authentication/users/{_new_user(c)}", json={"isVerified": True}
    ),
    "DELETE /authentication/users/{userId}": lambda c: c.admin_call("DELETE", f"/authentication/users/{_new_user(c)}"),
    "POST /admin/database/schemas": lambda c: c.admin_call(
        "POST", "/admin/database/schemas", json={"name": "AuditA", "fields": {"title": "String"}}
    ),
    "POST /database/schemas": lambda c: c.admin_call(
        "POST", "/database/schemas", json={"name": "AuditB", "fields": {"title": "String"}}
    ),
    "PUT /admin/database/schemas/{schemaId}": lambda c: c.admin_call(
        "PUT", f"/admin/database/schemas/{c.schema()}", json={"fields": {"title": "String", "size": "Number"}}
    ),
    "DELETE /admin/database/schemas/{schemaId}": lambda c: c.admin_call(
        "DELETE", f"/admin/database/schemas/{c.schema()}"
    ),
    "POST /admin/database/schemas/{schemaId}/extensions": lambda c: c.admin_call(
        "POST", f"/admin/database/schemas/{c.schema()}/extensions", json={"fields": {"note": "String"}}
    ),
    "POST /admin/database/customEndpoints": lambda c: c.admin_call(
        "POST", "/admin/database/customEndpoints", json=endpoint_body(c.schema())
    ),
    "PUT /admin/database/customEndpoints/{endpointId}": lambda c: c.admin_call(
        "PUT", f"/admin/database/customEndpoints/{c.endpoint()}", json={"name": "auditFnRenamed"}
    ),
    "PATCH /admin/database/customEndpoints/{endpointId}": lambda c: c.admin_call(
        "PATCH", f"/admin/database/customEndpoints/{c.endpoint()}", json={"paginated": True}
    ),
    "DELETE /admin/database/customEndpoints/{endpointId}": lambda c: c.admin_call(
        "DELETE", f"/admin/database/customEndpoints/{c.endpoint()}"
    ),
    "POST /admin/email/templates": lambda c: c.admin_call(
        "POST", "/admin/email/templates", json={"name": "t", "subject": "s", "body": "<p>b</p>"}
    ),
    "PUT /admin/email/templates/{templateId}": lambda c: c.admin_call(
        "PUT", f"/admin/email/templates/{c.template()}", json={"subject": "Hello {{ name }}"}
    ),
    "DELETE /admin/email/templates/{templateId}": lambda c: c.admin_call(
        "DELETE", f"/admin/email/templates/{c.template()}"
    ),
    "POST /admin/forms": lambda c: c.admin_call(
        "POST", "/admin/forms", json={"name": "f", "fields": [{"name": "x", "type": "text"}]}
    ),
    "PUT /admin/forms/{formId}": lambda c: c.admin_call("PUT", f"/admin/forms/{c.form()}", json={"enabled": False}),
    "DELETE /admin/forms/{formId}": lambda c: c.admin_call("DELETE", f"/admin/forms/{c.form()}"),
    "DELETE /admin/forms/submissions/{submissionId}": lambda c: c.admin_call(
        "DELETE",
        "/admin/forms/submissions/"
        + c.setup("POST", f"/forms/submit/{c.form()}", {}, json={"email": "a@example.com"})["submissionId"],
    ),
    "DELETE /admin/chat/rooms/{roomId}": lambda c: c.admin_call("DELETE", f"/admin/chat/rooms/{c.room()[1]}"),
    "DELETE /chat/messages/{messageId}": lambda c: c.admin_call(
        "DELETE",
        "/chat/messages/"
        + (lambda owner, room: c.setup("POST", f"/chat/rooms/{room}/messages", owner.headers, json={"message": "hi"}))(
            *c.room()
        )["_id"],
    ),
    "POST /admin/storage/upload": lambda c: c.admin_call(
        "POST",
        "/admin/storage/upload",
        data={"file": (io.BytesIO(b"hi\n"), "hi.txt"), "owner": _new_user(c)},
        content_type="multipart/form-data",
    ),
    "PATCH /admin/authorization/resources/{name}": lambda c: c.admin_call(
        "PATCH",
        f"/admin/authorization/resources/{c.shared_schema()}",
        json={"relations": {"owner": ["User", "Team"], "editor": ["User"], "reader": ["User", "*"]}},
    ),
    "POST /admin/authorization/relations": lambda c: c.admin_call(
        "POST",
        "/admin/authorization/relations",
        json={"subject": "User:*", "relation": "reader", "resource": f"AuditShared:{c.shared_document()[1]}"},
    ),
    "POST /admin/authorization/relations/many": lambda c: c.admin_call(
        "POST",
        "/admin/authorization/relations/many",
        json={"subject": "*", "relation": "reader", "resources": [f"AuditShared:{c.shared_document()[1]}"]},
    ),
    "DELETE /admin/authorization/relations/{relationId}": lambda c: c.admin_call(
        "DELETE", f"/admin/authorization/relations/{c.relation()}"
    ),
    "DELETE /storage/file/{fileId}": lambda c: c.admin_call("DELETE", f"/storage/file/{c.upload_as(c.make_user())}"),
    "DELETE /storage/folder/{folderId}": lambda c: c.admin_call(
        "DELETE",
        "/storage/folder/"
        + (lambda user: c.setup("POST", "/storage/folder", user.headers, json={"name": "d"}))(c.make_user())["_id"],
    ),
}


def admin_write_operations(app: Any) -> set[str]:
    with app.test_request_context():
        doc = document(app)
    found = set()
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if method not in WRITE_METHODS or DOCUMENT_ROUTES.match(path):
                continue
            if any("masterkey" in scheme for scheme in operation.get("security") or ()):
                found.add(f"{method.upper()} {path}")
    return found


def test_every_admin_write_route_is_covered(app, db):
    operations = admin_write_operations(app)
    known = set(RECIPES) | set(NOT_CHANGES) | set(COVERED_IN_MODULE_TESTS)
    assert operations - known == set(), "admin write routes with no audit test: add a recipe (and an audit call)"
    assert known - operations == set(), "recipes for routes that no longer exist"


def test_module_tests_named_for_coverage_check_the_audit_log():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for path, test_name in COVERED_IN_MODULE_TESTS.values():
        source = (root / path).read_text()
        start = source.index(f"def {test_name}(")
        end = source.find("\ndef ", start + 1)
        assert "/admin/audit" in source[start : end if end > 0 else None], f"{test_name} does not check the audit log"


@pytest.mark.parametrize("operation", sorted(RECIPES))
def test_admin_write_records_an_entry(operation, client, admin_headers, make_user):
    caller = Caller(client, admin_headers, make_user)
    RECIPES[operation](caller)
    entries = client.get("/admin/audit?limit=1000", headers=admin_headers).get_json()["entries"]
    mine = [entry for entry in entries if entry["requestId"] == caller.request_id]
    assert mine, f"{operation} recorded no audit entry"
    assert all(entry["actor"] == {"type": "masterkey"} for entry in mine)
    assert all(entry["ip"] == "127.0.0.1" and entry["module"] and entry["action"] for entry in mine)
