"""The server entry point sets TCP_NODELAY on every accepted connection (Socket.IO acks otherwise wait
~40 ms for Nagle's algorithm; bench/results/chat_nodelay.md)."""

from __future__ import annotations

import socket

import pytest

from trellis.serve import NoDelayListener, nodelay_enabled


def test_accepted_connections_have_nodelay():
    with socket.create_server(("127.0.0.1", 0)) as server:
        listener = NoDelayListener(server)
        assert listener.getsockname() == server.getsockname()  # everything else is the wrapped socket's
        accepted = []
        for _ in range(2):
            with socket.create_connection(server.getsockname()):
                connection, _address = listener.accept()
                with connection:
                    accepted.append(connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
    assert accepted and all(accepted)
    with socket.create_server(("127.0.0.1", 0)) as plain, socket.create_connection(plain.getsockname()):
        connection, _ = plain.accept()
        with connection:
            assert connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0  # what it fixes


@pytest.mark.parametrize(("value", "enabled"), [(None, True), ("1", True), ("0", False), ("off", False)])
def test_nodelay_setting(monkeypatch, value, enabled):
    if value is None:
        monkeypatch.delenv("TRELLIS_TCP_NODELAY", raising=False)
    else:
        monkeypatch.setenv("TRELLIS_TCP_NODELAY", value)
    assert nodelay_enabled() is enabled
