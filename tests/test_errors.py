"""One error shape everywhere, request ids on every response, no internals in 500s."""

import logging


def assert_error(response, status, name):
    body = response.get_json()
    assert response.status_code == status
    assert body["name"] == name and body["status"] == status and body["message"]
    assert body["requestId"] == response.headers["X-Request-ID"]
    return body


def test_unknown_route_is_404_in_contract_shape(client):
    assert_error(client.get("/no/such/route"), 404, "NOT_FOUND")


def test_wrong_method_is_405(client):
    response = client.delete("/login")
    assert_error(response, 405, "METHOD_NOT_ALLOWED")
    assert "POST" in response.headers["Allow"]


def test_body_too_large_is_413(client, app, admin_headers):
    big = "x" * (app.config["MAX_CONTENT_LENGTH"] + 1)
    response = client.post("/login", data=big, headers={**admin_headers, "Content-Type": "application/json"})
    assert_error(response, 413, "PAYLOAD_TOO_LARGE")


def test_malformed_json_is_400(client, admin_headers):
    response = client.post("/login", data="{oops", headers={**admin_headers, "Content-Type": "application/json"})
    assert_error(response, 400, "INVALID_ARGUMENTS")


def test_unexpected_exception_is_500_without_internals(greeter_client, caplog):
    with caplog.at_level(logging.ERROR):
        response = greeter_client.get("/greeter/boom")
    body = assert_error(response, 500, "INTERNAL_SERVER_ERROR")
    assert "hunter2" not in response.get_data(as_text=True) and "RuntimeError" not in body["message"]
    logged = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert logged and body["requestId"] in logged[0].getMessage()


def test_request_id_is_echoed_when_sane_and_replaced_when_not(client):
    assert client.get("/health", headers={"X-Request-ID": "abc-123"}).headers["X-Request-ID"] == "abc-123"
    replaced = client.get("/health", headers={"X-Request-ID": "bad id; with spaces"}).headers["X-Request-ID"]
    assert replaced != "bad id; with spaces" and len(replaced) == 32
    first, second = client.get("/health"), client.get("/health")
    assert first.headers["X-Request-ID"] != second.headers["X-Request-ID"]


def test_integrity_errors_become_409(app, db):
    from trellis.admins import create_admin
    from trellis.errors import APIError

    create_admin("twin", "password-one")
    try:
        create_admin("twin", "password-two")
    except APIError as exc:
        assert exc.status == 409
    else:
        raise AssertionError("duplicate admin was accepted")


def test_nul_characters_are_400_not_500(client, admin_headers):
    body = '{"username": "ad\\u0000min", "password": "x"}'
    response = client.post("/login", data=body, headers={**admin_headers, "Content-Type": "application/json"})
    assert_error(response, 400, "INVALID_ARGUMENTS")
    assert_error(client.get("/config/a%00b", headers=admin_headers), 400, "INVALID_ARGUMENTS")
    assert_error(client.get("/health?x=%00"), 400, "INVALID_ARGUMENTS")
    assert_error(client.get("/health?a%00b=1"), 400, "INVALID_ARGUMENTS")
    assert client.get("/health?x=%2500").status_code == 200  # an encoded percent sign, then 00: no NUL


def test_no_cookie_session_is_kept(client):
    from flask import session

    with client.application.test_request_context():
        assert session.__class__.__name__ == "NullSession"
    assert "Set-Cookie" not in client.get("/health").headers


def test_an_escaped_backslash_before_u0000_is_not_a_nul(client, admin_headers):
    body = '{"username": "a\\\\u0000b", "password": "whatever"}'  # the text a\u0000b: no NUL in it
    response = client.post("/login", data=body, headers={**admin_headers, "Content-Type": "application/json"})
    assert response.status_code == 401
    body = '{"username": "a\\\\\\u0000b", "password": "whatever"}'  # a backslash, then a real NUL
    response = client.post("/login", data=body, headers={**admin_headers, "Content-Type": "application/json"})
    assert response.status_code == 400
