"""A Socket.IO server with short ping settings, served in this process as ``trellis.server.serve`` sets it up
under eventlet (pings from hub timers, writers on demand), and an Engine.IO client for it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .green_server import green_server, open_websocket

PING_INTERVAL = 0.2
PING_TIMEOUT = 0.3


def socketio_server(**options: Any) -> Any:
    import socketio

    from trellis.server.socket_pings import install_ping_timers
    from trellis.server.socket_writer import install_on_demand_writers

    server = socketio.Server(async_mode="eventlet", ping_interval=PING_INTERVAL, ping_timeout=PING_TIMEOUT, **options)
    install_ping_timers(server)
    install_on_demand_writers(server)
    return server


@contextmanager
def served_socketio(**options: Any) -> Iterator[tuple[Any, int]]:
    import socketio

    server = socketio_server(**options)
    with green_server(socketio.WSGIApp(server)) as (port, _):
        try:
            yield server, port
        finally:
            if server.eio.service_task_event is not None:
                server.eio.service_task_event.set()


def open_engineio(port: int) -> tuple[Any, str]:
    """A websocket client past Engine.IO's open packet, and its Engine.IO session id."""
    ws = open_websocket(port, "/socket.io/?EIO=4&transport=websocket")
    opened = ws.wait()
    assert opened.startswith("0") and json.loads(opened[1:])["pingTimeout"] == int(PING_TIMEOUT * 1000)
    return ws, json.loads(opened[1:])["sid"]
