"""Mail sent on behalf of a request, against real server processes (eventlet) and a real SMTP server
(aiosmtpd): no answer waits for the mail server, and a mail queued by an answer arrives even when the mail
server is away at first or the process that answered is killed before sending it."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest
import requests

from trellis.testing.plugin import TEST_MASTER_KEY, free_port
from trellis.testing.waiting import wait_until
from trellis_authentication.testing import create_user_over_http

pytestmark = pytest.mark.live

ADMIN = {"masterkey": TEST_MASTER_KEY}
SLOW_SMTP_SECONDS = 6.0


def configure(base: str, module: str, **changes: Any) -> None:
    answer = requests.put(f"{base}/config/{module}", json=changes, headers=ADMIN, timeout=30)
    assert answer.status_code == 200, answer.text


def account_without_verification_mail(base: str) -> str:
    configure(base, "authentication", local={"verification": {"sendEmail": False}})
    return create_user_over_http(base).email


def outbox(base: str, to: str) -> list[dict[str, Any]]:
    messages = requests.get(f"{base}/admin/email/outbox?limit=100", headers=ADMIN, timeout=30).json()["messages"]
    return [m for m in messages if m["to"] == to]


class KeepAlive:
    """One HTTP/1.1 connection, kept open between requests (what a browser or a probe does)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.buffer = b""

    def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, float]:
        """Send one request and read its answer; (status, seconds from sending to the complete answer)."""
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n"
        if body:
            head += "Content-Type: application/json\r\n"
        started = time.monotonic()
        self.sock.sendall(head.encode() + b"\r\n" + body)
        while b"\r\n\r\n" not in self.buffer:
            self._read()
        header, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = header.decode("latin-1").split("\r\n")
        length = next(int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:"))
        while len(self.buffer) < length:
            self._read()
        self.buffer = self.buffer[length:]
        return int(lines[0].split()[1]), time.monotonic() - started

    def _read(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise AssertionError("the server closed the connection")
        self.buffer += chunk

    def close(self) -> None:
        self.sock.close()


def test_the_request_after_a_forgot_password_does_not_wait_for_the_mail_server(
    live_server_factory, smtp_server_factory
):
    """The mail server takes 6 s to accept a message. On one keep-alive connection, the request that follows
    a forgot-password is answered at once, for a known address as for an unknown one (before, the known
    address's mail was sent on that connection after the answer: the next answer came 6 s later)."""
    smtp = smtp_server_factory(delay=SLOW_SMTP_SECONDS)
    server = live_server_factory()
    configure(server.url, "email", **smtp.email_config(timeout=30))
    known = account_without_verification_mail(server.url)
    unknown = f"nobody-{known}"
    connection = KeepAlive(server.port)
    try:
        timings = {}
        for email in (known, unknown, known):
            status, asked = connection.request(
                "POST", "/authentication/forgot-password", f'{{"email":"{email}"}}'.encode()
            )
            assert status == 200
            status, next_one = connection.request("GET", "/health")
            assert status == 200
            timings.setdefault(email, []).append((asked, next_one))
    finally:
        connection.close()
    for email, pairs in timings.items():
        for asked, next_one in pairs:
            assert asked < SLOW_SMTP_SECONDS / 2 and next_one < SLOW_SMTP_SECONDS / 2, (email, timings)
    # The mails do go out, only later: two for the known address, none for the unknown one.
    wait_until(lambda: len(smtp.messages) >= 2, "the known address's mails", 4 * SLOW_SMTP_SECONDS)
    assert sorted(d.rcpt_tos[0] for d in smtp.messages) == [known, known]
    assert outbox(server.url, unknown) == []


@pytest.mark.long
def test_mails_arrive_once_the_mail_server_is_back_each_once(live_server_factory, smtp_server_factory):
    """Two processes answer forgot-password for ten accounts while nothing listens on the mail server's port:
    the mails are tried again (0.5 s apart here) and arrive once a server listens there, each exactly once
    though both processes' senders look for them. The outbox listing never shows a link."""
    port = free_port()
    retries = ",".join(["0.5"] * 30)
    servers = [live_server_factory(TRELLIS_EMAIL_RETRY_SECONDS=retries) for _ in range(2)]
    base = servers[0].url
    configure(base, "email", provider="smtp", smtp={"host": "127.0.0.1", "port": port, "secure": "none"})
    configure(base, "authentication", local={"verification": {"sendEmail": False}})
    emails = [create_user_over_http(base).email for _ in range(10)]
    for n, email in enumerate(emails):
        asked = requests.post(f"{servers[n % 2].url}/authentication/forgot-password", json={"email": email}, timeout=30)
        assert asked.status_code == 200
    failing = wait_until(lambda: [m for m in outbox(base, emails[0]) if m["attempts"] >= 2], "two failed attempts", 30)
    assert failing[0]["status"] == "queued" and "Cannot reach SMTP server" in failing[0]["error"]
    assert "[hidden]" in failing[0]["body"] and "reset_token" not in failing[0]["body"]

    smtp = smtp_server_factory(port=port, delay=0.2)
    wait_until(lambda: len(smtp.messages) >= len(emails), "every mail once the server is back", 60)
    time.sleep(1.0)  # a second copy would come now
    assert sorted(d.rcpt_tos[0] for d in smtp.messages) == sorted(emails)
    assert all("reset_token=" in d.message.get_body(("html",)).get_content() for d in smtp.messages)
    sent = wait_until(lambda: [m for m in outbox(base, emails[0]) if m["status"] == "sent"], "status sent", 30)[0]
    assert sent["error"] is None and "reset_token" not in sent["body"]


@pytest.mark.long
def test_a_server_killed_before_sending_leaves_the_mail_to_the_next_one(live_server_factory, smtp_server_factory):
    """The process that answered is killed (SIGKILL) while the mail server is still taking the message; a
    process started afterwards sends it once the dead one's claim has run out (6 × the 3 s SMTP timeout)."""
    smtp = smtp_server_factory(delay=60)
    first = live_server_factory(TRELLIS_EMAIL_LEASE_SECONDS="2")  # at least 6 SMTP timeouts: 18 s
    configure(first.url, "email", **smtp.email_config(timeout=3))
    email = account_without_verification_mail(first.url)
    asked = requests.post(f"{first.url}/authentication/forgot-password", json={"email": email}, timeout=30)
    assert asked.status_code == 200
    wait_until(lambda: smtp.handler.receiving, "the first process sending", 30)
    first.process.kill()
    first.process.wait(10)
    smtp.handler.delay = 0
    assert smtp.messages == []

    second = live_server_factory()
    wait_until(lambda: smtp.messages, "the mail, sent by the second process", 60)
    time.sleep(1.0)  # a second copy would come now
    assert [d.rcpt_tos for d in smtp.messages] == [[email]]
    assert [m["status"] for m in outbox(second.url, email)] == ["sent"]
