"""A TCP proxy in front of PostgreSQL that records the SQL each client sends: tests count round trips.

psycopg2 speaks the simple query protocol: every ``cursor.execute`` (and every ``BEGIN``/``COMMIT`` the
driver adds) is one ``Q`` message, answered before the next is sent. So the ``Q`` messages of a request
are its round trips, and their text says whether a transaction travelled. Only 127.0.0.1 is involved.
"""

from __future__ import annotations

import socket
import struct
import threading
from types import TracebackType

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
            threading.Thread(target=self._client_to_server, args=(number, client, server), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _client_to_server(self, number: int, client: socket.socket, server: socket.socket) -> None:
        """Forward as it comes, and parse the frontend messages: untyped startup packets, then
        ``type byte + int32 length`` messages."""
        buffer, started = b"", False
        try:
            while data := client.recv(65536):
                server.sendall(data)
                buffer += data
                while True:
                    if not started:
                        if len(buffer) < 8:
                            break
                        (length,) = struct.unpack("!i", buffer[:4])
                        if len(buffer) < length:
                            break
                        (code,) = struct.unpack("!i", buffer[4:8])
                        buffer, started = buffer[length:], code != SSL_REQUEST
                        continue
                    if len(buffer) < 5:
                        break
                    kind, (length,) = buffer[:1], struct.unpack("!i", buffer[1:5])
                    if len(buffer) < 1 + length:
                        break
                    if kind == b"Q":
                        with self._lock:
                            self.queries.append((number, buffer[5 : 1 + length].rstrip(b"\0").decode()))
                    buffer = buffer[1 + length :]
        except OSError:
            pass
        finally:
            for sock in (client, server):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
