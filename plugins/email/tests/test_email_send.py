"""POST /email/send through the outbox provider, and GET /admin/email/outbox."""

import pytest


def send(client, headers, **body):
    return client.post("/email/send", json=body, headers=headers)


def outbox(client, headers, query=""):
    response = client.get(f"/admin/email/outbox{query}", headers=headers)
    assert response.status_code == 200
    return response.get_json()


@pytest.fixture()
def receipt(client, admin_headers):
    body = {
        "name": "receipt",
        "subject": "Order {{ order }} for {{ name }}",
        "body": "<p>Dear {{ name }},</p><p>{{ note }}</p>",
    }
    response = client.post("/admin/email/templates", json=body, headers=admin_headers)
    assert response.status_code == 201
    return response.get_json()


def test_raw_send_is_kept_in_the_outbox(client, admin_headers):
    response = send(client, admin_headers, to="ada@example.com", subject="Hello", body="<p>Hi</p>")
    assert response.status_code == 200
    result = response.get_json()
    assert set(result) == {"messageId", "status"} and result["status"] == "sent"
    listed = outbox(client, admin_headers)
    assert listed["count"] == 1
    message = listed["messages"][0]
    assert message["_id"] == result["messageId"]
    assert {k: message[k] for k in ("to", "from", "subject", "body", "provider", "status", "error")} == {
        "to": "ada@example.com",
        "from": "no-reply@localhost",
        "subject": "Hello",
        "body": "<p>Hi</p>",
        "provider": "outbox",
        "status": "sent",
        "error": None,
    }
    assert message["createdAt"].endswith("Z")


def test_from_overrides_the_configured_sender(client, admin_headers):
    send(
        client, admin_headers, to="Ada <ada@example.com>", subject="s", body="b", **{"from": "Shop <shop@example.com>"}
    )
    message = outbox(client, admin_headers)["messages"][0]
    assert (message["to"], message["from"]) == ("Ada <ada@example.com>", "Shop <shop@example.com>")


def test_outbox_is_newest_first_with_skip_and_limit(client, admin_headers):
    for n in range(3):
        assert send(client, admin_headers, to="ada@example.com", subject=f"n{n}", body="b").status_code == 200
    listed = outbox(client, admin_headers, "?limit=2")
    assert listed["count"] == 3
    assert [m["subject"] for m in listed["messages"]] == ["n2", "n1"]
    assert [m["subject"] for m in outbox(client, admin_headers, "?skip=2")["messages"]] == ["n0"]
    assert outbox(client, admin_headers, "?status=failed")["count"] == 0
    assert outbox(client, admin_headers, "?provider=outbox")["count"] == 3
    assert client.get("/admin/email/outbox?status=nope", headers=admin_headers).status_code == 400


def test_template_send_renders_and_escapes_the_body_only(client, admin_headers, receipt):
    variables = {"order": "#7 & co", "name": "<Bob>", "note": "<script>alert(1)</script>"}
    response = send(client, admin_headers, to="bob@example.com", templateName="receipt", variables=variables)
    assert response.status_code == 200, response.get_json()
    message = outbox(client, admin_headers)["messages"][0]
    assert message["subject"] == "Order #7 & co for <Bob>"  # the subject is plain text, not HTML
    assert message["body"] == "<p>Dear &lt;Bob&gt;,</p><p>&lt;script&gt;alert(1)&lt;/script&gt;</p>"
    assert message["templateName"] == "receipt"


def test_unknown_template_is_404(client, admin_headers):
    response = send(client, admin_headers, to="bob@example.com", templateName="nope", variables={})
    assert response.status_code == 404
    assert outbox(client, admin_headers)["count"] == 0


def test_missing_variable_is_400(client, admin_headers, receipt):
    response = send(client, admin_headers, to="bob@example.com", templateName="receipt", variables={"name": "Bob"})
    assert response.status_code == 400
    assert response.get_json()["errors"] == {
        "variables": {"note": ["Missing value for this placeholder."], "order": ["Missing value for this placeholder."]}
    }
    assert outbox(client, admin_headers)["count"] == 0


def test_the_sandbox_keeps_templates_away_from_python_internals(client, admin_headers):
    body = {"name": "probe", "subject": "x", "body": "{{ thing.__class__.__mro__ }}"}
    assert client.post("/admin/email/templates", json=body, headers=admin_headers).status_code == 201
    response = send(client, admin_headers, to="bob@example.com", templateName="probe", variables={"thing": "text"})
    assert response.status_code == 400
    assert "cannot be rendered" in response.get_json()["message"]


def test_a_variable_cannot_inject_a_header_through_the_subject(client, admin_headers, receipt):
    variables = {"order": "1\r\nBcc: victim@example.com", "name": "x", "note": "y"}
    response = send(client, admin_headers, to="bob@example.com", templateName="receipt", variables=variables)
    assert response.status_code == 400
    assert outbox(client, admin_headers)["count"] == 0


@pytest.mark.parametrize(
    "body,field",
    [
        ({"to": "ada@example.com", "subject": "s"}, "body"),
        ({"to": "ada@example.com", "body": "b"}, "subject"),
        ({"subject": "s", "body": "b"}, "to"),
        ({"to": "not-an-address", "subject": "s", "body": "b"}, "to"),
        ({"to": "a@example.com, b@example.com", "subject": "s", "body": "b"}, "to"),
        ({"to": "ada@example.com", "subject": "a\nBcc: x@example.com", "body": "b"}, "subject"),
        ({"to": "ada@example.com", "subject": "s", "body": "b", "from": "nobody"}, "from"),
        ({"to": "ada@example.com", "subject": "s", "body": "b", "from": "a b@example.com"}, "from"),
        ({"to": "ada@example.com", "templateName": "t", "subject": "s"}, "subject"),
        ({"to": "ada@example.com", "subject": "s", "body": "b", "variables": {}}, "variables"),
        ({"to": "ada@example.com", "subject": "s", "body": "b", "cc": "x@example.com"}, "cc"),
    ],
)
def test_invalid_sends_are_400_and_nothing_is_recorded(client, admin_headers, body, field):
    response = send(client, admin_headers, **body)
    assert response.status_code == 400, response.get_json()
    assert field in response.get_json()["errors"]
    assert outbox(client, admin_headers)["count"] == 0


def test_admin_bearer_token_may_send(client, admin_token):
    response = send(client, {"Authorization": f"Bearer {admin_token}"}, to="ada@example.com", subject="s", body="b")
    assert response.status_code == 200
