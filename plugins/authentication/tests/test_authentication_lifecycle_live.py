"""Against a real server process (eventlet): concurrent use of one reset token, and open Socket.IO
connections of ended sessions being dropped."""

from __future__ import annotations

import queue
import re
import threading
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from trellis.testing.plugin import TEST_MASTER_KEY
from trellis_authentication.testing import create_user_over_http

pytestmark = pytest.mark.live

ADMIN = {"masterkey": TEST_MASTER_KEY}


def reset_token(base: str, email: str, smtp: Any) -> str:
    """Ask for a reset and read the token from the mail the SMTP server receives (the outbox hides links)."""
    requests.put(f"{base}/config/email", json=smtp.email_config(), headers=ADMIN, timeout=30).raise_for_status()
    asked = requests.post(f"{base}/authentication/forgot-password", json={"email": email}, timeout=30)
    assert asked.status_code == 200
    for _ in range(100):  # the background senders send it
        mine = [d.message for d in smtp.messages if d.rcpt_tos == [email] and "reset" in d.message["Subject"].lower()]
        if mine:
            html = mine[-1].get_body(("html",)).get_content()
            link = re.search(r'href="([^"]+)"', html).group(1).replace("&amp;", "&")
            return parse_qs(urlsplit(link).query)["reset_token"][0]
        threading.Event().wait(0.1)
    raise AssertionError("no ForgotPassword mail")


def test_two_simultaneous_resets_with_one_token_exactly_one_wins(live_server, smtp_server):
    base = live_server.url
    for round_ in range(3):
        account = create_user_over_http(base)
        token = reset_token(base, account.email, smtp_server)
        passwords = [f"first-new-password-{round_}", f"second-new-password-{round_}"]
        start = threading.Barrier(2)
        statuses: dict[str, int] = {}

        def reset(password: str) -> None:
            start.wait(timeout=30)
            answer = requests.post(
                f"{base}/authentication/reset-password",
                json={"passwordResetToken": token, "password": password},
                timeout=60,
            )
            statuses[password] = answer.status_code

        threads = [threading.Thread(target=reset, args=(p,)) for p in passwords]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=90)
        assert sorted(statuses.values()) == [200, 400], statuses
        winner = next(p for p, status in statuses.items() if status == 200)
        loser = next(p for p in passwords if p != winner)
        sign_in = lambda password: (
            requests.post(  # noqa: E731
                f"{base}/authentication/local", json={"email": account.email, "password": password}, timeout=30
            ).status_code
        )
        assert (sign_in(winner), sign_in(loser), sign_in(account.password)) == (200, 401, 401)


socketio = pytest.importorskip("socketio")


class ChatSocket:
    def __init__(self, base: str, token: str) -> None:
        self.disconnected: queue.Queue = queue.Queue()
        self.client = socketio.Client(reconnection=False)
        self.client.on("disconnect", lambda *reason: self.disconnected.put(reason), namespace="/chat/")
        self.client.connect(
            base,
            socketio_path="realtime",
            namespaces=["/chat/"],
            transports=["websocket"],
            auth={"token": token},
            wait_timeout=10,
        )

    def close(self) -> None:
        if self.client.connected:
            self.client.disconnect()


def test_reset_and_change_password_drop_sockets_of_ended_sessions(live_server, smtp_server):
    base = live_server.url
    if requests.get(f"{base}/config/chat", headers=ADMIN, timeout=10).status_code != 200:
        pytest.skip("the chat module (the Socket.IO listener) is not loaded")
    account = create_user_over_http(base)
    socket = ChatSocket(base, account.access_token)
    try:
        token = reset_token(base, account.email, smtp_server)
        answer = requests.post(
            f"{base}/authentication/reset-password",
            json={"passwordResetToken": token, "password": "after-the-reset"},
            timeout=30,
        )
        assert answer.status_code == 200
        socket.disconnected.get(timeout=10)
    finally:
        socket.close()

    this = requests.post(
        f"{base}/authentication/local", json={"email": account.email, "password": "after-the-reset"}, timeout=30
    ).json()
    other = requests.post(
        f"{base}/authentication/local", json={"email": account.email, "password": "after-the-reset"}, timeout=30
    ).json()
    socket = ChatSocket(base, other["accessToken"])
    try:
        changed = requests.post(
            f"{base}/authentication/local/change-password",
            json={"oldPassword": "after-the-reset", "newPassword": "after-the-change"},
            headers={"Authorization": f"Bearer {this['accessToken']}"},
            timeout=30,
        )
        assert changed.status_code == 200
        socket.disconnected.get(timeout=10)
        # The ended session cannot come back; the session that changed the password can.
        with pytest.raises(socketio.exceptions.ConnectionError):
            ChatSocket(base, other["accessToken"])
        ChatSocket(base, this["accessToken"]).close()
    finally:
        socket.close()


def test_a_server_starts_while_another_transaction_is_creating_the_templates(client, live_server_factory):
    """Start-up creates missing templates, but never waits long for a transaction that writes them."""
    from trellis.testing.plugin import database_kind

    if database_kind() == "sqlite":
        # It starts there too (busy_timeout 2 s at start), but the test's own write lock would then also
        # block the live servers' clean-up of committed rows.
        pytest.skip("on SQLite the test's uncommitted write blocks the live-server data wipe")
    email = "starting-" + re.sub(r"\W", "", str(threading.get_ident())) + "@example.com"
    assert (
        client.post("/authentication/local/new", json={"email": email, "password": "long-enough-1"}).status_code == 201
    )
    # The test's transaction now holds uncommitted templates (and on SQLite the write lock).
    server = live_server_factory()
    assert requests.get(f"{server.url}/health", timeout=10).status_code == 200
