"""A connection upgraded to a websocket gives back its HTTP buffers (``trellis.server.upgraded``), and stays a
working websocket: large frames both ways, a client that leaves ends it cleanly. Plain HTTP keeps its buffers.

eventlet's server with Trellis's protocol runs in this process (green sockets, no monkey-patching), so the
test can look at the protocol objects themselves; the Socket.IO suites run the same code on real servers.
"""

from __future__ import annotations

import base64
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

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
    import eventlet
    import eventlet.wsgi

    from trellis.server.http_protocol import ConnectionGuard
    from trellis.server.safety import eventlet_server_options

    app = Recorder()
    listener = eventlet.listen(("127.0.0.1", 0))
    guard = ConnectionGuard(10, 10, 16)
    thread = eventlet.spawn(
        eventlet.wsgi.server,
        listener,
        app,
        protocol=guard.protocol(),
        custom_pool=guard.pool,
        log_output=False,
        **eventlet_server_options(),
    )
    yield app, listener.getsockname()[1], guard
    thread.kill()
    listener.close()


def open_websocket(port: int) -> Any:
    """A client websocket (eventlet's own, in client mode: masked frames) after a real handshake."""
    from eventlet.green import socket
    from eventlet.websocket import RFC6455WebSocket

    sock = socket.create_connection(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        f"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {key}\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)  # byte by byte: the first frame must stay in the socket
    assert head.startswith(b"HTTP/1.1 101"), head
    return RFC6455WebSocket(sock, {}, version=13, client=True)


def wait_for(condition: Any) -> None:
    import eventlet

    for _ in range(500):
        if condition():
            return
        eventlet.sleep(0.01)
    raise AssertionError("not reached in 5 s")


def test_an_upgraded_connection_holds_no_http_buffer_and_carries_large_frames(server):
    app, port, _ = server
    ws = open_websocket(port)
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
    polite, abrupt = open_websocket(port), open_websocket(port)
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
