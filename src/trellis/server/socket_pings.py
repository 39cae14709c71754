"""Engine.IO's pings under eventlet: a hub timer per socket instead of a sleeping green thread.

python-engineio schedules each ping by starting a background task that sleeps for the ping interval and then
sends PING (``Socket.schedule_ping`` → ``Server.start_background_task(Socket._send_ping)``, again after each
PONG): one green thread per connected socket, asleep nearly all its life, each with its saved C stack and its
own stack of Python frames (``bench/results/access_live.md``). Here that task is a timer in eventlet's hub
that calls :func:`ping` once the interval is over: the same moment, the same packet, the same checks.

A timer's callback runs in the hub, where nothing may block: :func:`ping` only puts the packet in the
socket's queue (unbounded, so ``put`` never waits), from which the socket's writer sends it, as before. It
does not go through ``Socket.send``, whose ping-timeout check could close the socket and run the app's
disconnect handlers there; right after ``last_ping`` is set that check cannot fail anyway.

Checked against python-engineio 4.15.1 (see :mod:`trellis.server`): ``Socket.schedule_ping`` passes the bound
``Socket._send_ping`` alone to ``server.start_background_task`` and ignores what it returns; ``_send_ping``
sleeps ``server.ping_interval`` then, unless the socket is ``closing`` or ``closed``, sets ``last_ping`` and
sends ``Packet(PING)``, which ``Socket.send`` puts in ``queue``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from engineio import packet as eio_packet
from engineio import socket as eio_socket_module

CHECKED = {"python-engineio": "4.15.1"}  # see trellis.server
log = logging.getLogger(__name__)
_SEND_PING = eio_socket_module.Socket._send_ping


def ping(eio_socket: Any) -> None:
    """What ``Socket._send_ping`` does after its sleep, without blocking (this runs in the hub)."""
    if eio_socket.closing or eio_socket.closed:
        return
    try:
        eio_socket.last_ping = time.time()
        eio_socket.queue.put(eio_packet.Packet(eio_packet.PING))
    except Exception:  # an exception would otherwise end in the hub's own printout
        log.exception("%s: the ping was not sent", eio_socket.sid)


def install_ping_timers(server: Any) -> None:
    """Make this Socket.IO server's Engine.IO sockets ping from hub timers (eventlet only; other tasks as before)."""
    eio = server.eio
    if eio.async_mode != "eventlet":
        return
    import eventlet.hubs

    start = eio.start_background_task

    def start_background_task(target: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(target, "__func__", None) is _SEND_PING and not args and not kwargs:
            owner = target.__self__
            return eventlet.hubs.get_hub().schedule_call_global(owner.server.ping_interval, ping, owner)
        return start(target, *args, **kwargs)

    eio.start_background_task = start_background_task
