"""Webhooks test helpers: a real HTTP receiver on 127.0.0.1 (a threaded ``http.server``) that records every
delivery and answers as a test tells it, and the admin calls that set webhooks up."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """Answers with ``statuses`` in turn (then ``default_status``); ``hold`` keeps requests waiting until set."""

    url: str = ""
    received: list[Received] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    default_status: int = 200
    answer_body: bytes = b"ok"
    hold: threading.Event | None = None
    delay: float = 0.0  # seconds before answering
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        with self.arrived:
            while len(self.received) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(self.received)} deliveries arrived within {timeout} s, not {count}")
                self.arrived.wait(left)
            return list(self.received)


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real receivers do

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with receiver.arrived:
                receiver.received.append(Received(self.path, dict(self.headers.items()), body, time.time()))
                status = receiver.statuses.pop(0) if receiver.statuses else receiver.default_status
                receiver.arrived.notify_all()
            if receiver.hold is not None:
                receiver.hold.wait(60)
            if receiver.delay:
                time.sleep(receiver.delay)
            self.send_response(status)
            if 300 <= status < 400:
                self.send_header("Location", "http://127.0.0.1:9/elsewhere")
            self.send_header("Content-Length", str(len(receiver.answer_body)))
            self.end_headers()
            self.wfile.write(receiver.answer_body)

        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

    return Handler


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default backlog is 5: a burst of senders opening connections at once overflows it and
    # some connections are reset (a failed first attempt). Real receivers listen with hundreds (nginx 511).
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:  # a sender killed mid-answer: expected
        pass


@pytest.fixture()
def make_receiver() -> Iterator[Callable[[], Receiver]]:
    """``make_receiver()`` → a new :class:`Receiver` listening on 127.0.0.1 until the test ends."""
    running: list[tuple[Receiver, ThreadingHTTPServer, threading.Thread]] = []

    def make() -> Receiver:
        state = Receiver()
        server = _QuietServer(("127.0.0.1", 0), _handler(state))
        state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks"
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        running.append((state, server, thread))
        return state

    try:
        yield make
    finally:
        for state, server, thread in running:
            if state.hold is not None:
                state.hold.set()
            server.shutdown()
            server.server_close()
            thread.join(5)


@pytest.fixture()
def receiver(make_receiver) -> Receiver:
    return make_receiver()


@pytest.fixture()
def allow_private(client, admin_headers) -> None:
    """Loopback receivers are private targets: allowed for the test (config rolls back with the test)."""
    response = client.put("/admin/webhooks/config", json={"allowPrivateTargets": True}, headers=admin_headers)
    assert response.status_code == 200, response.get_json()


@pytest.fixture()
def make_webhook(client, admin_headers) -> Callable[..., dict[str, Any]]:
    def make(url: str, events: list[str] | None = None, **fields: Any) -> dict[str, Any]:
        body = {"url": url, "events": events or ["database.*.*"], **fields}
        response = client.post("/admin/webhooks", json=body, headers=admin_headers)
        assert response.status_code == 201, response.get_json()
        return response.get_json()

    return make


@pytest.fixture()
def readme_receiver() -> dict[str, Any]:
    """The names the README's receiver example (its first ``python`` block) defines, run as documented."""
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert code is not None, "the README has no python example"
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    exec(compile(code.group(1), str(README), "exec"), namespace)
    return namespace
