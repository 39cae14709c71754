"""Helpers for the Chat module's tests: REST calls through the test client, and a real Socket.IO client."""

from __future__ import annotations

import os
import queue
from typing import Any

import pytest
import requests
import socketio

from trellis.modules import parse_allow_list
from trellis.testing.plugin import TEST_MASTER_KEY
from trellis.testing.sockets import InOrderClient

_allow = parse_allow_list(os.environ.get("TRELLIS_MODULES"))
# Installed but not enabled: importing these tests would add the chat tables to the shared metadata.
collect_ignore_glob = [] if _allow is None or "chat" in _allow else ["test_chat_*.py"]

ADMIN = {"masterkey": TEST_MASTER_KEY}
WAIT = 10.0  # seconds; only reached when something is broken


class Chat:
    """The chat routes through the Flask test client."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def create_room(self, owner: Any, users: list[str], name: str = "room") -> str:
        response = self.client.post("/chat/rooms", json={"roomName": name, "users": users}, headers=owner.headers)
        assert response.status_code == 201, response.get_json()
        return response.get_json()["roomId"]

    def send(self, sender: Any, room_id: str, text: str) -> dict[str, Any]:
        response = self.client.post(f"/chat/rooms/{room_id}/messages", json={"message": text}, headers=sender.headers)
        assert response.status_code == 201, response.get_json()
        return response.get_json()

    def configure(self, **changes: Any) -> None:
        response = self.client.put("/config/chat", json=changes, headers=ADMIN)
        assert response.status_code == 200, response.get_json()


@pytest.fixture()
def chat(client) -> Chat:
    return Chat(client)


class Http:
    """The same calls against a live server."""

    def __init__(self, base_url: str) -> None:
        self.url = base_url

    def create_room(self, owner: Any, users: list[str], name: str = "room") -> str:
        body = {"roomName": name, "users": users}
        response = requests.post(f"{self.url}/chat/rooms", json=body, headers=owner.headers, timeout=WAIT)
        assert response.status_code == 201, response.text
        return response.json()["roomId"]

    def send(self, sender: Any, room_id: str, text: str) -> dict[str, Any]:
        url = f"{self.url}/chat/rooms/{room_id}/messages"
        response = requests.post(url, json={"message": text}, headers=sender.headers, timeout=WAIT)
        assert response.status_code == 201, response.text
        return response.json()

    def put(self, path: str, headers: dict[str, str], body: Any = None) -> requests.Response:
        return requests.put(self.url + path, json=body, headers=headers, timeout=WAIT)


class SocketUser:
    """A python-socketio client connected to a live server, recording what it receives."""

    def __init__(self, url: str, token: str | None, namespace: str = "/chat/") -> None:
        self.namespace = namespace
        self.events = {name: queue.Queue() for name in ("message", "messageDeleted", "roomDeleted")}
        self.disconnected = queue.Queue()
        self.client = InOrderClient(reconnection=False)
        for name, inbox in self.events.items():
            self.client.on(name, inbox.put, namespace=namespace)
        self.client.on("disconnect", lambda *reason: self.disconnected.put(reason), namespace=namespace)
        self.client.connect(
            url,
            socketio_path="realtime",
            namespaces=[namespace],
            transports=["websocket"],
            auth={"token": token} if token is not None else None,
            wait_timeout=WAIT,
        )

    def call(self, event: str, *args: Any) -> Any:
        return self.client.call(event, args if len(args) != 1 else args[0], namespace=self.namespace, timeout=WAIT)

    def next(self, event: str = "message") -> Any:
        return self.events[event].get(timeout=WAIT)

    def texts_until(self, last: str) -> list[str]:
        """Texts of the messages received up to the one reading ``last``: proves what did NOT arrive before it."""
        texts = []
        while not texts or texts[-1] != last:
            texts.append(self.next()["message"])
        return texts

    def close(self) -> None:
        if self.client.connected:
            self.client.disconnect()


def refusal(url: str, token: str | None, namespace: str = "/chat/") -> Any:
    """Connect expecting the server to refuse; returns the refusal it sent (``{message, data}``)."""
    seen: list[Any] = []
    client = socketio.Client(reconnection=False)
    client.on("connect_error", seen.append, namespace=namespace)
    auth = {"token": token} if token is not None else None
    with pytest.raises(socketio.exceptions.ConnectionError):
        client.connect(
            url,
            socketio_path="realtime",
            namespaces=[namespace],
            transports=["websocket"],
            auth=auth,
            wait_timeout=WAIT,
        )
    assert seen, "the server closed the connection without a refusal"
    return seen[0]


@pytest.fixture()
def sockets():
    """``sockets(url, token, namespace="/chat/")`` → a connected :class:`SocketUser`, closed after the test."""
    opened: list[SocketUser] = []

    def connect(url: str, token: str | None, namespace: str = "/chat/") -> SocketUser:
        user = SocketUser(url, token, namespace)
        opened.append(user)
        return user

    yield connect
    for user in opened:
        user.close()


@pytest.fixture()
def refused():
    return refusal


@pytest.fixture()
def http():
    """``http(base_url)`` → :class:`Http` for a live server."""
    return Http


@pytest.fixture(scope="module")
def chat_server(module_live_server):
    """One live server shared by a test module: starting an eventlet server costs seconds of CPU, so the
    socket tests share one; each test makes its own users and rooms."""
    return module_live_server
