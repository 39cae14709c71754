"""Serving one process: eventlet's WSGI server with TCP_NODELAY on every accepted connection, and its
request line and headers parsed by :class:`trellis.server.http_protocol.FastHttpProtocol` (not the ``email``
package, the largest part of a get by id's CPU: ``bench/results/core.md#header-parsing``).

Used by ``wsgi.py`` and the test/benchmark server (``trellis.testing.server``), so what is measured is
what runs. Under eventlet the standard library must already be monkey-patched (the entry points do it).

Why TCP_NODELAY: a Socket.IO acknowledgement or event often leaves as two small writes (websocket frame
header and payload, or an event then its ack). With Nagle's algorithm the second write waits for the
client's delayed ACK, ~40 ms on Linux. Measured by ``bench/chat_bench.py --nodelay-rounds``; see
``bench/results/chat_nodelay.md``.

Engine.IO's pings leave from hub timers and its websocket writers run only while they have something to send,
not as two green threads per socket (:mod:`trellis.server.socket_pings`, :mod:`trellis.server.socket_writer`).

Slow and idle clients are bounded by :class:`trellis.server.http_protocol.ConnectionGuard` (its settings:
``TRELLIS_HEADER_TIMEOUT``, ``TRELLIS_IDLE_TIMEOUT``, ``TRELLIS_MAX_CONNECTIONS``). The port is bound
without ``SO_REUSEPORT`` (eventlet's default sets it): a second server on a used port would otherwise
start and the kernel would split the connections between two processes.

Checked against eventlet 0.41.3 (see :mod:`trellis.server`): ``eventlet.listen``'s ``reuse_port`` and the
keyword arguments of ``eventlet.wsgi.server`` passed here (``protocol``, ``custom_pool``, ``log_output`` and
those of :func:`trellis.server.safety.eventlet_server_options`).
"""

from __future__ import annotations

import errno
import gc
import logging
import resource
import socket
import warnings
from typing import TYPE_CHECKING, Any

from flask import Flask

from .. import events
from ..settings import core_value
from .safety import eventlet_server_options

if TYPE_CHECKING:  # eventlet is imported only when serving with it
    from .http_protocol import ConnectionGuard

CHECKED = {"eventlet": "0.41.3"}  # see trellis.server
log = logging.getLogger(__name__)
PORT_IN_USE = "the port is already in use"  # the end of the one line a taken port prints
# Descriptors a process needs besides its clients' connections: database and Redis connections,
# files being uploaded or served, the listener, logs.
SPARE_FILES = 256


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


class GuardedListener:
    """The listening socket as eventlet's accept loop sees it: each new connection first makes room at
    the connection cap (:meth:`ConnectionGuard.make_room`); everything else is the wrapped socket's."""

    def __init__(self, listener: Any, guard: ConnectionGuard) -> None:
        self._listener = listener
        self._guard = guard

    def accept(self) -> tuple[Any, Any]:
        accepted = self._listener.accept()
        self._guard.make_room()
        return accepted

    def __getattr__(self, name: str) -> Any:
        return getattr(self._listener, name)


def connection_guard(config: Any) -> ConnectionGuard:
    """The guard from the app's settings (the benchmarks' bare Flask app has none: the defaults)."""
    from .http_protocol import ConnectionGuard

    return ConnectionGuard(*(core_value(config, key) for key in ("HEADER_TIMEOUT", "IDLE_TIMEOUT", "MAX_CONNECTIONS")))


def ensure_file_limit(connections: int) -> None:
    """Raise the soft limit on open files so that the connection cap is reached first: eventlet's accept
    loop ends the server when an accept fails for want of a descriptor (systemd's soft limit is 1,024)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = connections + SPARE_FILES
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    raised = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
    if raised < needed:
        log.warning(
            "the open-file limit (%d) is below TRELLIS_MAX_CONNECTIONS + %d; raise LimitNOFILE", hard, SPARE_FILES
        )


def listen(host: str, port: int) -> Any:
    """The listening socket, without SO_REUSEPORT; a used port ends the process with one line naming it."""
    import eventlet
    import eventlet.green.socket

    addresses = eventlet.green.socket.getaddrinfo(host, port)
    if not addresses:
        raise RuntimeError(f"Could not resolve {host!r}")
    try:
        return eventlet.listen(addresses[0][4], addresses[0][0], reuse_port=False)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise SystemExit(f"Trellis cannot serve on {host}:{port}: {PORT_IN_USE}") from None
        raise


def nodelay_enabled(config: Any = None) -> bool:
    """``TRELLIS_TCP_NODELAY=0`` turns it off (only to measure the difference)."""
    return core_value(config or {}, "TCP_NODELAY")


def start_background(app: Flask) -> None:
    """Start every module's background work (``Module.background``) in this serving process."""
    for module in app.extensions["trellis"].modules:
        for start in module.background:
            start(app)


def freeze_start_up_heap() -> None:
    """Leave what start-up made (modules, the app, schemas, SQLAlchemy's metadata) out of the garbage
    collector's full passes. Each full pass walked all of them, during which an eventlet process answers
    nothing and delivers nothing; live delivery's p99 was of that size (``bench/results/core.md#frozen-heap``).
    Collected first, so no garbage is frozen with them; they live as long as the process anyway."""
    gc.collect()
    gc.freeze()


def serve(app: Flask, host: str, port: int, log_output: bool = False, banner: str | None = None) -> None:
    """Serve REST and Socket.IO on ``host:port`` until the process is stopped (modules' background
    work included: it runs in serving processes only, never in the CLI). ``banner`` is printed once the
    port is bound."""
    socketio = app.extensions["socketio"]
    eventlet_mode = socketio.server.eio.async_mode == "eventlet"
    listener = listen(host, port) if eventlet_mode else None  # before any work starts: the port may be taken
    if banner:
        print(banner, flush=True)
    if "trellis" in app.extensions:  # a Trellis app (the benchmarks also serve a bare Flask app here)
        events.start(app)  # the start-up pass numbers what a stopped process left unnumbered
        start_background(app)
    freeze_start_up_heap()
    if listener is None:
        socketio.run(app, host=host, port=port, log_output=log_output, allow_unsafe_werkzeug=True)
        return
    import eventlet.wsgi

    from .socket_pings import install_ping_timers
    from .socket_writer import install_on_demand_writers

    install_ping_timers(socketio.server)
    install_on_demand_writers(socketio.server)
    guard = connection_guard(app.config)
    ensure_file_limit(guard.max_connections)
    guard.start()
    # eventlet warns that it will not re-case header names: that is turned off on purpose (see
    # eventlet_server_options), and a warning on every start would teach operators to ignore warnings.
    warnings.filterwarnings("ignore", "capitalize_response_headers is disabled", DeprecationWarning)
    eventlet.wsgi.server(
        GuardedListener(NoDelayListener(listener) if nodelay_enabled(app.config) else listener, guard),
        app,
        log_output=log_output,
        protocol=guard.protocol(),
        custom_pool=guard.pool,
        **eventlet_server_options(),
    )
