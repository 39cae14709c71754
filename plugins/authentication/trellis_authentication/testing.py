"""pytest plugin (entry point ``pytest11: trellis_authentication``): real users for any module's tests.

Fixtures (they build on the core plugin's ``client`` and roll back with ``db``):
    make_user(email=None, password=None)  a new user, created and signed in through the real API
    user                                   one such user
    user_headers                           ``{"Authorization": "Bearer <access token>"}`` of ``user``

For live-server tests: ``create_user_over_http(base_url, email=None, password=None)``.

Each helper-made user signs in from its own fake client address, so the per-IP login limit (shared by
every test in the session) is never tripped by fixtures; tests that exercise limits set their own.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

DEFAULT_PASSWORD = "correct-horse-battery-staple"

_addresses = itertools.count(1)


@dataclass
class UserAccount:
    id: str
    email: str
    password: str
    access_token: str
    refresh_token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.access_token}"}


def _new_email() -> str:
    return f"user-{uuid.uuid4().hex[:12]}@example.com"


def _fake_address() -> str:
    # 198.18.0.0/15 is reserved for benchmarks and tests; one address per helper-made user.
    n = next(_addresses)
    return f"198.{18 + (n >> 16) % 2}.{(n >> 8) % 256}.{n % 256}"


def _check(response_status: int, expected: int, what: str, body: Any) -> None:
    if response_status != expected:
        raise AssertionError(f"{what} answered {response_status}, expected {expected}: {body}")


def _account(tokens: dict[str, Any], email: str, password: str) -> UserAccount:
    return UserAccount(
        id=tokens["userId"],
        email=email.strip().lower(),
        password=password,
        access_token=tokens["accessToken"],
        refresh_token=tokens["refreshToken"],
    )


def create_user_with_client(client: Any, email: str | None = None, password: str | None = None) -> UserAccount:
    """Create (admin route, so closed registration does not matter) and sign in through a Flask test client."""
    from trellis.testing.plugin import TEST_MASTER_KEY

    email = email or _new_email()
    password = password or DEFAULT_PASSWORD
    created = client.post(
        "/authentication/users", json={"email": email, "password": password}, headers={"masterkey": TEST_MASTER_KEY}
    )
    _check(created.status_code, 201, "POST /authentication/users", created.get_json())
    signed_in = client.post(
        "/authentication/local",
        json={"email": email, "password": password},
        environ_base={"REMOTE_ADDR": _fake_address()},
    )
    _check(signed_in.status_code, 200, "POST /authentication/local", signed_in.get_json())
    return _account(signed_in.get_json(), email, password)


def create_user_over_http(base_url: str, email: str | None = None, password: str | None = None) -> UserAccount:
    """The same against a running server (``live_server.url``); data is committed there."""
    import requests

    from trellis.testing.plugin import TEST_MASTER_KEY

    email = email or _new_email()
    password = password or DEFAULT_PASSWORD
    base_url = base_url.rstrip("/")
    body = {"email": email, "password": password}
    created = requests.post(
        f"{base_url}/authentication/users", json=body, headers={"masterkey": TEST_MASTER_KEY}, timeout=30
    )
    _check(created.status_code, 201, "POST /authentication/users", created.text)
    signed_in = requests.post(f"{base_url}/authentication/local", json=body, timeout=30)
    _check(signed_in.status_code, 200, "POST /authentication/local", signed_in.text)
    return _account(signed_in.json(), email, password)


@pytest.fixture()
def make_user(client: Any) -> Callable[..., UserAccount]:
    """``make_user(email=None, password=None)`` → a signed-in :class:`UserAccount`."""

    def make(email: str | None = None, password: str | None = None) -> UserAccount:
        return create_user_with_client(client, email, password)

    return make


@pytest.fixture()
def user(make_user: Callable[..., UserAccount]) -> UserAccount:
    return make_user()


@pytest.fixture()
def user_headers(user: UserAccount) -> dict[str, str]:
    return user.headers
