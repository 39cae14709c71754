"""The one-frame fan-out of Socket.IO emits (``trellis.socket_fanout``): frames a websocket client parses,
and a server that declines permessage-deflate (the frame is then the same bytes for every socket)."""

from __future__ import annotations

import base64
import os
import socket

import pytest
from wsproto.frame_protocol import FrameProtocol, Opcode

from trellis.socket_fanout import websocket_frame


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
