"""Fixtures of the push tests: a local server speaking FCM's HTTP v1 API and Google's OAuth 2.0 token
endpoint (JWT-bearer grant), and a service account whose key it verifies."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from werkzeug.wrappers import Request, Response

from trellis.testing.fake_servers import serve_wsgi

PROJECT_ID = "trellis-test"
CLIENT_EMAIL = "push@trellis-test.iam.gserviceaccount.com"
FCM_SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
JWT_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
# google-auth always signs its grant for Google's token endpoint, whatever token_uri it posts to.
GRANT_AUDIENCE = "https://oauth2.googleapis.com/token"


@pytest.fixture(autouse=True)
def _push_module_loaded(app) -> None:
    if app.extensions["trellis"].module("pushNotifications") is None:
        pytest.skip("the pushNotifications module is not enabled (TRELLIS_MODULES)")


def _pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


@pytest.fixture(scope="session")
def service_account_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _google_error(status: int, code: str, message: str, details: list[dict[str, Any]] | None = None) -> Response:
    body = {"error": {"code": status, "message": message, "status": code, "details": details or []}}
    return Response(json.dumps(body), status=status, content_type="application/json")


def _fcm_error(status: int, status_name: str, fcm_code: str, message: str, token_field: bool = False) -> Response:
    details: list[dict[str, Any]] = [
        {"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": fcm_code}
    ]
    if token_field:
        details.append(
            {
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [{"field": "message.token", "description": "Invalid registration token"}],
            }
        )
    return _google_error(status, status_name, message, details)


@dataclass
class FakeFcm:
    """``POST /token`` (OAuth 2.0 JWT-bearer grant) and ``POST /v1/projects/{id}/messages:send``."""

    public_key: Any
    url: str = ""
    project_id: str = PROJECT_ID
    client_email: str = CLIENT_EMAIL
    scope: str = FCM_SCOPE
    unregistered: set[str] = field(default_factory=set)  # 404 UNREGISTERED
    invalid: set[str] = field(default_factory=set)  # 400 INVALID_ARGUMENT on message.token
    unavailable: set[str] = field(default_factory=set)  # 503 UNAVAILABLE (device kept)
    refuse_grants: bool = False
    delay: float = 0.0  # seconds each send takes, to see the fan-out run in parallel
    in_flight: int = 0
    max_in_flight: int = 0
    issued: set[str] = field(default_factory=set)
    grants: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def token_uri(self) -> str:
        return f"{self.url}/token"

    def settings(self, private_key_pem: str, **overrides: Any) -> dict[str, Any]:
        base = {
            "projectId": PROJECT_ID,
            "clientEmail": CLIENT_EMAIL,
            "privateKey": private_key_pem,
            "baseUrl": self.url,
            "tokenUri": self.token_uri,
        }
        return {**base, **overrides}

    def reset(self) -> None:
        for collection in (self.unregistered, self.invalid, self.unavailable, self.issued, self.grants, self.messages):
            collection.clear()
        self.refuse_grants = False
        self.delay = 0.0
        self.in_flight = self.max_in_flight = 0

    def revoke_all(self) -> None:
        self.issued.clear()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        if request.method == "POST" and request.path == "/token":
            response = self.token(request)
        elif request.method == "POST" and request.path == f"/v1/projects/{PROJECT_ID}/messages:send":
            with self.lock:
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                time.sleep(self.delay)
                response = self.send(request)
            finally:
                with self.lock:
                    self.in_flight -= 1
        else:
            response = _google_error(404, "NOT_FOUND", f"{request.method} {request.path} is not an FCM route")
        return response(environ, start_response)

    def token(self, request: Request) -> Response:
        grant = {"grant_type": request.form.get("grant_type"), "claims": None}
        with self.lock:
            self.grants.append(grant)
        if grant["grant_type"] != JWT_GRANT or self.refuse_grants:
            return Response(
                json.dumps({"error": "invalid_grant", "error_description": "Invalid JWT Signature."}),
                status=400,
                content_type="application/json",
            )
        try:
            claims = jwt.decode(
                request.form.get("assertion", ""),
                self.public_key,
                algorithms=["RS256"],
                audience=GRANT_AUDIENCE,
                issuer=CLIENT_EMAIL,
                options={"require": ["exp", "iat"]},
            )
        except jwt.PyJWTError as exc:
            return Response(
                json.dumps({"error": "invalid_grant", "error_description": str(exc)}),
                status=400,
                content_type="application/json",
            )
        grant["claims"] = claims
        if FCM_SCOPE not in claims.get("scope", "").split():
            return Response(json.dumps({"error": "invalid_scope"}), status=400, content_type="application/json")
        access_token = "ya29." + uuid.uuid4().hex
        with self.lock:
            self.issued.add(access_token)
        return Response(
            json.dumps({"access_token": access_token, "expires_in": 3599, "token_type": "Bearer"}),
            content_type="application/json",
        )

    def send(self, request: Request) -> Response:
        scheme, _, access_token = request.headers.get("Authorization", "").partition(" ")
        if scheme != "Bearer" or access_token not in self.issued:
            return _google_error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
        if request.mimetype != "application/json":
            return _google_error(400, "INVALID_ARGUMENT", "Expected JSON")
        body = request.get_json()
        message = body.get("message") if isinstance(body, dict) else None
        if not isinstance(message, dict) or set(body) != {"message"} or "token" not in message:
            return _google_error(400, "INVALID_ARGUMENT", "Invalid JSON payload received.")
        data = message.get("data", {})
        if not all(isinstance(v, str) for v in data.values()):
            return _google_error(400, "INVALID_ARGUMENT", "Invalid value at 'message.data' (string expected)")
        with self.lock:
            self.messages.append({"access_token": access_token, "message": message, "at": time.monotonic()})
        token = message["token"]
        if token in self.unregistered:
            return _fcm_error(404, "NOT_FOUND", "UNREGISTERED", "Requested entity was not found.")
        if token in self.invalid:
            return _fcm_error(
                400,
                "INVALID_ARGUMENT",
                "INVALID_ARGUMENT",
                "The registration token is not a valid FCM registration token",
                token_field=True,
            )
        if token in self.unavailable:
            return _fcm_error(503, "UNAVAILABLE", "UNAVAILABLE", "The service is currently unavailable.")
        name = f"projects/{PROJECT_ID}/messages/0:{uuid.uuid4().hex}"
        return Response(json.dumps({"name": name}), content_type="application/json")


@pytest.fixture(scope="session")
def _fcm_server(service_account_key) -> Iterator[FakeFcm]:
    fake = FakeFcm(public_key=service_account_key.public_key())
    with serve_wsgi(fake) as served:
        fake.url = served.url
        yield fake


@pytest.fixture()
def fake_fcm(_fcm_server: FakeFcm) -> Iterator[FakeFcm]:
    _fcm_server.reset()
    yield _fcm_server


@pytest.fixture()
def private_key_pem(service_account_key) -> str:
    return _pem(service_account_key)


@pytest.fixture()
def use_firebase(app, client, admin_headers, fake_fcm: FakeFcm, private_key_pem: str) -> FakeFcm:
    """The module configured for the fake FCM through the real config route, with no cached FCM client."""
    from trellis_push_notifications.providers import PushState

    app.extensions["pushNotifications"] = PushState()
    body = {"provider": "firebase", "firebase": fake_fcm.settings(private_key_pem)}
    response = client.put("/admin/pushNotifications/config", json=body, headers=admin_headers)
    assert response.status_code == 200, response.get_json()
    return fake_fcm


@pytest.fixture()
def register(client):
    """``register(user, token, platform="android")`` through the real route."""

    def do(user: Any, token: str, platform: str = "android") -> dict[str, Any]:
        response = client.post(
            "/pushNotifications/token", json={"token": token, "platform": platform}, headers=user.headers
        )
        assert response.status_code == 201, response.get_json()
        return response.get_json()

    return do


@pytest.fixture()
def subscribe(client):
    def do(user: Any, topic: str) -> None:
        response = client.post("/pushNotifications/subscribe", json={"topic": topic}, headers=user.headers)
        assert response.status_code == 200, response.get_json()

    return do
