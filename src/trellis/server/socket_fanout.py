"""Socket.IO emits to a room: one websocket frame per emit, written straight to each idle socket.

python-socketio already encodes an emit without acknowledgement once, but then hands the packet to each
recipient's Engine.IO queue; a writer green thread per socket wakes (a hub timer, a switch, a 45 s
``Timeout`` made and cancelled), frames the text and sends it: that hand-off was about half of a chat
message's server CPU (``bench/results/core.md#socketio-fan-out``).

Here the frame is built once per emit and, for each recipient whose socket is idle (websocket transport,
nothing queued, no frame being written), sent at once with one non-blocking ``send``. A socket that is
busy, not a websocket, or behind TLS in this process goes through its queue as before, so its order is
kept: a direct write happens only when nothing sent earlier is still waiting. A frame the kernel takes
only in part is finished by a green thread holding the socket's send lock, which the writer also takes.
Emits with an acknowledgement callback (a packet per recipient) keep python-socketio's path.

Live data sends a packet per subscriber (each names its subscription): :func:`send_encoded` takes the
packet's text made by the caller (the shared part encoded once per event), and inside
:func:`gathered_writes` (the delivery of a batch of events) each socket's packets go out as one write.

Works under eventlet (the production server); other async modes keep the library's path.

Checked against python-engineio 4.15.1, python-socketio 5.18.1 and eventlet 0.41.3 (see
:mod:`trellis.server`): Engine.IO's driver table ``Server._async`` and its ``websocket`` class, built with
``(handler, server)`` where ``handler`` is a bound method of the Engine.IO socket; the socket's ``closed``,
``closing``, ``upgrading``, ``upgraded``, ``queue`` and ``check_ping_timeout``; python-socketio's
``Manager.emit`` signature, ``get_participants``, ``Server._send_eio_packet`` and ``packet_class``; eventlet's
``RFC6455WebSocket`` (``_sendlock`` taken by every send, a ``Semaphore`` whose ``balance`` counts its waiters, ``websocket_closed``, ``extensions``,
``_negotiate_permessage_deflate``, unmasked frames the same bytes as :func:`websocket_frame`).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import socketio as python_socketio
from engineio import packet as eio_packet
from greenlet import getcurrent
from socketio import packet as sio_packet

CHECKED = {"python-engineio": "4.15.1", "python-socketio": "5.18.1", "eventlet": "0.41.3"}  # see trellis.server
# The attribute under which each Engine.IO socket keeps its websocket connection.
CONNECTION_ATTRIBUTE = "trellis_websocket"
# eventlet's green socket class (set by ``install_websocket``): a connection of exactly this type is plain
# TCP, whose descriptor underneath takes a non-blocking ``send`` (TLS sockets are of other classes).
_plain_socket: type[Any] | None = None
log = logging.getLogger(__name__)


def websocket_frame(message: str | bytes) -> bytes:
    """One final, unmasked RFC 6455 frame (text for ``str``, binary for ``bytes``): what a server sends."""
    if isinstance(message, str):
        payload, opcode = message.encode(), 0x81
    else:
        payload, opcode = bytes(message), 0x82
    length = len(payload)
    if length < 126:
        header = struct.pack("!BB", opcode, length)
    elif length < 65536:
        header = struct.pack("!BBH", opcode, 126, length)
    else:
        header = struct.pack("!BBQ", opcode, 127, length)
    return header + payload


def websocket_class(base: type) -> type:
    """Engine.IO's websocket wrapper for eventlet, recording each connection on its Engine.IO socket and
    declining permessage-deflate.

    Without compression the frame for an emit is the same bytes for every recipient. It is also the
    default of the Socket.IO reference server (engine.io 4: ``perMessageDeflate: false``): a deflate
    context per socket costs about 256 kB (zlib's defaults) and a compression per recipient, for messages of a few hundred
    bytes.
    """

    class RecordingWebSocket(base):
        def __init__(self, handler: Any, server: Any) -> None:
            owner = getattr(handler, "__self__", None)  # the Engine.IO socket whose handler this is

            def handle(connection: Any) -> Any:
                if owner is not None:
                    setattr(owner, CONNECTION_ATTRIBUTE, connection)
                return handler(connection)

            super().__init__(handle, server)

        def _negotiate_permessage_deflate(self, extensions: Any) -> None:
            return None

    return RecordingWebSocket


def install_websocket(server: python_socketio.Server) -> None:
    """Use the recording websocket class in this server (eventlet only; its own copy of the driver table)."""
    global _plain_socket
    eio = server.eio
    if eio.async_mode != "eventlet":
        return
    from eventlet.greenio import GreenSocket

    _plain_socket = GreenSocket
    eio._async = {**eio._async, "websocket": websocket_class(eio._async["websocket"])}


def _finish(eio_socket: Any, connection: Any, rest: bytes) -> None:
    """The rest of a frame the kernel took only in part; the send lock is held until it is out."""
    try:
        connection.socket.sendall(rest)
    except OSError:  # the peer is gone: the reader notices and closes the socket
        eio_socket.server.logger.info("%s: websocket write failed", eio_socket.sid)
    finally:
        connection._sendlock.release()


def write_now(eio_socket: Any, frame: bytes) -> bool:
    """Send ``frame`` on an idle websocket without waiting; False when the socket must use its queue."""
    connection = getattr(eio_socket, CONNECTION_ATTRIBUTE, None)
    if (
        connection is None
        or eio_socket.closed
        or eio_socket.closing
        or eio_socket.upgrading
        or not eio_socket.upgraded
        or connection.websocket_closed
        or connection.extensions
        or eio_socket.queue.qsize()  # something sent earlier waits: this frame goes after it
        # A frame is being written, or a writer waits for its turn with a frame in hand: a release schedules
        # the waiter's acquire but unlocks at once, so ``locked()`` alone let a frame overtake it (seen as a
        # chat test whose two sockets got two messages in opposite orders, about 1 run in 11 under load).
        or connection._sendlock.balance < 1
    ):
        return False
    if type(connection.socket) is not _plain_socket:  # TLS terminated in this process: partial writes differ
        return False
    raw = connection.socket.fd
    if not eio_socket.check_ping_timeout():  # a client gone silent: closed, nothing sent (as Socket.send)
        return True
    try:
        sent = raw.send(frame)  # eventlet keeps the descriptor non-blocking
    except BlockingIOError:
        sent = 0
    except OSError:
        return False  # the queue path meets the same error and closes the socket as usual
    if sent < len(frame):
        connection._sendlock.acquire()  # free, no waiter (checked above, nothing yielded since): never waits
        eio_socket.server.start_background_task(_finish, eio_socket, connection, frame[sent:])
    return True


class FanOutManager(python_socketio.Manager):
    """python-socketio's in-memory client manager with the one-frame fan-out (see the module docstring).

    Mixed in before ``Manager`` (``class Queue(RedisManager, FanOutManager)``), the pub/sub managers
    deliver their local share of every emit through it too.
    """

    def emit(
        self,
        event: str,
        data: Any,
        namespace: str,
        room: Any = None,
        skip_sid: Any = None,
        callback: Any = None,
        to: Any = None,
        **kwargs: Any,
    ) -> None:
        room = to or room
        if callback or namespace not in self.rooms:
            return super().emit(event, data, namespace, room=room, skip_sid=skip_sid, callback=callback, **kwargs)
        if isinstance(data, tuple):
            arguments = list(data)
        elif data is not None:
            arguments = [data]
        else:
            arguments = []
        skipped = skip_sid if isinstance(skip_sid, list) else [skip_sid]
        encoded = self.server.packet_class(sio_packet.EVENT, namespace=namespace, data=[event, *arguments]).encode()
        packets = [eio_packet.Packet(eio_packet.MESSAGE, part) for part in _as_list(encoded)]
        frame = b"".join(websocket_frame(p.encode()) for p in packets)
        for sid, eio_sid in self.get_participants(namespace, room):
            if sid not in skipped:
                _write(self.server, eio_sid, frame, packets)


def _write(server: Any, eio_sid: str, frame: bytes, packets: list[Any]) -> None:
    """Engine.IO ``packets`` to one socket: ``frame`` (their frames) in one write when it is idle, else its queue."""
    eio_socket = server.eio.sockets.get(eio_sid)
    if eio_socket is not None and write_now(eio_socket, frame):
        return
    for p in packets:
        server._send_eio_packet(eio_sid, p)


def _write_texts(server: Any, eio_sid: str, texts: list[str]) -> None:
    """Socket.IO packets encoded already, as Engine.IO messages (``4`` + text) to one socket; the packet
    objects are made only for its queue."""
    frame = b"".join(websocket_frame(_MESSAGE + text) for text in texts)
    eio_socket = server.eio.sockets.get(eio_sid)
    if eio_socket is not None and write_now(eio_socket, frame):
        return
    for text in texts:
        server._send_eio_packet(eio_sid, eio_packet.Packet(eio_packet.MESSAGE, text))


def _as_list(encoded: str | bytes | list[Any]) -> Iterable[Any]:
    return encoded if isinstance(encoded, list) else [encoded]


# ---- packets encoded by the caller, gathered per socket -----------------------------------------------

_MESSAGE = str(eio_packet.MESSAGE)  # an Engine.IO message: this digit, then the Socket.IO packet
# What each green thread (or thread: each has its own greenlet) gathers. Keyed by ``getcurrent()``, not a
# ``threading.local``: under eventlet that is ``corolocal.local``, dear on every read (same section as the
# module's docstring).
_gathering: dict[Any, dict[str, tuple[Any, list[str]]]] = {}


@contextmanager
def gathered_writes() -> Iterator[None]:
    """Hold what :func:`send_encoded` sends inside the block; at its end write each socket's packets as one
    write (their frames joined), in the order they were sent. A delivery of several events then costs one
    ``send`` per socket, and its client reads them with one ``recv``. Nested blocks write at the outer end."""
    me = getcurrent()
    if me in _gathering:
        yield
        return
    sockets: dict[str, tuple[Any, list[str]]] = {}
    _gathering[me] = sockets
    try:
        yield
    finally:
        del _gathering[me]
        for eio_sid, (server, texts) in sockets.items():
            try:
                _write_texts(server, eio_sid, texts)
            except Exception:  # a socket closing under its write (its handlers run inline) spares the rest
                log.exception("a gathered socket write failed")


def send_event(server: python_socketio.Server, namespace: str, sid: str, name: str, data: Any) -> None:
    """``emit(name, data, to=sid, ignore_queue=True)`` of JSON ``data`` (no binary) through :func:`send_encoded`:
    gathered in order with the packets of an open :func:`gathered_writes` block rather than written ahead."""
    send_encoded(
        server, namespace, sid, server.packet_class(sio_packet.EVENT, namespace=namespace, data=[name, data]).encode()
    )


def send_encoded(server: python_socketio.Server, namespace: str, sid: str, text: str) -> None:
    """Send one Socket.IO packet encoded already (the text of ``packet_class(EVENT, namespace, data).encode()``:
    no binary data, no acknowledgement) to the socket ``sid`` of ``namespace`` in this process, as an emit
    with ``ignore_queue`` does; held until the end of an open :func:`gathered_writes` block. A socket gone
    meanwhile is skipped."""
    eio_sid = server.manager.eio_sid_from_sid(sid, namespace)
    if eio_sid is None:
        return
    gathering = _gathering.get(getcurrent())
    if gathering is not None:
        gathering.setdefault(eio_sid, (server, []))[1].append(text)
        return
    _write_texts(server, eio_sid, [text])
