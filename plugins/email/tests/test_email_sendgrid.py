"""The sendgrid provider against a local server speaking SendGrid's v3 API; and providers without templates."""

import pytest


def send(client, headers, **body):
    return client.post("/email/send", json=body, headers=headers)


def last_record(client, headers):
    return client.get("/admin/email/outbox?limit=1", headers=headers).get_json()["messages"][0]


def make_template(client, headers, **overrides):
    body = {"name": "Invoice", "subject": "Invoice {{ number }}", "body": "<p>Total {{ total }}</p>", **overrides}
    response = client.post("/admin/email/templates", json=body, headers=headers)
    assert response.status_code == 201
    return response.get_json()


def test_send_posts_mail_send_with_bearer_key(client, admin_headers, use_sendgrid):
    response = send(client, admin_headers, to="Ada <ada@example.com>", subject="Hi", body="<p>Hello <b>you</b></p>")
    assert response.status_code == 200, response.get_json()
    request = use_sendgrid.fake.last("POST", "/mail/send")
    assert request.path == "/sendgrid/v3/mail/send"
    assert request.headers["Authorization"] == f"Bearer {use_sendgrid.sendgrid_key}"
    assert request.json == {
        "personalizations": [{"to": [{"email": "ada@example.com", "name": "Ada"}]}],
        "from": {"email": "no-reply@localhost"},
        "subject": "Hi",
        "content": [
            {"type": "text/plain", "value": "Hello you"},
            {"type": "text/html", "value": "<p>Hello <b>you</b></p>"},
        ],
    }
    record = last_record(client, admin_headers)
    assert (record["provider"], record["status"]) == ("sendgrid", "sent")
    assert record["providerMessageId"] == use_sendgrid.fake.sendgrid_messages[0]["id"]


def test_rejected_key_is_a_provider_error_with_sendgrids_reason(client, admin_headers, configure_email, use_sendgrid):
    configure_email(sendgrid={"apiKey": "SG.wrong"})
    response = send(client, admin_headers, to="ada@example.com", subject="Hi", body="b")
    assert response.status_code == 500 and response.get_json()["name"] == "PROVIDER_ERROR"
    record = last_record(client, admin_headers)
    assert record["status"] == "failed"
    assert record["error"] == "SendGrid answered 401: The provided authorization grant is invalid, expired, or revoked"
    assert "SG.wrong" not in response.get_data(as_text=True)


def test_upload_creates_a_dynamic_template_then_patches_its_active_version(client, admin_headers, use_sendgrid):
    fake = use_sendgrid.fake
    template = make_template(client, admin_headers)
    response = client.post(f"/admin/email/templates/{template['_id']}/upload", headers=admin_headers)
    assert response.status_code == 200, response.get_json()
    external = response.get_json()["externalId"]
    stored = fake.sendgrid_templates[external]
    assert (stored["name"], stored["generation"]) == ("Invoice", "dynamic")
    (version,) = stored["versions"]
    assert (version["subject"], version["html_content"], version["active"]) == (
        "Invoice {{ number }}",
        "<p>Total {{ total }}</p>",
        1,
    )
    assert fake.last("POST", "/versions").headers["Authorization"] == f"Bearer {use_sendgrid.sendgrid_key}"

    client.put(
        f"/admin/email/templates/{template['_id']}",
        json={"name": "Invoice v2", "subject": "Bill {{ number }}"},
        headers=admin_headers,
    )
    assert client.post(f"/admin/email/templates/{template['_id']}/upload", headers=admin_headers).status_code == 200
    assert stored["name"] == "Invoice v2"
    (version,) = stored["versions"]  # updated in place, not a new version
    assert version["subject"] == "Bill {{ number }}"
    assert fake.last("PATCH", f"/versions/{version['id']}").json["html_content"] == "<p>Total {{ total }}</p>"


def test_upload_to_a_new_provider_creates_a_new_copy(client, admin_headers, configure_email, use_sendgrid):
    """An external id that belongs to another provider is not reused."""
    template = make_template(client, admin_headers)
    api = use_sendgrid
    configure_email(
        provider="mailgun",
        mailgun={"apiKey": api.mailgun_key, "domain": api.mailgun_domain, "baseUrl": api.mailgun_url},
    )
    uploaded = client.post(f"/admin/email/templates/{template['_id']}/upload", headers=admin_headers).get_json()
    assert (uploaded["externalId"], uploaded["externalProvider"]) == ("invoice", "mailgun")
    configure_email(provider="sendgrid")
    response = client.post(f"/admin/email/templates/{template['_id']}/upload", headers=admin_headers)
    assert response.status_code == 200
    assert response.get_json()["externalProvider"] == "sendgrid"
    assert response.get_json()["externalId"] in api.fake.sendgrid_templates
    assert not any(r.path.endswith("/templates/invoice") for r in api.fake.requests if "/sendgrid/" in r.path)


def test_upload_recreates_a_template_deleted_at_sendgrid(client, admin_headers, use_sendgrid):
    template = make_template(client, admin_headers)
    first = client.post(f"/admin/email/templates/{template['_id']}/upload", headers=admin_headers).get_json()[
        "externalId"
    ]
    del use_sendgrid.fake.sendgrid_templates[first]
    second = client.post(f"/admin/email/templates/{template['_id']}/upload", headers=admin_headers).get_json()[
        "externalId"
    ]
    assert second != first and second in use_sendgrid.fake.sendgrid_templates


def test_sync_follows_pages_and_links_templates(client, admin_headers, use_sendgrid):
    fake = use_sendgrid.fake
    fake.page_size_cap = 1
    welcome_id = fake.add_sendgrid_template("welcome", "<p>Hi {{ name }}</p>", "Welcome {{ name }}")
    fake.add_sendgrid_template("bad", "{{ unclosed", "x")
    fake.add_sendgrid_template("welcome", "<p>duplicate name</p>", "dup")
    report = client.post("/admin/email/sync", headers=admin_headers).get_json()
    assert report["created"] == ["welcome"]
    skipped = {s["name"]: s["reason"] for s in report["skipped"]}
    assert set(skipped) == {"bad", "welcome"}
    assert "linked to another provider template" in skipped["welcome"]
    assert any("page_token" in r.query for r in fake.requests)

    welcome = client.get("/admin/email/templates?search=welcome", headers=admin_headers).get_json()["templates"][0]
    assert (welcome["externalId"], welcome["variables"]) == (welcome_id, ["name"])

    # Renamed at SendGrid and edited: still matched by id, content follows, local name stays.
    fake.sendgrid_templates[welcome_id]["name"] = "hello"
    fake.sendgrid_templates[welcome_id]["versions"][0]["html_content"] = "<p>Hello {{ first }}</p>"
    report = client.post("/admin/email/sync", headers=admin_headers).get_json()
    assert report["updated"] == ["welcome"]
    updated = client.get(f"/admin/email/templates/{welcome['_id']}", headers=admin_headers).get_json()
    assert (updated["name"], updated["body"], updated["variables"]) == (
        "welcome",
        "<p>Hello {{ first }}</p>",
        ["first", "name"],
    )


@pytest.mark.parametrize("provider", ["outbox", "smtp"])
def test_providers_without_templates_refuse_upload_and_sync(client, admin_headers, configure_email, provider):
    if provider == "smtp":
        configure_email(provider="smtp", smtp={"host": "127.0.0.1"})
    template = make_template(client, admin_headers)
    for path in (f"/admin/email/templates/{template['_id']}/upload", "/admin/email/sync"):
        response = client.post(path, headers=admin_headers)
        assert response.status_code == 400, path
        assert response.get_json()["message"] == (
            f"The {provider} provider keeps no templates; configure mailgun or sendgrid"
        )


def test_a_misbehaving_sendgrid_is_a_provider_error(client, admin_headers, use_sendgrid):
    use_sendgrid.fake.override = (200, "application/json", '{"result": "not a list", "_metadata": 5}')
    report = client.post("/admin/email/sync", headers=admin_headers)
    assert report.status_code == 200 and report.get_json()["created"] == []  # nothing usable, nothing done
    use_sendgrid.fake.override = (500, "application/json", '{"errors": [{"message": "internal"}]}')
    response = client.post("/admin/email/sync", headers=admin_headers)
    assert response.status_code == 500
    assert response.get_json()["message"] == "Template sync through sendgrid failed: SendGrid answered 500: internal"
