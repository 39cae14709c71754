"""The mailgun provider against a local server speaking Mailgun's v3 API: sends, upload, sync, failures."""

import base64
import json


def send(client, headers, **body):
    return client.post("/email/send", json=body, headers=headers)


def last_record(client, headers):
    return client.get("/admin/email/outbox?limit=1", headers=headers).get_json()["messages"][0]


def make_template(client, headers, **overrides):
    body = {
        "name": "Order Shipped",
        "subject": "Order {{ order }}",
        "body": "<p>{{ order }} is on its way</p>",
        **overrides,
    }
    response = client.post("/admin/email/templates", json=body, headers=headers)
    assert response.status_code == 201
    return response.get_json()


def test_send_posts_to_the_messages_endpoint_with_basic_auth(client, admin_headers, use_mailgun):
    response = send(
        client,
        admin_headers,
        to="Ada <ada@example.com>",
        subject="Hi",
        body="<p>Hello</p>",
        **{"from": "Shop <shop@example.com>"},
    )
    assert response.status_code == 200, response.get_json()
    request = use_mailgun.fake.last("POST", "/messages")
    assert request.path == "/mailgun/v3/mg.example.com/messages"
    token = base64.b64encode(f"api:{use_mailgun.mailgun_key}".encode()).decode()
    assert request.headers["Authorization"] == f"Basic {token}"
    assert request.form == {
        "from": "Shop <shop@example.com>",
        "to": "Ada <ada@example.com>",
        "subject": "Hi",
        "html": "<p>Hello</p>",
        "text": "Hello",
    }
    record = last_record(client, admin_headers)
    assert (record["provider"], record["status"]) == ("mailgun", "sent")
    assert record["providerMessageId"] == use_mailgun.fake.mailgun_messages[0]["id"]


def test_rejected_key_is_a_provider_error_recorded_without_the_key(client, admin_headers, configure_email, use_mailgun):
    configure_email(mailgun={"apiKey": "key-wrong-999"})
    response = send(client, admin_headers, to="ada@example.com", subject="Hi", body="b")
    assert response.status_code == 500
    assert response.get_json()["name"] == "PROVIDER_ERROR"
    record = last_record(client, admin_headers)
    assert (record["status"], record["error"]) == ("failed", "Mailgun answered 401: Forbidden")
    assert "key-wrong-999" not in response.get_data(as_text=True)


def test_unknown_domain_is_reported_with_mailguns_reason(client, admin_headers, configure_email, use_mailgun):
    configure_email(mailgun={"domain": "other.example.com"})
    assert send(client, admin_headers, to="ada@example.com", subject="Hi", body="b").status_code == 500
    assert last_record(client, admin_headers)["error"] == "Mailgun answered 404: Domain not found"


def test_unreachable_api_is_a_provider_error(client, admin_headers, use_mailgun):
    use_mailgun.server.stop()
    assert send(client, admin_headers, to="ada@example.com", subject="Hi", body="b").status_code == 500
    assert last_record(client, admin_headers)["error"] == "Cannot reach Mailgun: ConnectionError"


def test_upload_creates_then_updates_the_provider_template(client, admin_headers, use_mailgun):
    template = make_template(client, admin_headers)
    response = client.post(f"/admin/email/templates/{template['_id']}/upload", headers=admin_headers)
    assert response.status_code == 200, response.get_json()
    assert (response.get_json()["externalId"], response.get_json()["externalProvider"]) == ("order-shipped", "mailgun")
    stored = use_mailgun.fake.mailgun_templates["order-shipped"]
    assert stored["versions"]["trellis"]["template"] == "<p>{{ order }} is on its way</p>"
    assert stored["versions"]["trellis"]["headers"] == {"Subject": "Order {{ order }}"}
    assert stored["active"] == "trellis"
    entry = client.get("/admin/audit?action=template.upload", headers=admin_headers).get_json()["entries"][0]
    assert (entry["target"], entry["changes"]) == (
        template["_id"],
        {"provider": "mailgun", "externalId": "order-shipped"},
    )

    client.put(
        f"/admin/email/templates/{template['_id']}", json={"body": "<p>{{ order }} shipped</p>"}, headers=admin_headers
    )
    response = client.post(f"/admin/email/templates/{template['_id']}/upload", headers=admin_headers)
    assert response.status_code == 200
    assert use_mailgun.fake.last("PUT", "/versions/trellis").form["template"] == "<p>{{ order }} shipped</p>"
    assert stored["versions"]["trellis"]["template"] == "<p>{{ order }} shipped</p>"
    assert len(use_mailgun.fake.mailgun_templates) == 1


def test_upload_recreates_a_template_deleted_at_the_provider(client, admin_headers, use_mailgun):
    template = make_template(client, admin_headers)
    client.post(f"/admin/email/templates/{template['_id']}/upload", headers=admin_headers)
    del use_mailgun.fake.mailgun_templates["order-shipped"]
    response = client.post(f"/admin/email/templates/{template['_id']}/upload", headers=admin_headers)
    assert response.status_code == 200
    assert "order-shipped" in use_mailgun.fake.mailgun_templates
    calls = [(r.method, r.path.rsplit("/templates", 1)[1]) for r in use_mailgun.fake.requests[-3:]]
    assert calls == [("PUT", "/order-shipped/versions/trellis"), ("POST", "/order-shipped/versions"), ("POST", "")]


def test_upload_failure_is_a_provider_error(client, admin_headers, configure_email, use_mailgun):
    template = make_template(client, admin_headers)
    configure_email(mailgun={"apiKey": "key-wrong"})
    response = client.post(f"/admin/email/templates/{template['_id']}/upload", headers=admin_headers)
    assert response.status_code == 500
    assert response.get_json()["name"] == "PROVIDER_ERROR"
    assert (
        client.get(f"/admin/email/templates/{template['_id']}", headers=admin_headers).get_json()["externalId"] is None
    )


def test_upload_of_unknown_template_is_404(client, admin_headers, use_mailgun):
    assert client.post("/admin/email/templates/nope/upload", headers=admin_headers).status_code == 404


def test_sync_pulls_every_page_and_matches_by_id_then_name(client, admin_headers, use_mailgun):
    fake = use_mailgun.fake
    fake.page_size_cap = 2  # four templates: the client must follow the paging links
    fake.add_mailgun_template("welcome", "<p>Hi {{ name }}</p>", subject="Welcome {{ name }}")
    fake.add_mailgun_template("reset", "<p>{{ link }}</p>", subject="Reset")
    fake.add_mailgun_template("no-subject", "<p>plain</p>")
    fake.add_mailgun_template("fancy", "{{#if vip}}VIP{{/if}}", subject="x")
    local = make_template(client, admin_headers, name="reset", subject="Old", body="<p>old</p>")

    response = client.post("/admin/email/sync", headers=admin_headers)
    assert response.status_code == 200, response.get_json()
    report = response.get_json()
    assert sorted(report["created"]) == ["no-subject", "welcome"]
    assert report["updated"] == ["reset"]
    assert [s["name"] for s in report["skipped"]] == ["fancy"]
    assert "Not a valid Trellis template" in report["skipped"][0]["reason"]
    assert any(r.query.get("page") == "next" for r in fake.requests if r.path.endswith("/templates"))
    entry = client.get("/admin/audit?action=template.sync", headers=admin_headers).get_json()["entries"][0]
    assert (entry["module"], entry["target"], entry["changes"]["updated"]) == ("email", "mailgun", ["reset"])

    reset = client.get(f"/admin/email/templates/{local['_id']}", headers=admin_headers).get_json()
    assert (reset["subject"], reset["body"], reset["variables"]) == ("Reset", "<p>{{ link }}</p>", ["link"])
    assert (reset["externalId"], reset["externalProvider"]) == ("reset", "mailgun")
    listed = client.get("/admin/email/templates?search=welcome", headers=admin_headers).get_json()["templates"][0]
    assert (listed["subject"], listed["variables"]) == ("Welcome {{ name }}", ["name"])
    no_subject = client.get("/admin/email/templates?search=no-subject", headers=admin_headers).get_json()["templates"][
        0
    ]
    assert no_subject["subject"] == "no-subject"

    # Matched by external id from now on: a second sync changes nothing.
    again = client.post("/admin/email/sync", headers=admin_headers).get_json()
    assert sorted(again["unchanged"]) == ["no-subject", "reset", "welcome"]
    assert again["created"] == again["updated"] == []


def test_sync_then_send_uses_the_pulled_template(client, admin_headers, use_mailgun):
    use_mailgun.fake.add_mailgun_template("welcome", "<p>Hi {{ name }}</p>", subject="Welcome {{ name }}")
    client.post("/admin/email/sync", headers=admin_headers)
    response = send(client, admin_headers, to="ada@example.com", templateName="welcome", variables={"name": "Ada & co"})
    assert response.status_code == 200
    sent = use_mailgun.fake.mailgun_messages[-1]
    assert (sent["subject"], sent["html"]) == ("Welcome Ada & co", "<p>Hi Ada &amp; co</p>")


def test_sync_failure_changes_nothing(client, admin_headers, configure_email, use_mailgun):
    use_mailgun.fake.add_mailgun_template("welcome", "<p>x</p>", subject="s")
    configure_email(mailgun={"apiKey": "key-wrong"})
    response = client.post("/admin/email/sync", headers=admin_headers)
    assert response.status_code == 500 and response.get_json()["name"] == "PROVIDER_ERROR"
    assert client.get("/admin/email/templates", headers=admin_headers).get_json()["count"] == 0


def test_paging_links_to_another_host_are_not_followed(client, admin_headers, use_mailgun):
    fake = use_mailgun.fake
    fake.page_size_cap = 1
    fake.add_mailgun_template("one", "<p>1</p>", subject="1")
    fake.add_mailgun_template("two", "<p>2</p>", subject="2")
    fake.base = "http://attacker.invalid"  # the paging links now point elsewhere (the API key would go along)
    report = client.post("/admin/email/sync", headers=admin_headers).get_json()
    assert report["created"] == ["one"]
    assert all(json.dumps(r.path).find("attacker") < 0 for r in fake.requests)


def test_a_misbehaving_provider_is_a_provider_error_not_a_crash(client, admin_headers, use_mailgun):
    template = make_template(client, admin_headers)
    for override in [
        (200, "text/html", "<html>maintenance</html>"),
        (200, "application/json", "[1, 2]"),
        (503, "text/plain", "upstream down"),
    ]:
        use_mailgun.fake.override = override
        for path in ("/admin/email/sync", f"/admin/email/templates/{template['_id']}/upload"):
            response = client.post(path, headers=admin_headers)
            assert response.status_code == 500, (override, path)
            assert response.get_json()["name"] == "PROVIDER_ERROR"
    assert "503: upstream down" in response.get_json()["message"]
    assert send(client, admin_headers, to="ada@example.com", subject="s", body="b").status_code == 500
