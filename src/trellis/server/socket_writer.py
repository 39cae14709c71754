"""Engine.IO's websocket writer under eventlet: a green thread only while the socket has packets to send.

python-engineio gives each websocket a writer green thread for its whole life (the ``writer`` inside
``Socket._websocket_handler``): it waits on the socket's queue, sends what arrives, and closes the websocket
when it takes the ``None`` that ends the socket, when a send fails, or when nothing at all was queued for
``ping_interval + ping_timeout`` seconds. An idle subscriber's writer waits nearly all the time, with its saved
C stack and its own stack of Python frames (``bench/results/access_live.md``).

:class:`OnDemandWriter` takes the writer's place: the socket's queue (:class:`WakingQueue`) wakes it when a
packet is put, a green thread sends what is queued, in order, and ends once the queue is empty. The rest is
kept: one packet after another with the queue's ``task_done`` as they are taken, the websocket closed after
a ``None`` or a failed send, a timer closing it (by queueing ``None``) when nothing was queued for
``ping_interval + ping_timeout`` seconds since the queue was last emptied (the library's wait for a packet), and ``join`` waiting for the last sends. Between taking a packet and
sending it nothing yields, as in the library's writer, so ``trellis.server.socket_fanout`` still sees either
a non-empty queue or a held send lock while a packet is on its way.

Checked against python-engineio 4.15.1 (see :mod:`trellis.server`): ``Socket._websocket_handler`` starts its
``writer`` (free variables ``self`` and ``ws``) with ``server.start_background_task`` and, once the client is
gone, puts ``None`` in the queue and calls ``join`` on what that returned; ``Socket.poll`` takes packets with
``queue.get`` and ``task_done`` until ``None``; the server makes each socket's queue with
``_async['queue']`` (eventlet's ``Queue``) and ``queue_empty`` is what ``get`` raises when empty.
"""

from __future__ import annotations

import logging
from typing import Any

import eventlet
import eventlet.hubs
from eventlet import queue as eventlet_queue

CHECKED = {"python-engineio": "4.15.1"}  # see trellis.server
log = logging.getLogger(__name__)
WRITER = "Socket._websocket_handler.<locals>.writer"  # the qualified name of the library's writer


class WakingQueue(eventlet_queue.Queue):
    """eventlet's queue, calling ``woken`` (when set) after each ``put``."""

    woken: Any = None

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        super().put(item, block, timeout)
        if self.woken is not None:
            self.woken()


class OnDemandWriter:
    """Sends one Engine.IO socket's queued packets on its websocket, from a green thread that lives only while
    there is something to send (see the module docstring)."""

    __slots__ = ("socket", "ws", "thread", "done", "silence")

    def __init__(self, eio_socket: Any, ws: Any) -> None:
        self.socket, self.ws = eio_socket, ws
        self.thread: Any = None
        self.done = False
        self.silence: Any = None
        eio_socket.queue.woken = self.wake
        if eio_socket.queue.qsize():
            self.wake()
        else:
            self.expect()

    def wake(self) -> None:
        """A packet was queued: the silence is over (as the library's wait ends), and a thread sends it."""
        if self.silence is not None:
            self.silence.cancel()
            self.silence = None
        if self.thread is None and not self.done:
            self.thread = eventlet.spawn(self.drain)

    def expect(self) -> None:
        """Start the wait after which a socket with nothing queued is closed, as the library's writer."""
        server = self.socket.server
        self.silence = eventlet.hubs.get_hub().schedule_call_global(
            server.ping_interval + server.ping_timeout, self.socket.queue.put, None
        )

    def drain(self) -> None:
        try:
            if self.send_queued():
                self.expect()
            else:
                self.finish()
        except Exception:
            log.exception("%s: the websocket writer failed", self.socket.sid)
        finally:
            self.thread = None

    def send_queued(self) -> bool:
        """Send what is queued, in order; False once the websocket is to be closed (``None``, a failed send)."""
        queue, empty = self.socket.queue, self.socket.server.get_queue_empty_exception()
        while True:
            try:
                packet = queue.get(block=False)
            except empty:
                return True
            queue.task_done()
            if packet is None:
                return False
            try:
                self.ws.send(packet.encode())
            except Exception:  # as the library's writer: a failed send ends the socket's writing
                return False

    def finish(self) -> None:
        self.done = True
        self.socket.queue.woken = None
        if self.silence is not None:
            self.silence.cancel()
        self.ws.close()

    def join(self) -> None:
        """Wait for the sends under way (the library joins its writer once the client is gone)."""
        thread = self.thread
        if thread is not None:
            thread.wait()


def install_on_demand_writers(server: Any) -> None:
    """Give this Socket.IO server's websockets an :class:`OnDemandWriter` (eventlet only)."""
    eio = server.eio
    if eio.async_mode != "eventlet":
        return
    eio._async = {**eio._async, "queue": WakingQueue}
    start = eio.start_background_task

    def start_background_task(target: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(target, "__qualname__", None) == WRITER and not args and not kwargs:
            free = dict(zip(target.__code__.co_freevars, (cell.cell_contents for cell in target.__closure__)))
            return OnDemandWriter(free["self"], free["ws"])
        return start(target, *args, **kwargs)

    eio.start_background_task = start_background_task
