"""What a connection keeps once it is a websocket: not the buffers of its HTTP requests.

eventlet's protocol reads a connection through an 8 KiB ``BufferedReader`` and writes it through a 16 KiB
``BufferedWriter`` (``HttpProtocol.wbufsize``), made once per connection. A websocket is read and written on
the socket itself (``eventlet.websocket``), yet both files, with their buffers, lived as long as it did: the
largest part of an idle subscriber's memory (``bench/results/access_live.md``). Once eventlet's websocket has
sent its handshake it calls the environ's ``eventlet.set_idle`` (nothing else does);
:class:`trellis.server.http_protocol.FastHttpProtocol` answers that with :func:`release_buffers`.

The files are not replaced but re-initialised in place with a one-byte buffer: every holder (the protocol,
the frame of ``handle_one_response``, the request's ``Input``) keeps the same object, still usable (a
larger write or read goes past a buffer that small) and closed as before when the connection ends. The
client sends nothing before the handshake's answer (RFC 6455 §4.1), so nothing buffered is dropped, and a
websocket never read it anyway.

Checked against eventlet 0.41.3 (see :mod:`trellis.server`): ``WebSocketWSGI.__call__`` calls
``eventlet.set_idle`` after the handshake and before the handler; ``HttpProtocol.setup`` makes ``rfile``
and ``wfile`` with ``makefile``. And against CPython 3.11's ``_io``: ``__init__`` on a live
``BufferedReader``/``BufferedWriter`` frees its buffer and allocates one of the new size
(``tests/test_server_libraries.py`` checks both).
"""

from __future__ import annotations

import io
from typing import Any

CHECKED = {"eventlet": "0.41.3"}  # see trellis.server
UPGRADED_BUFFER_BYTES = 1  # the smallest io accepts: nothing passes through these files any more


def release_buffers(protocol: Any) -> None:
    """Shrink the HTTP buffers of an upgraded connection (the write buffer flushed first)."""
    wfile, rfile = protocol.wfile, protocol.rfile
    if type(wfile) is io.BufferedWriter and not wfile.closed:
        wfile.flush()
        wfile.__init__(wfile.raw, UPGRADED_BUFFER_BYTES)  # type: ignore[misc]
    if type(rfile) is io.BufferedReader and not rfile.closed:
        rfile.__init__(rfile.raw, UPGRADED_BUFFER_BYTES)  # type: ignore[misc]
