"""Free TCP ports for test servers (live Trellis processes, throwaway PostgreSQL clusters, fake providers)."""

from __future__ import annotations

import socket

# What the test server (``trellis.testing.server``) prints, with its port and pid, once its port is bound.
READY = "trellis test server listening on"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
