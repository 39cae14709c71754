"""A TCP proxy in front of PostgreSQL that records the SQL each client sends: tests count round trips.

psycopg2 speaks the simple query protocol: every ``cursor.execute`` (and every ``BEGIN``/``COMMIT`` the
driver adds) is one ``Q`` message, answered before the next is sent. So the ``Q`` messages of a request
are its round trips, and their text says whether a transaction travelled. Only 127.0.0.1 is involved.
"""

from __future__ import annotations

import contextlib
import re
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

from .ports import free_port

SSL_REQUEST = 80877103  # the startup packet asking for TLS (answered "N" by a server without it)


class PostgresProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target``; :attr:`queries` lists every ``Q`` message as
    ``(client connection number, SQL)``."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self.queries: list[tuple[int, str]] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._prepared: dict[str, str] = {}  # statement name → its SQL, as the connections prepared them
        threading.Thread(target=self._accept, daemon=True, name="pg-proxy").start()

    def __enter__(self) -> PostgresProxy:
        return self

    def __exit__(self, *_exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def taken(self) -> list[tuple[int, str]]:
        """The SQL sent since the last call (and forget it)."""
        with self._lock:
            found, self.queries = self.queries, []
        return found

    def taken_statements(self) -> list[tuple[int, str]]:
        """:meth:`taken`, each message as the SQL it runs: ``PREPARE n AS <sql>; EXECUTE n (…)`` (a statement
        prepared on the server, both in one message) and a later ``EXECUTE n (…)`` stand for ``<sql>``."""
        return [(number, self._statement(sql)) for number, sql in self.taken()]

    def _statement(self, sql: str) -> str:
        match = re.match(r"\s*PREPARE (\w+) AS (.*);\s*EXECUTE \1\b", sql, re.S)
        if match:
            self._prepared[match[1]] = match[2]
            return match[2]
        match = re.match(r"\s*EXECUTE (\w+)\b", sql)
        return self._prepared.get(match[1], sql) if match else sql

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        for sock in list(self._sockets):
            try:
                sock.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            self._sockets += [client, server]
            number = len(self._sockets) // 2
            reader = _Frontend(number, self)
            threading.Thread(target=_pump, args=(client, server, reader.feed), daemon=True).start()
            threading.Thread(target=_pump, args=(server, client, None), daemon=True).start()

    def record(self, number: int, sql: str) -> None:
        with self._lock:
            self.queries.append((number, sql))


def _pump(source: socket.socket, sink: socket.socket, watch: Callable[[bytes], None] | None) -> None:
    """Forward ``source`` to ``sink`` as it comes (``watch`` sees every chunk first: what a test reads after
    its request is answered was recorded before the server could answer it; recording after forwarding lost
    a write's statement once on a loaded CI machine); close both at the end."""
    try:
        while data := source.recv(65536):
            if watch is not None:
                watch(data)
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Frontend:
    """Parses what a client sends: untyped startup packets, then ``type byte + int32 length`` messages."""

    def __init__(self, number: int, proxy: PostgresProxy) -> None:
        self.number, self.proxy = number, proxy
        self.buffer, self.started = b"", False

    def feed(self, data: bytes) -> None:
        self.buffer += data
        while True:
            if not self.started:
                if len(self.buffer) < 8:
                    return
                (length,) = struct.unpack("!i", self.buffer[:4])
                if len(self.buffer) < length:
                    return
                (code,) = struct.unpack("!i", self.buffer[4:8])
                self.buffer, self.started = self.buffer[length:], code != SSL_REQUEST
                continue
            if len(self.buffer) < 5:
                return
            kind, (length,) = self.buffer[:1], struct.unpack("!i", self.buffer[1:5])
            if len(self.buffer) < 1 + length:
                return
            if kind == b"Q":
                self.proxy.record(self.number, self.buffer[5 : 1 + length].rstrip(b"\0").decode())
            self.buffer = self.buffer[1 + length :]


@contextlib.contextmanager
def proxied_app(config: dict[str, Any]) -> Iterator[tuple[Any, PostgresProxy]]:
    """An app made with ``config`` (its ``DATABASE_URL`` a PostgreSQL one) whose every connection goes
    through a :class:`PostgresProxy`; its threads stopped and its pools closed afterwards."""
    from sqlalchemy.engine import make_url

    from trellis import create_app  # not at import: the test plugin loads this module before any app

    url = make_url(config["DATABASE_URL"])
    with PostgresProxy(url.port or 5432, url.host or "127.0.0.1") as proxy:
        app = create_app({**config, "DATABASE_URL": url.set(port=proxy.port).render_as_string(False)})
        try:
            yield app, proxy
        finally:
            app.extensions["trellis_events"].stop()
            app.extensions["trellis"].engine.dispose()
            app.extensions["trellis"].reads.dispose()
