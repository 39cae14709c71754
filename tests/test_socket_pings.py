"""Engine.IO's pings from hub timers (``trellis.server.socket_pings``): sent on time, again after each PONG,
never to a closed socket, and a client that stops answering is still disconnected.

A Socket.IO server with short ping settings runs in this process on eventlet's server with Trellis's
protocol (green sockets, no monkey-patching); the client is a plain websocket speaking Engine.IO.
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytestmark = pytest.mark.filterwarnings(r"ignore:\s*Eventlet is deprecated")

PING_INTERVAL = 0.2
PING_TIMEOUT = 0.3


def sio_server() -> Any:
    import socketio

    from trellis.server.socket_pings import install_ping_timers

    server = socketio.Server(async_mode="eventlet", ping_interval=PING_INTERVAL, ping_timeout=PING_TIMEOUT)
    install_ping_timers(server)
    return server


@pytest.fixture()
def served() -> Iterator[tuple[Any, int]]:
    import eventlet
    import eventlet.wsgi
    import socketio

    from trellis.server.http_protocol import ConnectionGuard
    from trellis.server.safety import eventlet_server_options

    server = sio_server()
    listener = eventlet.listen(("127.0.0.1", 0))
    guard = ConnectionGuard(10, 10, 16)
    thread = eventlet.spawn(
        eventlet.wsgi.server,
        listener,
        socketio.WSGIApp(server),
        protocol=guard.protocol(),
        custom_pool=guard.pool,
        log_output=False,
        **eventlet_server_options(),
    )
    yield server, listener.getsockname()[1]
    server.eio.service_task_event and server.eio.service_task_event.set()
    thread.kill()
    listener.close()


def open_engineio(port: int) -> Any:
    """A websocket client past Engine.IO's open packet."""
    from eventlet.green import socket
    from eventlet.websocket import RFC6455WebSocket

    sock = socket.create_connection(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        "GET /socket.io/?EIO=4&transport=websocket HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {key}\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    ws = RFC6455WebSocket(sock, {}, version=13, client=True)
    opened = ws.wait()
    assert opened.startswith("0") and json.loads(opened[1:])["pingTimeout"] == int(PING_TIMEOUT * 1000)
    return ws


def test_a_socket_is_pinged_on_time_and_again_after_each_pong_without_a_green_thread(served, monkeypatch):
    from engineio.async_drivers import eventlet as driver

    server, port = served
    started_tasks: list[str] = []
    spawn = driver.spawn

    def recorded_spawn(target: Any, *args: Any, **kwargs: Any) -> Any:  # what engineio's background tasks use
        started_tasks.append(getattr(target, "__name__", repr(target)))
        return spawn(target, *args, **kwargs)

    monkeypatch.setattr(driver, "spawn", recorded_spawn)
    ws = open_engineio(port)
    for _ in range(3):
        started = time.monotonic()
        assert ws.wait() == "2"
        assert PING_INTERVAL * 0.8 <= time.monotonic() - started < PING_INTERVAL * 4
        ws.send("3")
    assert "writer" in started_tasks and "_send_ping" not in started_tasks
    assert len(server.eio.sockets) == 1
    ws.close()


def test_a_client_that_stops_answering_pings_is_disconnected(served):
    import eventlet

    server, port = served
    ws = open_engineio(port)
    assert ws.wait() == "2"  # not answered
    started = time.monotonic()
    while (message := ws.wait()) is not None:  # engineio closes the socket: a CLOSE packet, then the end
        assert message in ("1", "2"), message
    assert time.monotonic() - started < PING_INTERVAL + PING_TIMEOUT + 2
    for _ in range(100):
        if not server.eio.sockets:
            break
        eventlet.sleep(0.02)
    assert not server.eio.sockets


def test_no_ping_reaches_a_socket_closed_before_its_time():
    import engineio.socket
    import eventlet

    server = sio_server()
    eio_socket = engineio.socket.Socket(server.eio, "sid")
    eio_socket.schedule_ping()
    eio_socket.closed = True
    eventlet.sleep(PING_INTERVAL * 2)
    assert eio_socket.queue.qsize() == 0

    open_socket = engineio.socket.Socket(server.eio, "other")
    open_socket.schedule_ping()
    eventlet.sleep(PING_INTERVAL * 2)
    assert [packet.packet_type for packet in [open_socket.queue.get_nowait()]] == [engineio.packet.PING]
    assert open_socket.last_ping is not None
