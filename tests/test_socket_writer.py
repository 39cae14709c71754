"""Engine.IO's websocket writer on demand (``trellis.server.socket_writer``): no green thread while a socket is
idle; packets from anywhere leave in order, large ones too; the socket still ends on a server disconnect, on
a client that leaves, and after a silence of ``ping_interval + ping_timeout`` with nothing queued."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from .green_server import wait_for
from .socketio_green import PING_INTERVAL, PING_TIMEOUT, open_engineio, served_socketio

pytestmark = pytest.mark.filterwarnings(r"ignore:\s*Eventlet is deprecated")


@pytest.fixture()
def served():
    with served_socketio() as (server, port):
        yield server, port


def writer_of(server: Any, sid: str) -> Any:
    return server.eio.sockets[sid].queue.woken.__self__


def test_an_idle_socket_has_no_writer_thread(served, monkeypatch):
    from engineio.async_drivers import eventlet as driver

    server, port = served
    started_tasks: list[str] = []
    spawn = driver.spawn

    def recorded_spawn(target: Any, *args: Any, **kwargs: Any) -> Any:
        started_tasks.append(getattr(target, "__name__", repr(target)))
        return spawn(target, *args, **kwargs)

    monkeypatch.setattr(driver, "spawn", recorded_spawn)
    ws, sid = open_engineio(port)
    writer = writer_of(server, sid)
    wait_for(lambda: writer.thread is None)
    assert "writer" not in started_tasks
    assert ws.wait() == "2"  # the ping went out through a short-lived writer
    ws.send("3")
    wait_for(lambda: writer.thread is None)
    ws.close()


def test_packets_from_other_green_threads_leave_in_order_large_ones_included(served):
    import eventlet

    server, port = served
    ws, sid = open_engineio(port)
    big = "x" * 1_000_000
    expected = [f"4{n}" if n % 50 else "4" + big + str(n) for n in range(300)]

    def emit(first: int) -> None:
        for n in range(first, first + 100):
            server.eio.send(sid, expected[n][1:])
            if n % 7 == 0:
                eventlet.sleep(0)  # let the writer run between some of them

    for first in (0, 100, 200):
        eventlet.spawn(emit, first).wait()
    received = []
    while len(received) < len(expected):
        message = ws.wait()
        if message == "2":
            ws.send("3")
            continue
        received.append(message)
    assert received == expected
    ws.close()


def test_a_server_disconnect_closes_the_websocket(served):
    server, port = served
    ws, sid = open_engineio(port)
    writer = writer_of(server, sid)
    server.eio.disconnect(sid)
    messages = []
    while (message := ws.wait()) is not None:
        messages.append(message)
    assert messages[-1:] == ["1"]  # CLOSE, then the end of the connection
    wait_for(lambda: writer.done and writer.thread is None and sid not in server.eio.sockets)


def test_a_client_that_leaves_ends_its_socket(served):
    server, port = served
    polite, polite_sid = open_engineio(port)
    abrupt, abrupt_sid = open_engineio(port)
    writers = [writer_of(server, polite_sid), writer_of(server, abrupt_sid)]
    polite.close()
    abrupt.socket.close()
    wait_for(lambda: not server.eio.sockets and all(w.done and w.thread is None for w in writers))


def test_a_socket_with_nothing_queued_for_the_ping_timeout_is_closed_without_the_monitor():
    """The library's writer closes a websocket after ``ping_interval + ping_timeout`` with nothing to send.
    The client here keeps its reader busy (NOOP packets, which the server ignores) but answers no ping, and
    the service task that checks ping timeouts is off: only that silence can end it."""
    import eventlet

    with served_socketio(monitor_clients=False) as (server, port):
        ws, sid = open_engineio(port)

        def keep_sending() -> None:
            while not ws.websocket_closed:
                ws.send("6")
                eventlet.sleep(0.05)

        eventlet.spawn(keep_sending)
        assert ws.wait() == "2"  # not answered: no further ping is scheduled, nothing else is queued
        started = time.monotonic()
        with eventlet.Timeout(5):
            assert ws.wait() is None
        elapsed = time.monotonic() - started
        assert PING_INTERVAL + PING_TIMEOUT - 0.1 <= elapsed < PING_INTERVAL + PING_TIMEOUT + 1.5
        wait_for(lambda: sid not in server.eio.sockets)


def test_binary_and_text_packets_keep_their_kind(served):
    server, port = served
    ws, sid = open_engineio(port)
    payload = os.urandom(70_000)
    server.eio.send(sid, payload)
    server.eio.send(sid, "text")
    assert ws.wait() == payload and ws.wait() == "4text"
    ws.close()
