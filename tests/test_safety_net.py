"""The outermost WSGI layer: an exception outside Flask's handlers and over-long URLs get the error shape."""

from __future__ import annotations

import json

import pytest
import requests
from werkzeug.test import EnvironBuilder

from trellis import create_app


class PEP3333StartResponse:
    """A server's start_response: a second call needs exc_info and is allowed while nothing was sent."""

    def __init__(self) -> None:
        self.status: str | None = None
        self.headers: list[tuple[str, str]] = []

    def __call__(self, status, headers, exc_info=None):
        if self.status is not None and exc_info is None:
            raise AssertionError("start_response called twice without exc_info")
        self.status, self.headers = status, headers
        return lambda data: None


def test_an_exception_outside_flask_handlers_is_the_error_shape_not_a_traceback(app_config, db, caplog):
    application = create_app(app_config)

    # A request teardown runs after the response was made, outside every error handler; unlike an app
    # context teardown it still lets the database session be removed (no leaked session after the test).
    @application.teardown_request
    def _fails(_error):
        raise RuntimeError("connection return failed: password=hunter2")

    start_response = PEP3333StartResponse()
    body = b"".join(application(EnvironBuilder(path="/health").get_environ(), start_response))
    assert start_response.status.startswith("500")
    payload = json.loads(body)
    assert payload == {"name": "INTERNAL_SERVER_ERROR", "status": 500, "message": payload["message"]}
    assert b"Traceback" not in body and b"hunter2" not in body
    assert dict(start_response.headers)["Content-Type"] == "application/json"
    assert any("outside the request handlers" in r.getMessage() for r in caplog.records)


def test_a_url_over_8_kb_is_414_in_the_error_shape(client):
    response = client.get("/health?x=" + "a" * 8200)
    assert response.status_code == 414
    assert response.get_json()["name"] == "URI_TOO_LONG"
    assert client.get("/health?x=" + "a" * 8000).status_code == 200


@pytest.mark.live
def test_the_server_answers_long_urls_and_long_request_lines_with_json(live_server):
    for size in (9_000, 70_000):  # ours (8 KB), then eventlet's own request-line limit (64 KB)
        response = requests.get(f"{live_server.url}/health?x={'a' * size}", timeout=30)
        assert response.status_code == 414, size
        assert response.json()["name"] == "URI_TOO_LONG"
        assert response.headers["X-Content-Type-Options"] == "nosniff"
