"""The Twilio provider through the official client, against a local server speaking Twilio's Messages API."""

from __future__ import annotations

from trellis.testing.plugin import free_port

VALID = "+14155552671"
UK = "+447911123456"


def outbox(client, headers, **query):
    return client.get("/admin/sms/outbox", query_string=query, headers=headers).get_json()


def test_send_goes_to_twilio_with_basic_auth_and_form(client, admin_headers, use_twilio):
    response = client.post("/sms/send", json={"to": VALID, "message": "your code is 1234"}, headers=admin_headers)
    assert response.status_code == 200, response.get_json()
    (request,) = use_twilio.requests
    assert request["method"] == "POST"
    assert request["path"] == f"/2010-04-01/Accounts/{use_twilio.account_sid}/Messages.json"
    assert request["auth"] == (use_twilio.account_sid, use_twilio.auth_token)
    assert request["content_type"] == "application/x-www-form-urlencoded"
    assert request["form"] == {"To": VALID, "From": use_twilio.from_number, "Body": "your code is 1234"}
    (record,) = outbox(client, admin_headers)["messages"]
    assert record["_id"] == response.get_json()["messageId"]
    assert record["provider"] == "twilio"
    assert record["status"] == "sent"
    assert record["providerMessageId"].startswith("SM")


def test_twilio_refusal_is_provider_error_and_recorded(client, admin_headers, use_twilio):
    use_twilio.refuse.add(VALID)
    response = client.post("/sms/send", json={"to": VALID, "message": "hi"}, headers=admin_headers)
    assert response.status_code == 500
    body = response.get_json()
    assert body["name"] == "PROVIDER_ERROR"
    assert "21610" in body["message"] and "unsubscribed recipient" in body["message"]
    (record,) = outbox(client, admin_headers)["messages"]
    assert record["status"] == "failed"
    assert "unsubscribed recipient" in record["error"]
    assert record["providerMessageId"] is None


def test_wrong_twilio_credentials_are_provider_error(client, admin_headers, use_twilio):
    use_twilio.auth_token = "the-token-was-rotated-at-twilio"
    response = client.post("/sms/send", json={"to": VALID, "message": "hi"}, headers=admin_headers)
    assert response.status_code == 500
    assert response.get_json()["name"] == "PROVIDER_ERROR"
    assert "Authenticate" in response.get_json()["message"]
    # The auth token never shows up in answers.
    assert "twilio-test-auth-token" not in response.get_data(as_text=True)
    assert outbox(client, admin_headers, status="failed")["count"] == 1


def test_unreachable_twilio_is_provider_error(client, admin_headers, fake_twilio):
    settings = fake_twilio.settings(baseUrl=f"http://127.0.0.1:{free_port()}")
    assert (
        client.put(
            "/admin/sms/config", json={"provider": "twilio", "twilio": settings}, headers=admin_headers
        ).status_code
        == 200
    )
    response = client.post("/sms/send", json={"to": VALID, "message": "hi"}, headers=admin_headers)
    assert response.status_code == 500
    assert "could not be reached" in response.get_json()["message"]
    assert outbox(client, admin_headers)["messages"][0]["status"] == "failed"


def test_send_many_through_twilio_reports_each_recipient(client, admin_headers, use_twilio):
    use_twilio.refuse.add(UK)
    response = client.post("/sms/sendMany", json={"to": [VALID, UK], "message": "news"}, headers=admin_headers)
    assert response.status_code == 200, response.get_json()
    results = {r["to"]: r for r in response.get_json()["results"]}
    assert results[VALID]["status"] == "sent"
    assert results[UK]["status"] == "failed"
    assert "21610" in results[UK]["error"]
    assert [r["form"]["To"] for r in use_twilio.requests] == [VALID, UK]
    assert outbox(client, admin_headers)["count"] == 2


def test_send_many_all_refused_is_provider_error(client, admin_headers, use_twilio):
    use_twilio.refuse.update({VALID, UK})
    response = client.post("/sms/sendMany", json={"to": [VALID, UK], "message": "news"}, headers=admin_headers)
    assert response.status_code == 500
    assert response.get_json()["name"] == "PROVIDER_ERROR"
    assert outbox(client, admin_headers, status="failed")["count"] == 2


def test_invalid_number_never_reaches_twilio(client, admin_headers, use_twilio):
    response = client.post("/sms/sendMany", json={"to": [VALID, "+1999"], "message": "x"}, headers=admin_headers)
    assert response.status_code == 400
    assert use_twilio.requests == []


def test_switching_back_to_outbox_stops_calling_twilio(client, admin_headers, use_twilio):
    assert client.put("/admin/sms/config", json={"provider": "outbox"}, headers=admin_headers).status_code == 200
    assert client.post("/sms/send", json={"to": VALID, "message": "x"}, headers=admin_headers).status_code == 200
    assert use_twilio.requests == []
    assert outbox(client, admin_headers)["messages"][0]["provider"] == "outbox"
