"""SMS routes on the outbox provider: credentials, phone-number validation, send, sendMany, outbox."""

from __future__ import annotations

import pytest

VALID = "+14155552671"
UK = "+447911123456"
FR = "+33612345678"


def outbox(client, headers, **query):
    response = client.get("/admin/sms/outbox", query_string=query, headers=headers)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def test_send_records_in_outbox(client, admin_headers):
    response = client.post("/sms/send", json={"to": VALID, "message": "hello"}, headers=admin_headers)
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    assert body["message"] == "SMS sent"
    listed = outbox(client, admin_headers)
    assert listed["count"] == 1
    (record,) = listed["messages"]
    assert record["_id"] == body["messageId"]
    assert {k: record[k] for k in ("to", "message", "provider", "status")} == {
        "to": VALID,
        "message": "hello",
        "provider": "outbox",
        "status": "sent",
    }
    assert record["createdAt"].endswith("Z")


def test_send_normalises_number_to_e164(client, admin_headers):
    response = client.post("/sms/send", json={"to": "+1 (415) 555-2671", "message": "hi"}, headers=admin_headers)
    assert response.status_code == 200
    assert outbox(client, admin_headers)["messages"][0]["to"] == VALID


def test_send_with_admin_bearer_token(client, admin_token):
    response = client.post(
        "/sms/send", json={"to": VALID, "message": "hi"}, headers={"Authorization": f"Bearer {admin_token}"}
    )
    assert response.status_code == 200


@pytest.mark.parametrize("headers", [{}, {"masterkey": "wrong"}, {"Authorization": "Bearer not-a-token"}])
def test_send_needs_admin_credentials(client, admin_headers, headers):
    response = client.post("/sms/send", json={"to": VALID, "message": "hi"}, headers=headers)
    assert response.status_code == 401
    assert response.get_json()["name"] == "UNAUTHORIZED"
    assert outbox(client, admin_headers)["count"] == 0


@pytest.mark.parametrize(
    "number",
    ["14155552671", "+1234", "+999123456789", "+1-800-FLOWERS", "+1415555267a", "", "++14155552671", 14155552671, None],
)
def test_send_rejects_invalid_numbers(client, admin_headers, number):
    response = client.post("/sms/send", json={"to": number, "message": "hi"}, headers=admin_headers)
    assert response.status_code == 400
    body = response.get_json()
    assert body["name"] == "INVALID_ARGUMENTS"
    assert "to" in body["errors"]
    assert outbox(client, admin_headers)["count"] == 0


@pytest.mark.parametrize(
    "payload, field",
    [
        ({"to": VALID}, "message"),
        ({"message": "hi"}, "to"),
        ({"to": VALID, "message": ""}, "message"),
        ({"to": VALID, "message": "x" * 1601}, "message"),
        ({"to": VALID, "message": "hi", "from": VALID}, "from"),
    ],
)
def test_send_validates_body(client, admin_headers, payload, field):
    response = client.post("/sms/send", json=payload, headers=admin_headers)
    assert response.status_code == 400
    assert field in response.get_json()["errors"]


def test_send_many_answers_per_recipient(client, admin_headers):
    response = client.post(
        "/sms/sendMany", json={"to": [VALID, UK, FR, "+1 415 555 2671"], "message": "news"}, headers=admin_headers
    )
    assert response.status_code == 200, response.get_json()
    results = response.get_json()["results"]
    assert [r["to"] for r in results] == [VALID, UK, FR]  # the repeated number is sent once
    assert all(r["status"] == "sent" for r in results)
    listed = outbox(client, admin_headers)
    assert listed["count"] == 3
    assert {m["_id"] for m in listed["messages"]} == {r["messageId"] for r in results}


def test_send_many_one_invalid_number_rejects_all(client, admin_headers):
    response = client.post("/sms/sendMany", json={"to": [VALID, "+1234", UK], "message": "news"}, headers=admin_headers)
    assert response.status_code == 400
    body = response.get_json()
    assert list(body["errors"]["to"]) == ["1"]
    assert outbox(client, admin_headers)["count"] == 0


@pytest.mark.parametrize(
    "payload",
    [
        {"to": [], "message": "x"},
        {"to": VALID, "message": "x"},
        {"to": [VALID] * 1001, "message": "x"},
        {"to": [VALID]},
    ],
)
def test_send_many_validates_body(client, admin_headers, payload):
    response = client.post("/sms/sendMany", json=payload, headers=admin_headers)
    assert response.status_code == 400
    assert outbox(client, admin_headers)["count"] == 0


def test_send_many_needs_admin(client):
    assert client.post("/sms/sendMany", json={"to": [VALID], "message": "x"}).status_code == 401


def test_outbox_is_newest_first_paginated_and_filtered(client, admin_headers):
    for text in ("one", "two", "three"):
        assert client.post("/sms/send", json={"to": VALID, "message": text}, headers=admin_headers).status_code == 200
    assert client.post("/sms/send", json={"to": UK, "message": "four"}, headers=admin_headers).status_code == 200
    page = outbox(client, admin_headers, skip=1, limit=2)
    assert page["count"] == 4
    assert [m["message"] for m in page["messages"]] == ["three", "two"]
    assert outbox(client, admin_headers, to=UK)["count"] == 1
    assert outbox(client, admin_headers, status="failed")["count"] == 0
    assert outbox(client, admin_headers, provider="outbox")["count"] == 4


@pytest.mark.parametrize("query", [{"limit": 1001}, {"skip": -1}, {"status": "lost"}, {"to": "123"}])
def test_outbox_rejects_bad_query(client, admin_headers, query):
    assert client.get("/admin/sms/outbox", query_string=query, headers=admin_headers).status_code == 400


def test_outbox_needs_admin(client):
    assert client.get("/admin/sms/outbox").status_code == 401


def test_inactive_module_refuses_to_send(client, admin_headers):
    assert client.put("/admin/sms/config", json={"active": False}, headers=admin_headers).status_code == 200
    response = client.post("/sms/send", json={"to": VALID, "message": "hi"}, headers=admin_headers)
    assert response.status_code == 404
    assert client.post("/sms/sendMany", json={"to": [VALID], "message": "hi"}, headers=admin_headers).status_code == 404
    assert outbox(client, admin_headers)["count"] == 0


def test_routes_are_documented(client):
    paths = client.get("/openapi.json").get_json()["paths"]
    for path in ("/sms/send", "/sms/sendMany", "/admin/sms/outbox", "/admin/sms/config"):
        assert path in paths
    send = paths["/sms/send"]["post"]
    assert "requestBody" in send and {"400", "401", "500"} <= set(send["responses"])


def test_a_user_token_is_forbidden(app, client, admin_headers, request):
    if app.extensions["trellis"].module("authentication") is None:
        pytest.skip("needs the authentication module for a user token")
    user = request.getfixturevalue("user")
    response = client.post("/sms/send", json={"to": VALID, "message": "hi"}, headers=user.headers)
    assert response.status_code == 403
    assert client.get("/admin/sms/outbox", headers=user.headers).status_code == 403
    assert outbox(client, admin_headers)["count"] == 0
