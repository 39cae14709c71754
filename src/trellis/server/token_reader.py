"""One Redis ``GET`` per request, as cheap as a round trip gets: what ``trellis.cache`` checks each request.

redis-py's ``Redis.get`` (connection pool, retries, event hooks), even a packed command on one of its
connections, costs several times the CPU of the same ``GET`` written to a plain socket, and a sizeable
part of a get by id (``bench/results/core.md#token-reader``). So the token is
read on plain sockets (green under eventlet) opened with the shared client's own settings (host,
port, database, credentials, timeouts), kept in a small stack of idle connections. A TLS or
Unix-socket Redis goes through the client itself. Any fault closes the connection and raises
``OSError``: the caller falls back to the database.

Under eventlet a green socket that waits for its reply costs more CPU again (the hub's trampoline),
so concurrent requests share reads (:class:`trellis.shared_reads.SharedReads`): a request takes the
result of a read that started after the request asked, never one already under way (which might predate
a change the request must see), so sharing loses nothing of exactness. At 16 concurrent requests most of them
share, and the cost per request falls to a green event wait.

Checked against redis-py 7.4.1 (see :mod:`trellis.server`): the client's ``connection_pool.connection_kwargs``
(``host``, ``port``, ``db``, ``username``, ``password``, ``socket_timeout``, ``socket_connect_timeout``) and
its plain TCP connection class named ``Connection``. It lives in :mod:`trellis.server` for that reason; the
sharing of reads, which depends on no library and which ``trellis.cache`` also uses for its table read, is
:mod:`trellis.shared_reads`.
"""

from __future__ import annotations

import socket
from typing import Any

from ..shared_reads import SharedReads

CHECKED = {"redis": "7.4.1"}  # see trellis.server
_PLAIN = "Connection"  # redis-py's TCP connection class: anything else (SSL, Unix) uses the client


class TokenReader:
    def __init__(self, client: Any) -> None:
        self.client = client
        pool = client.connection_pool
        self._options = dict(pool.connection_kwargs)
        self._raw = pool.connection_class.__name__ == _PLAIN and "host" in self._options
        self._idle: list[socket.socket] = []
        self._shared = SharedReads()

    def get(self, key: str) -> bytes | None:
        """The value of ``key``, read after this call began (possibly by a concurrent caller)."""
        return self._shared.read(lambda: self._get(key))

    def _get(self, key: str) -> bytes | None:
        if not self._raw:
            return self.client.get(key)
        encoded = key.encode()
        command = b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(encoded), encoded)
        try:
            sock = self._idle.pop()
        except IndexError:
            sock = self._connect()
        try:
            sock.sendall(command)
            value = _read_reply(sock)
        except BaseException:
            sock.close()
            raise
        self._idle.append(sock)
        return value

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()

    def _connect(self) -> socket.socket:
        options = self._options
        sock = socket.create_connection(
            (options["host"], options.get("port", 6379)),
            timeout=options.get("socket_connect_timeout") or options.get("socket_timeout"),
        )
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(options.get("socket_timeout"))
            setup = []
            if options.get("password"):
                auth = [b"AUTH"] + ([options["username"].encode()] if options.get("username") else [])
                setup.append(auth + [options["password"].encode()])
            if options.get("db"):
                setup.append([b"SELECT", str(options["db"]).encode()])
            for parts in setup:
                sock.sendall(b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts))
                _read_reply(sock)
        except BaseException:
            sock.close()
            raise
        return sock


def _read_reply(sock: socket.socket) -> bytes | None:
    """A simple-string, error or bulk reply (all a GET, AUTH or SELECT answers)."""
    data = sock.recv(256)
    while b"\r\n" not in data:
        data += _more(sock)
    head, _, rest = data.partition(b"\r\n")
    kind = head[:1]
    if kind == b"+":
        return head[1:]
    if kind == b"$":
        size = int(head[1:])
        if size < 0:
            return None
        while len(rest) < size + 2:
            rest += _more(sock)
        return rest[:size]
    raise ConnectionError(f"Redis answered {head[:200]!r}")  # -ERR …, or a reply a GET never gets


def _more(sock: socket.socket) -> bytes:
    chunk = sock.recv(4096)
    if not chunk:
        raise ConnectionError("Redis closed the connection")
    return chunk
