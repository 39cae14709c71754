"""Serving one process: eventlet's WSGI server with TCP_NODELAY on every accepted connection, and its
request line and headers parsed by :class:`trellis.http_protocol.FastHttpProtocol` (not the ``email``
package: ~38% of a get by id's CPU).

Used by ``wsgi.py`` and the test/benchmark server (``trellis.testing.server``), so what is measured is
what runs. Under eventlet the standard library must already be monkey-patched (the entry points do it).

Why TCP_NODELAY: a Socket.IO acknowledgement or event often leaves as two small writes (websocket frame
header and payload, or an event then its ack). With Nagle's algorithm the second write waits for the
client's delayed ACK, ~40 ms on Linux. Measured by ``bench/chat_bench.py --nodelay-rounds``; see
``bench/results/chat_nodelay.md``.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from flask import Flask

from . import events
from .safety import eventlet_server_options


class NoDelayListener:
    """A listening socket whose accepted connections have TCP_NODELAY set (everything else delegated)."""

    def __init__(self, listener: Any) -> None:
        self._listener = listener

    def accept(self) -> tuple[Any, Any]:
        connection, address = self._listener.accept()
        try:
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:  # not TCP (a Unix socket) or already closed by the peer: nothing to tune
            pass
        return connection, address

    def __getattr__(self, name: str) -> Any:
        return getattr(self._listener, name)


def nodelay_enabled() -> bool:
    """``TRELLIS_TCP_NODELAY=0`` turns it off (only to measure the difference)."""
    return os.environ.get("TRELLIS_TCP_NODELAY", "1").strip().lower() not in ("0", "false", "no", "off")


def start_background(app: Flask) -> None:
    """Start every module's background work (``Module.background``) in this serving process."""
    for module in app.extensions["trellis"].modules:
        for start in module.background:
            start(app)


def serve(app: Flask, host: str, port: int, log_output: bool = False) -> None:
    """Serve REST and Socket.IO on ``host:port`` until the process is stopped (modules' background
    work included: it runs in serving processes only, never in the CLI)."""
    socketio = app.extensions["socketio"]
    if "trellis" in app.extensions:  # a Trellis app (the benchmarks also serve a bare Flask app here)
        events.start(app)  # the start-up pass numbers what a stopped process left unnumbered
        start_background(app)
    if socketio.server.eio.async_mode != "eventlet":
        socketio.run(app, host=host, port=port, log_output=log_output, allow_unsafe_werkzeug=True)
        return
    import eventlet
    import eventlet.green.socket
    import eventlet.wsgi

    addresses = eventlet.green.socket.getaddrinfo(host, port)
    if not addresses:
        raise RuntimeError(f"Could not resolve {host!r}")
    from .http_protocol import FastHttpProtocol

    listener = eventlet.listen(addresses[0][4], addresses[0][0])
    eventlet.wsgi.server(
        NoDelayListener(listener) if nodelay_enabled() else listener,
        app,
        log_output=log_output,
        protocol=FastHttpProtocol,
        **eventlet_server_options(),
    )
