"""Helpers for the Authentication module's tests."""
from __future__ import annotations

import itertools
import uuid
from typing import Any

import pytest

from trellis.hooks import hookimpl

_ips = itertools.count(1)


def fresh_ip() -> str:
    """A client address no other test uses (TEST-NET-3), so per-IP limits never carry over between tests."""
    n = next(_ips)
    return f"203.0.{(n >> 8) % 256}.{n % 256}"


def fresh_email() -> str:
    return f"auth-{uuid.uuid4().hex[:12]}@example.com"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class Api:
    """Thin calls to the module's routes through the Flask test client."""

    def __init__(self, client: Any, admin_headers: dict[str, str]) -> None:
        self.client = client
        self.admin = admin_headers

    fresh_ip = staticmethod(fresh_ip)
    fresh_email = staticmethod(fresh_email)
    bearer = staticmethod(bearer)

    def register(self, email: str, password: str = "long-enough-1", ip: str | None = None, **extra: Any):
        return self.client.post(
            "/authentication/local/new",
            json={"email": email, "password": password, **extra},
            environ_base={"REMOTE_ADDR": ip or fresh_ip()},
        )

    def login(self, email: str, password: str, ip: str | None = None):
        return self.client.post(
            "/authentication/local",
            json={"email": email, "password": password},
            environ_base={"REMOTE_ADDR": ip or fresh_ip()},
        )

    def renew(self, refresh_token: str):
        return self.client.post("/authentication/renew", json={"refreshToken": refresh_token})

    def me(self, token: str):
        return self.client.get("/authentication/user", headers=bearer(token))

    def configure(self, **changes: Any) -> dict[str, Any]:
        response = self.client.put("/config/authentication", json=changes, headers=self.admin)
        assert response.status_code == 200, response.get_json()
        return response.get_json()


@pytest.fixture()
def api(client, admin_headers) -> Api:
    return Api(client, admin_headers)


class HookRecorder:
    def __init__(self) -> None:
        self.blocked: list[str] = []
        self.deleted: list[str] = []
        self.fail_delete = False
        self.fail_block = False

    @hookimpl
    def trellis_user_blocked(self, user_id: str) -> None:
        self.blocked.append(user_id)
        if self.fail_block:
            raise ConnectionError("the socket server is away")

    @hookimpl
    def trellis_user_deleted(self, user_id: str) -> None:
        self.deleted.append(user_id)
        if self.fail_delete:
            from trellis.errors import APIError

            raise APIError(409, "another module refuses")


@pytest.fixture()
def hook_recorder(app):
    """A real listener on the app's hook manager (what the Chat module does), removed after the test."""
    recorder = HookRecorder()
    manager = app.extensions["trellis"].hooks
    manager.register(recorder, name=f"test-recorder-{id(recorder)}")
    try:
        yield recorder
    finally:
        manager.unregister(recorder)
