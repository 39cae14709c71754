"""Helpers for the Authentication module's tests."""

from __future__ import annotations

import itertools
import re
import time
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

    def __init__(self, client: Any, admin_headers: dict[str, str], smtp: Any) -> None:
        self.client = client
        self.admin = admin_headers
        self.smtp = smtp

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

    def call(
        self, method: str, path: str, json: Any = None, headers: dict[str, str] | None = None, ip: str | None = None
    ):
        """One request; the response is read and closed (as a server does once it is sent)."""
        response = self.client.open(
            path, method=method, json=json, headers=headers or {}, environ_base={"REMOTE_ADDR": ip or fresh_ip()}
        )
        response.get_data()
        response.close()
        return response

    def post(self, path: str, json: Any = None, token: str | None = None, ip: str | None = None):
        return self.call("POST", path, json, bearer(token) if token else None, ip)

    def get(self, path: str, token: str | None = None):
        return self.call("GET", path, headers=bearer(token) if token else None)

    def mails(self, to: str) -> list[dict[str, Any]]:
        """Messages the Email module recorded for ``to``, newest first, once the queued ones are sent (what
        a server's background senders do), each with the ``body`` the SMTP server received: the outbox
        listing shows links hidden."""
        from trellis_email.outbox import send_queued

        send_queued()
        answer = self.client.get("/admin/email/outbox?limit=1000", headers=self.admin).get_json()
        received = {d.message["Message-ID"]: d.message for d in self.smtp.messages}
        mails = []
        for mail in answer["messages"]:
            if mail["to"] == to:
                delivered = received.get(mail["providerMessageId"])
                if delivered is not None:
                    mail = dict(mail, body=delivered.get_body(("html",)).get_content())
                mails.append(mail)
        return mails

    def texts(self, to: str) -> list[dict[str, Any]]:
        answer = self.client.get("/admin/sms/outbox", query_string={"to": to, "limit": 1000}, headers=self.admin)
        return answer.get_json()["messages"]

    def sms_code(self, to: str) -> str:
        texts = self.texts(to)
        assert texts, f"no SMS to {to}"
        return re.search(r"\b(\d{6})\b", texts[0]["message"]).group(1)

    def module(self, name: str, **changes: Any) -> None:
        response = self.client.put(f"/config/{name}", json=changes, headers=self.admin)
        assert response.status_code == 200, response.get_json()

    def configure(self, **changes: Any) -> dict[str, Any]:
        response = self.client.put("/config/authentication", json=changes, headers=self.admin)
        assert response.status_code == 200, response.get_json()
        return response.get_json()


@pytest.fixture()
def api(client, admin_headers, smtp_server) -> Api:
    """The mail goes to a real SMTP server (aiosmtpd), as a deployment's would."""
    made = Api(client, admin_headers, smtp_server)
    made.module("email", **smtp_server.email_config())
    return made


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


def link_in(mail: dict[str, Any]) -> str:
    """The ``link`` of a mail made from one of the module's templates."""
    return re.search(r'href="([^"]+)"', mail["body"]).group(1).replace("&amp;", "&")


def path_of(link: str) -> str:
    """The path (and query) of an absolute link, for the test client."""
    return re.sub(r"^https?://[^/]+", "", link)


def code_of_step(totp: Any, offset: int = 0) -> str:
    """The code of the 30 s step ``offset`` steps from now. In the last second of a step it first waits
    for the next one, so the server checks the code in the step it was computed in."""
    left = 30 - time.time() % 30
    if left < 1:
        time.sleep(left + 0.05)
    return totp.at(time.time() + 30 * offset)


def fresh_phone() -> str:
    """A valid, unused number (US 555-01xx numbers are fictional; 201 is a real New Jersey area code)."""
    n = next(_ips)
    return f"+1201555{n % 10000:04d}"
