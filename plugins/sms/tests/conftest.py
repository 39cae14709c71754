"""Fixtures of the SMS tests: a local HTTP server that speaks Twilio's Messages API."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from werkzeug.wrappers import Request, Response

from trellis.testing.fake_servers import serve_wsgi

ACCOUNT_SID = "AC" + "0123456789abcdef" * 2
AUTH_TOKEN = "twilio-test-auth-token"
FROM_NUMBER = "+15005550006"


@pytest.fixture(autouse=True)
def _sms_module_loaded(app) -> None:
    if app.extensions["trellis"].module("sms") is None:
        pytest.skip("the sms module is not enabled (TRELLIS_MODULES)")


def _twilio_error(status: int, code: int, message: str) -> Response:
    body = {
        "code": code,
        "message": message,
        "more_info": f"https://www.twilio.com/docs/errors/{code}",
        "status": status,
    }
    return Response(json.dumps(body), status=status, content_type="application/json")


@dataclass
class FakeTwilio:
    """Twilio's ``POST /2010-04-01/Accounts/{AccountSid}/Messages.json``: basic auth, form fields, JSON answer."""

    url: str = ""
    account_sid: str = ACCOUNT_SID
    auth_token: str = AUTH_TOKEN
    from_number: str = FROM_NUMBER
    refuse: set[str] = field(default_factory=set)  # recipients answered with Twilio's error 21610
    requests: list[dict[str, Any]] = field(default_factory=list)

    def settings(self, **overrides: Any) -> dict[str, Any]:
        base = {"accountSid": self.account_sid, "authToken": self.auth_token, "phoneNumber": self.from_number}
        return {**base, "baseUrl": self.url, **overrides}

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        response = self.handle(request)
        return response(environ, start_response)

    def handle(self, request: Request) -> Response:
        username, password = _basic_auth(request.headers.get("Authorization", ""))
        self.requests.append(
            {
                "method": request.method,
                "path": request.path,
                "auth": (username, password),
                "form": request.form.to_dict(),
                "content_type": request.mimetype,
            }
        )
        expected_path = f"/2010-04-01/Accounts/{self.account_sid}/Messages.json"
        if (username, password) != (self.account_sid, self.auth_token):
            return _twilio_error(401, 20003, "Authenticate")
        if request.method != "POST" or request.path != expected_path:
            return _twilio_error(404, 20404, f"The requested resource {request.path} was not found")
        if request.mimetype != "application/x-www-form-urlencoded":
            return _twilio_error(400, 20001, "Expected a form body")
        to, sender, body = (request.form.get(name) for name in ("To", "From", "Body"))
        if not to or not body:
            return _twilio_error(400, 21604, "A 'To' phone number and a 'Body' are required.")
        if sender != self.from_number:
            return _twilio_error(400, 21606, "The From phone number is not a valid, SMS-capable inbound phone number")
        if to in self.refuse:
            return _twilio_error(400, 21610, "Attempt to send to unsubscribed recipient")
        sid = "SM" + uuid.uuid4().hex
        payload = {
            "sid": sid,
            "account_sid": self.account_sid,
            "to": to,
            "from": sender,
            "body": body,
            "status": "queued",
            "num_segments": "1",
            "direction": "outbound-api",
            "api_version": "2010-04-01",
            "date_created": "Sat, 21 Nov 2026 10:00:00 +0000",
            "uri": f"{expected_path[:-5]}/{sid}.json",
        }
        return Response(json.dumps(payload), status=201, content_type="application/json")


def _basic_auth(header: str) -> tuple[str | None, str | None]:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return None, None
    username, _, password = base64.b64decode(value).decode().partition(":")
    return username, password


@pytest.fixture(scope="session")
def _twilio_server() -> Iterator[FakeTwilio]:
    fake = FakeTwilio()
    with serve_wsgi(fake) as served:
        fake.url = served.url
        yield fake


@pytest.fixture()
def fake_twilio(_twilio_server: FakeTwilio) -> Iterator[FakeTwilio]:
    _twilio_server.requests.clear()
    _twilio_server.refuse.clear()
    _twilio_server.auth_token = AUTH_TOKEN
    yield _twilio_server


@pytest.fixture()
def use_twilio(client, admin_headers, fake_twilio: FakeTwilio) -> FakeTwilio:
    """The module configured for the fake Twilio through the real config route."""
    response = client.put(
        "/admin/sms/config", json={"provider": "twilio", "twilio": fake_twilio.settings()}, headers=admin_headers
    )
    assert response.status_code == 200, response.get_json()
    return fake_twilio
