"""eventlet's server with Trellis's protocol inside the test process (green sockets, no monkey-patching), and a
websocket client for it: for tests that look at the server's own objects while real connections use it."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def green_server(app: Any) -> Iterator[tuple[int, Any]]:
    """Serve the WSGI ``app`` on a free port as ``trellis.server.serve`` does; yields (port, connection guard)."""
    import eventlet
    import eventlet.wsgi

    from trellis.server.http_protocol import ConnectionGuard
    from trellis.server.safety import eventlet_server_options

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
    try:
        yield listener.getsockname()[1], guard
    finally:
        thread.kill()
        listener.close()


def open_websocket(port: int, path: str) -> Any:
    """A client websocket (eventlet's own, in client mode: masked frames) after a real handshake."""
    from eventlet.green import socket
    from eventlet.websocket import RFC6455WebSocket

    sock = socket.create_connection(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {key}\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)  # byte by byte: the first frame must stay in the socket
    assert head.startswith(b"HTTP/1.1 101"), head
    return RFC6455WebSocket(sock, {}, version=13, client=True)


def wait_for(condition: Any, seconds: float = 5) -> None:
    import eventlet

    for _ in range(int(seconds * 100)):
        if condition():
            return
        eventlet.sleep(0.01)
    raise AssertionError(f"not reached in {seconds} s")
