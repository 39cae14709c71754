"""Engine.IO's pings from hub timers (``trellis.server.socket_pings``): sent on time, again after each PONG,
never to a closed socket, and a client that stops answering is still disconnected."""

from __future__ import annotations

import time
from typing import Any

import pytest

from .socketio_green import PING_INTERVAL, PING_TIMEOUT, open_engineio, served_socketio, socketio_server

pytestmark = pytest.mark.filterwarnings(r"ignore:\s*Eventlet is deprecated")


@pytest.fixture()
def served():
    with served_socketio() as (server, port):
        yield server, port


def test_a_socket_is_pinged_on_time_and_again_after_each_pong_without_a_green_thread(served, monkeypatch):
    from engineio.async_drivers import eventlet as driver

    server, port = served
    started_tasks: list[str] = []
    spawn = driver.spawn

    def recorded_spawn(target: Any, *args: Any, **kwargs: Any) -> Any:  # what engineio's background tasks use
        started_tasks.append(getattr(target, "__name__", repr(target)))
        return spawn(target, *args, **kwargs)

    monkeypatch.setattr(driver, "spawn", recorded_spawn)
    ws, _ = open_engineio(port)
    for _ in range(3):
        started = time.monotonic()
        assert ws.wait() == "2"
        assert PING_INTERVAL * 0.8 <= time.monotonic() - started < PING_INTERVAL + 2  # late only on a busy machine
        ws.send("3")
    assert "_send_ping" not in started_tasks
    assert len(server.eio.sockets) == 1
    ws.close()


def test_a_client_that_stops_answering_pings_is_disconnected(served):
    import eventlet

    server, port = served
    ws, _ = open_engineio(port)
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

    server = socketio_server()
    eio_socket = engineio.socket.Socket(server.eio, "sid")
    eio_socket.schedule_ping()
    eio_socket.closed = True
    eventlet.sleep(PING_INTERVAL * 2)
    assert eio_socket.queue.qsize() == 0

    open_socket = engineio.socket.Socket(server.eio, "other")
    open_socket.schedule_ping()
    eventlet.sleep(PING_INTERVAL * 2)
    assert open_socket.queue.get_nowait().packet_type == engineio.packet.PING
    assert open_socket.last_ping is not None
