"""The one-frame fan-out of Socket.IO emits (``trellis.server.socket_fanout``): frames a websocket client parses,
and a server that declines permessage-deflate (the frame is then the same bytes for every socket)."""

from __future__ import annotations

import base64
import os
import socket

import pytest
from wsproto.frame_protocol import FrameProtocol, Opcode

from trellis.server.socket_fanout import websocket_frame

# eventlet announces its deprecation on first import (here, in the test process: the fixture below).
EVENTLET_IMPORT = pytest.mark.filterwarnings(r"ignore:\s*Eventlet is deprecated")


@pytest.mark.parametrize("size", [0, 1, 125, 126, 65535, 65536, 200_000])
def test_frames_parse_in_a_websocket_client(size):
    text = "é" * (size // 2) + "x" * (size % 2)  # two bytes a character: the length is counted in bytes
    for message, opcode in ((text, Opcode.TEXT), (os.urandom(size), Opcode.BINARY)):
        client = FrameProtocol(client=True, extensions=[])
        data = websocket_frame(message)
        client.receive_bytes(data[:3])  # in pieces, as a socket may deliver it
        client.receive_bytes(data[3:])
        frames = list(client.received_frames())
        assert [(f.opcode, f.frame_finished, f.message_finished) for f in frames] == [(opcode, True, True)]
        assert frames[0].payload == message


@pytest.mark.live
def test_permessage_deflate_is_declined(live_server):
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        "GET /realtime/?EIO=4&transport=websocket HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{live_server.port}\r\n"
        "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
        f"Sec-WebSocket-Key: {key}\r\n"
        "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", live_server.port), timeout=10) as conn:
        conn.sendall(request.encode())
        response = b""
        while b"\r\n\r\n" not in response:
            chunk = conn.recv(4096)
            assert chunk, response
            response += chunk
    head = response.split(b"\r\n\r\n", 1)[0].decode().lower()
    assert head.startswith("http/1.1 101")
    assert "sec-websocket-extensions" not in head


@pytest.fixture()
def idle_socket():
    """A real Engine.IO socket of an eventlet server, its websocket on one end of a green socket pair; the
    other end is returned as the client's side. No writer thread runs: whatever is queued stays queued."""
    import engineio
    import socketio
    from eventlet.green import socket as green_socket
    from eventlet.websocket import RFC6455WebSocket

    from trellis.server.socket_fanout import CONNECTION_ATTRIBUTE, install_websocket

    server = socketio.Server(async_mode="eventlet")
    install_websocket(server)
    server_end, client_end = green_socket.socketpair()
    eio_socket = engineio.socket.Socket(server.eio, "sid")
    eio_socket.connected = eio_socket.upgraded = True
    setattr(eio_socket, CONNECTION_ATTRIBUTE, RFC6455WebSocket(server_end, {}, version=13))
    server.eio.sockets["sid"] = eio_socket
    yield eio_socket, client_end, server
    server_end.close()
    client_end.close()


@EVENTLET_IMPORT
def test_a_frame_goes_straight_to_an_idle_socket_only(idle_socket):
    from engineio import packet

    from trellis.server.socket_fanout import CONNECTION_ATTRIBUTE, write_now

    eio_socket, client, _ = idle_socket
    frame = websocket_frame('42["message","hi"]')
    assert write_now(eio_socket, frame)
    assert client.recv(100) == frame

    eio_socket.queue.put(packet.Packet(packet.MESSAGE, "earlier"))  # waits for the writer: must stay first
    assert not write_now(eio_socket, frame)
    eio_socket.queue.get()

    lock = getattr(eio_socket, CONNECTION_ATTRIBUTE)._sendlock
    lock.acquire()  # the writer is in the middle of a frame
    assert not write_now(eio_socket, frame)
    lock.release()
    assert write_now(eio_socket, frame)


@EVENTLET_IMPORT
def test_a_frame_the_kernel_takes_in_part_is_finished_before_the_next(idle_socket):
    import eventlet

    from trellis.server.socket_fanout import CONNECTION_ATTRIBUTE, write_now

    eio_socket, client, _ = idle_socket
    connection = getattr(eio_socket, CONNECTION_ATTRIBUTE)
    big = websocket_frame(os.urandom(4 << 20))  # more than a socket pair's buffers hold
    assert write_now(eio_socket, big)
    assert connection._sendlock.locked()  # the rest is being written: the writer waits for it
    assert not write_now(eio_socket, websocket_frame("next"))
    received = bytearray()
    while len(received) < len(big):
        received += client.recv(1 << 16)
    assert bytes(received) == big
    eventlet.sleep(0)  # the finishing thread releases the lock once the last byte is out
    assert not connection._sendlock.locked()


@EVENTLET_IMPORT
def test_no_frame_overtakes_a_writer_waiting_for_the_send_lock(idle_socket):
    """The writer took a packet from the queue (empty now) and waits for the lock; when the holder releases
    it, the waiter's turn is only scheduled. A frame written straight then would arrive first."""
    import eventlet

    from trellis.server.socket_fanout import CONNECTION_ATTRIBUTE, write_now

    eio_socket, client, _ = idle_socket
    connection = getattr(eio_socket, CONNECTION_ATTRIBUTE)
    connection._sendlock.acquire()  # a frame being finished
    writer = eventlet.spawn(connection.send, "first")
    eventlet.sleep(0)  # the writer waits for the lock
    connection._sendlock.release()
    assert not connection._sendlock.locked()
    assert not write_now(eio_socket, websocket_frame("second"))  # it goes through the queue instead
    writer.wait()
    assert client.recv(100) == websocket_frame("first")
    assert write_now(eio_socket, websocket_frame("second"))
    assert client.recv(100) == websocket_frame("second")


@EVENTLET_IMPORT
def test_packets_gathered_for_a_socket_go_out_in_one_write_in_their_order(idle_socket):
    import socket as plain_socket

    from trellis.server.socket_fanout import gathered_writes, send_encoded

    _, client, server = idle_socket
    sid = server.manager.connect("sid", "/database/")
    texts = [f'2/database/,["change",{{"n":{n}}}]' for n in range(3)]
    client.settimeout(0.2)
    with gathered_writes():
        for text in texts[:2]:
            send_encoded(server, "/database/", sid, text)
        with gathered_writes():  # nested: written with the outer block
            send_encoded(server, "/database/", sid, texts[2])
        with pytest.raises(plain_socket.timeout):
            client.recv(1000)  # held until the block ends
    assert client.recv(1000) == b"".join(websocket_frame("4" + text) for text in texts)

    send_encoded(server, "/database/", sid, texts[0])  # outside a block: at once
    assert client.recv(1000) == websocket_frame("4" + texts[0])
    send_encoded(server, "/database/", "gone", texts[0])  # a socket that disconnected meanwhile: skipped
    with pytest.raises(plain_socket.timeout):
        client.recv(1000)
