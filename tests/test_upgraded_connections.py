"""A connection upgraded to a websocket gives back its HTTP buffers (``trellis.server.upgraded``), and stays a
working websocket: large frames both ways, a client that leaves ends it cleanly. Plain HTTP keeps its buffers.

The server runs in this process (``green_server``) so the test can look at the protocol objects themselves;
the Socket.IO suites run the same code on real servers.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from .green_server import green_server, open_websocket, wait_for

pytestmark = pytest.mark.filterwarnings(r"ignore:\s*Eventlet is deprecated")

HTTP_WRITE_BUFFER = 16 << 10  # eventlet's HttpProtocol.wbufsize
SMALL = 1024  # an upgraded connection's files, buffers included, are smaller than this


class Recorder:
    """A WSGI app: ``/ws`` an echo websocket (recording the protocol of each connection), anything else 200."""

    def __init__(self) -> None:
        from eventlet.websocket import WebSocketWSGI

        self.protocols: list[Any] = []
        self.ended = 0
        self.websocket = WebSocketWSGI(self.echo, max_frame_length=8 << 20)

    def echo(self, ws: Any) -> None:
        self.protocols.append(ws.environ["eventlet.set_idle"].__self__)
        while (message := ws.wait()) is not None:
            ws.send(message)
        self.ended += 1

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if environ["PATH_INFO"] == "/ws":
            return self.websocket(environ, start_response)
        self.protocols.append(environ["eventlet.set_idle"].__self__)
        body = environ["wsgi.input"].read()
        start_response("200 OK", [("Content-Length", str(len(body) + 2))])
        return [b"ok", body]


@pytest.fixture()
def server() -> Iterator[tuple[Recorder, int, Any]]:
    app = Recorder()
    with green_server(app) as (port, guard):
        yield app, port, guard


def test_an_upgraded_connection_holds_no_http_buffer_and_carries_large_frames(server):
    app, port, _ = server
    ws = open_websocket(port, "/ws")
    ws.send("small")
    assert ws.wait() == "small"
    (protocol,) = app.protocols
    assert sys.getsizeof(protocol.wfile) < SMALL and sys.getsizeof(protocol.rfile) < SMALL
    assert sys.getsizeof(protocol.environ["eventlet.input"].rfile) < SMALL  # the same object everywhere
    for message in ("é" * 300_000, os.urandom(2_000_000)):  # past any buffer, in many TCP segments
        ws.send(message)
        assert ws.wait() == message
    ws.close()


def test_a_client_that_leaves_ends_the_upgraded_connection(server):
    app, port, guard = server
    polite, abrupt = open_websocket(port, "/ws"), open_websocket(port, "/ws")
    wait_for(lambda: len(app.protocols) == 2)
    polite.close()  # a close frame, then the socket
    abrupt.socket.close()  # no close frame
    wait_for(lambda: app.ended == 2 and guard.pool.running() == 0)
    for protocol in app.protocols:
        assert protocol.wfile.closed and protocol.rfile.closed


def test_plain_http_keeps_its_buffers_and_its_keep_alive(server):
    from eventlet.green import socket

    app, port, _ = server
    body = os.urandom(100_000)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        sock.sendall(b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
        reader = sock.makefile("rb")
        answers = []
        for _ in range(2):
            assert reader.readline().startswith(b"HTTP/1.1 200")
            length = 0
            while (line := reader.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            answers.append(reader.read(length))
        protocol = app.protocols[0]
        assert app.protocols == [protocol, protocol]  # one connection, kept alive
        assert sys.getsizeof(protocol.wfile) >= HTTP_WRITE_BUFFER
    assert answers == [b"ok" + body, b"ok"]


@pytest.mark.live
def test_large_socketio_messages_both_ways_on_a_real_server(module_live_server):
    """Through the whole stack (Flask-SocketIO, Engine.IO, the on-demand writer): a large packet from the
    client is answered and a large change reaches it, on a websocket that gave back its HTTP buffers."""
    import uuid

    import requests

    from trellis.testing.plugin import TEST_MASTER_KEY
    from trellis.testing.sockets import InOrderClient

    admin = {"masterkey": TEST_MASTER_KEY}
    url = module_live_server.url
    name = "Large" + uuid.uuid4().hex[:8]
    created = requests.post(
        f"{url}/admin/database/schemas",
        json={"name": name, "fields": {"body": {"type": "String", "index": False}}},
        headers=admin,
        timeout=30,
    )
    assert created.status_code == 201, created.text
    changes: list[Any] = []
    client = InOrderClient(reconnection=False)
    client.on("change", changes.append, namespace="/database/")
    client.connect(url, socketio_path="realtime", namespaces=["/database/"], transports=["websocket"], auth=admin)
    try:
        refused = client.call("subscribe", {"schema": name, "bogus": "y" * 400_000}, namespace="/database/", timeout=30)
        assert refused["error"]["status"] == 400
        assert "subscriptionId" in client.call("subscribe", {"schema": name}, namespace="/database/", timeout=30)
        body = "é" * 150_000 + "x" * 100_000
        response = requests.post(f"{url}/database/{name}", json={"body": body}, headers=admin, timeout=30)
        assert response.status_code == 201, response.text
        for _ in range(300):
            if changes:
                break
            time.sleep(0.1)
        assert [change["document"]["body"] for change in changes] == [body]
    finally:
        client.disconnect()
