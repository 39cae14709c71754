"""Against a real server process (eventlet): signing out closes the session's live connections, a
Socket.IO socket on ``/database/`` and a Server-Sent Events stream, as ending it from the session list
does; so does a refresh token presented again (reuse detection ends its session). Another user's
connections keep delivering."""

from __future__ import annotations

import queue
import uuid
from collections.abc import Callable, Iterator

import pytest
import requests

from trellis.testing.plugin import TEST_MASTER_KEY
from trellis.testing.sockets import InOrderClient
from trellis_authentication.testing import UserAccount, create_user_over_http

pytestmark = pytest.mark.live

socketio = pytest.importorskip("socketio")

ADMIN = {"masterkey": TEST_MASTER_KEY}
WAIT = 15.0  # seconds; only reached when something is broken
ROUNDS = 3


class Subscriber:
    """One user's Socket.IO subscription and SSE stream on a schema."""

    def __init__(self, base: str, schema: str, account: UserAccount) -> None:
        self.changes: queue.Queue = queue.Queue()
        self.disconnected: queue.Queue = queue.Queue()
        self.socket = InOrderClient(reconnection=False)
        self.socket.on("change", self.changes.put, namespace="/database/")
        self.socket.on("disconnect", lambda *reason: self.disconnected.put(reason), namespace="/database/")
        self.socket.connect(
            base,
            socketio_path="realtime",
            namespaces=["/database/"],
            transports=["websocket"],
            auth={"token": account.access_token},
            wait_timeout=WAIT,
        )
        ack = self.socket.call("subscribe", {"schema": schema}, namespace="/database/", timeout=WAIT)
        assert "subscriptionId" in ack, ack
        self.stream = requests.get(
            f"{base}/database/{schema}/changes", headers=account.headers, stream=True, timeout=WAIT
        )
        assert self.stream.status_code == 200, self.stream.text
        self.lines = self.stream.iter_lines(decode_unicode=True)
        assert next(self.lines).startswith(": subscribed")

    def next_streamed(self) -> str:
        """The next event's data line of the stream (heartbeats and blank lines skipped)."""
        for line in self.lines:
            if line.startswith("data:"):
                return line
        raise AssertionError("the stream ended")

    def close(self) -> None:
        self.stream.close()
        if self.socket.connected:
            self.socket.disconnect()


@pytest.fixture(scope="module")
def server(module_live_server):
    if requests.get(f"{module_live_server.url}/config/database", headers=ADMIN, timeout=WAIT).status_code != 200:
        pytest.skip("the database module (the live subscriptions) is not loaded")
    return module_live_server


@pytest.fixture()
def subscribers(server) -> Iterator[Callable[[str, UserAccount], Subscriber]]:
    opened: list[Subscriber] = []

    def open_one(schema: str, account: UserAccount) -> Subscriber:
        opened.append(Subscriber(server.url, schema, account))
        return opened[-1]

    yield open_one
    for subscriber in opened:
        subscriber.close()


def readable_schema(base: str) -> str:
    name = "Signed" + uuid.uuid4().hex[:8]
    crud = {"read": {"enabled": True, "authenticated": True}}
    body = {"name": name, "fields": {"title": "String"}, "modelOptions": {"conduit": {"cms": {"crudOperations": crud}}}}
    response = requests.post(f"{base}/admin/database/schemas", json=body, headers=ADMIN, timeout=WAIT)
    assert response.status_code == 201, response.text
    return name


def create(base: str, schema: str, title: str) -> None:
    response = requests.post(f"{base}/database/{schema}", json={"title": title}, headers=ADMIN, timeout=WAIT)
    assert response.status_code == 201, response.text


def assert_ended(base: str, schema: str, ended: Subscriber, bystander: Subscriber, account: UserAccount) -> None:
    ended.disconnected.get(timeout=WAIT)
    assert list(ended.lines) == [""]  # the stream ended
    create(base, schema, "after the end")
    assert "after the end" in bystander.changes.get(timeout=WAIT)["document"]["title"]
    assert "after the end" in bystander.next_streamed()
    assert ended.changes.empty()
    with pytest.raises(socketio.exceptions.ConnectionError):  # the ended session cannot come back
        InOrderClient(reconnection=False).connect(
            base,
            socketio_path="realtime",
            namespaces=["/database/"],
            transports=["websocket"],
            auth={"token": account.access_token},
            wait_timeout=WAIT,
        )


def test_logout_closes_the_sessions_socket_and_stream(server, subscribers):
    schema = readable_schema(server.url)
    bystander = subscribers(schema, create_user_over_http(server.url))
    for _ in range(ROUNDS):
        account = create_user_over_http(server.url)
        signed_in = subscribers(schema, account)
        create(server.url, schema, "before")
        assert signed_in.changes.get(timeout=WAIT)["document"]["title"] == "before"
        assert "before" in signed_in.next_streamed() and "before" in bystander.next_streamed()
        bystander.changes.get(timeout=WAIT)

        answer = requests.post(f"{server.url}/authentication/logout", headers=account.headers, timeout=WAIT)
        assert answer.status_code == 200, answer.text
        assert_ended(server.url, schema, signed_in, bystander, account)


def test_a_reused_refresh_token_closes_the_connections_of_its_session(server, subscribers):
    schema = readable_schema(server.url)
    bystander = subscribers(schema, create_user_over_http(server.url))
    account = create_user_over_http(server.url)
    renewed = requests.post(
        f"{server.url}/authentication/renew", json={"refreshToken": account.refresh_token}, timeout=WAIT
    )
    assert renewed.status_code == 200, renewed.text
    account.access_token = renewed.json()["accessToken"]
    signed_in = subscribers(schema, account)

    again = requests.post(
        f"{server.url}/authentication/renew", json={"refreshToken": account.refresh_token}, timeout=WAIT
    )
    assert again.status_code == 401, again.text  # the retired token presented again ends the session
    assert_ended(server.url, schema, signed_in, bystander, account)
