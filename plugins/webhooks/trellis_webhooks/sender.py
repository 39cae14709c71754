"""One HTTP attempt of a delivery: a POST over a pooled keep-alive connection, h11 speaking HTTP/1.1.

h11 (python-hyper's sans-I/O HTTP/1.1, what httpcore and uvicorn are built on) writes the request and
parses the answer; this module only moves the bytes. An attempt costs about half the CPU it did through
urllib3 (``bench/results/modules.md#webhook-deliveries``), and a delivery's CPU is what the API's reads lose
while webhooks are busy (``bench/webhooks_bench.py``).
What urllib3 spent the difference on is not needed here: a green ``select`` on every reused connection,
http.client's email-parser for the answer's headers, its response layers, and the retries, redirects,
proxies and decoding that are all turned off for webhooks.

The rules of an attempt:
- 10 s for all of it (connecting, sending, the answer); a receiver trickling its answer is cut off too;
- no redirects: a 3xx is the answer;
- at most ``RESPONSE_CAP_BYTES`` of the answer's body are read (an endless body cannot hold a sender);
- every new connection's peer address is checked (``targets.check_peer``) unless ``allowPrivateTargets``
  is on, before anything is sent (before the TLS handshake for https); pooled connections are kept apart
  by that setting, so one opened unchecked is never reused for a checked attempt;
- a connection idle for ``IDLE_SECONDS`` is not reused (receivers close idle ones: Node after 5 s), and a
  reused one that the receiver closed meanwhile (the request fails before any byte of an answer) is
  replaced by a new connection once: the receiver never saw that request.
"""

from __future__ import annotations

import functools
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

import h11

from .settings import SEND_TIMEOUT_SECONDS
from .targets import TargetRefused, check_peer

TIMEOUT_SECONDS = SEND_TIMEOUT_SECONDS
RESPONSE_CAP_BYTES = 64 * 1024
ERROR_EXCERPT = 300
USER_AGENT = "Trellis-Webhooks/0.1"
IDLE_SECONDS = 4.0
READ_SIZE = 64 * 1024


@dataclass(frozen=True)
class Outcome:
    delivered: bool
    status: int | None  # the receiver's HTTP status, None when there was no answer
    error: str | None


@dataclass(frozen=True)
class _Target:
    scheme: str
    host: str
    port: int
    path: str  # the request target: path and query
    host_header: str


@functools.lru_cache(maxsize=1024)
def _target(url: str) -> _Target:
    """A webhook URL, parsed once (URLs are validated when saved: ``targets.url_problem``). HTTP/1.1 is
    ASCII: a non-ASCII host goes as IDNA (``bücher.example`` → ``xn--bcher-kva.example``), the rest of the
    request target percent-encoded as UTF-8 (``%`` kept: an escape in the URL stays as it is)."""
    parts = urlsplit(url)
    default = 443 if parts.scheme == "https" else 80
    host = (parts.hostname or "").encode("idna").decode("ascii")
    port = parts.port or default
    named = f"[{host}]" if ":" in host else host
    path = quote((parts.path or "/") + (f"?{parts.query}" if parts.query else ""), safe=_SAFE)
    return _Target(parts.scheme, host, port, path, named if port == default else f"{named}:{port}")


_SAFE = "!#$%&'()*+,/:;=?@[]~"  # what stays as it is in a request target, besides letters, digits and -._


class _Stale(Exception):
    """A reused connection turned out closed by the receiver before it answered anything."""


class _TimedOut(Exception):
    """The attempt's 10 s ran out."""


@dataclass
class _Connection:
    sock: socket.socket
    http: h11.Connection
    idle_since: float = 0.0


class Sender:
    """Posts signed bodies; safe to share between the (green) threads of one process."""

    def __init__(
        self,
        pool_size: int = 10,
        timeout: float = TIMEOUT_SECONDS,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._pool_size = pool_size  # idle connections kept per target
        self._timeout = timeout
        self._ssl = ssl_context or ssl.create_default_context()
        self._idle: dict[tuple[str, str, int, bool], list[_Connection]] = {}
        self._lock = threading.Lock()
        self._swept = time.monotonic()

    def post(self, url: str, body: bytes, headers: dict[str, str], allow_private: bool) -> Outcome:
        deadline = time.monotonic() + self._timeout
        try:
            target = _target(url)
            request = h11.Request(
                method="POST",
                target=target.path,
                headers=[
                    ("Host", target.host_header),
                    ("User-Agent", USER_AGENT),
                    ("Content-Length", str(len(body))),
                    *headers.items(),
                ],
            )
        except (UnicodeError, ValueError, h11.LocalProtocolError) as exc:
            return Outcome(False, None, f"Cannot send to this URL: {exc}")
        key = (target.scheme, target.host, target.port, allow_private)
        try:
            pooled = self._take(key)
            if pooled is not None:
                try:
                    return self._exchange(pooled, key, request, body, deadline, reused=True)
                except _Stale:
                    pass
            fresh = self._connect(target, allow_private, deadline)
            return self._exchange(fresh, key, request, body, deadline, reused=False)
        except TargetRefused as exc:
            return Outcome(False, None, str(exc))
        except (_TimedOut, TimeoutError):
            return Outcome(False, None, f"No answer within {self._timeout:g} s")
        except (OSError, h11.ProtocolError) as exc:
            return Outcome(False, None, f"Cannot reach the target: {_reason(exc)}")

    # --- connections ---------------------------------------------------------------------------------

    def _take(self, key: tuple[str, str, int, bool]) -> _Connection | None:
        now = time.monotonic()
        with self._lock:
            idle = self._idle.get(key)
            while idle:
                connection = idle.pop()  # the most recently used: the least likely to be closed
                if now - connection.idle_since < IDLE_SECONDS:
                    return connection
                connection.sock.close()
        return None

    def _give_back(self, key: tuple[str, str, int, bool], connection: _Connection) -> None:
        connection.http.start_next_cycle()
        now = connection.idle_since = time.monotonic()
        closing = [connection]
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if len(idle) < self._pool_size:
                idle.append(connection)
                closing = []
            if now - self._swept >= IDLE_SECONDS:  # connections to targets no longer sent to are closed too
                self._swept = now
                for connections in self._idle.values():
                    closing += [c for c in connections if now - c.idle_since >= IDLE_SECONDS]
                    connections[:] = [c for c in connections if now - c.idle_since < IDLE_SECONDS]
        for expired in closing:
            expired.sock.close()

    def _connect(self, target: _Target, allow_private: bool, deadline: float) -> _Connection:
        sock = _open(target, deadline)
        try:
            if not allow_private:
                check_peer(sock)  # closes it when refused
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if target.scheme == "https":
                sock.settimeout(_left(deadline))
                sock = self._ssl.wrap_socket(sock, server_hostname=target.host)
        except BaseException:
            sock.close()
            raise
        return _Connection(sock, h11.Connection(h11.CLIENT))

    # --- one request and its answer ---------------------------------------------------------------------

    def _exchange(
        self,
        connection: _Connection,
        key: tuple[str, str, int, bool],
        request: h11.Request,
        body: bytes,
        deadline: float,
        reused: bool,
    ) -> Outcome:
        http, sock = connection.http, connection.sock
        try:
            data = http.send(request) + http.send(h11.Data(data=body)) + http.send(h11.EndOfMessage())
            try:
                _send_all(sock, data, deadline)
            except ConnectionError as exc:  # closed while it idled: the receiver got nothing
                if reused:
                    raise _Stale() from exc
                raise
            response = self._answer(connection, deadline, reused)
            excerpt, complete = self._body(connection, deadline)
        except BaseException:
            sock.close()
            raise
        reusable = http.our_state is h11.DONE and http.their_state is h11.DONE and not http.trailing_data[0]
        if complete and reusable:
            self._give_back(key, connection)
        else:  # a body left unread, bytes after the answer, or the receiver closes: not reused
            sock.close()
        return _outcome(response.status_code, excerpt, complete)

    def _answer(self, connection: _Connection, deadline: float, reused: bool) -> h11.Response:
        """The answer's status line and headers (informational 1xx answers skipped). A reused connection
        closed before the first byte of an answer is stale (``_Stale``): the receiver closed it while it
        idled and never saw the request. After a first byte, a request may have been taken: no retry."""
        heard = False
        while True:
            event = connection.http.next_event()
            if event is h11.NEED_DATA:
                try:
                    chunk = _receive(connection, deadline)
                    if not chunk and not heard:
                        raise ConnectionResetError("closed without answering")
                except ConnectionError as exc:
                    if reused and not heard:
                        raise _Stale() from exc
                    raise
                heard = True
                connection.http.receive_data(chunk)
            elif isinstance(event, h11.Response):
                return event
            elif not isinstance(event, h11.InformationalResponse):
                raise h11.RemoteProtocolError(f"unexpected {type(event).__name__} before the answer")

    def _body(self, connection: _Connection, deadline: float) -> tuple[str, bool]:
        """Up to RESPONSE_CAP_BYTES of the body before the deadline: (its start as text, whole body read)."""
        chunks: list[bytes] = []
        size = 0
        try:
            while size < RESPONSE_CAP_BYTES:
                event = connection.http.next_event()
                if event is h11.NEED_DATA:
                    connection.http.receive_data(_receive(connection, deadline))
                elif isinstance(event, h11.Data):
                    chunks.append(bytes(event.data))
                    size += len(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    return _text(chunks), True
                else:  # ConnectionClosed: the body ended with the connection
                    return _text(chunks), False
        except (OSError, h11.ProtocolError, _TimedOut):  # a broken or slow body: the status is the answer
            pass
        return _text(chunks), False


def _open(target: _Target, deadline: float) -> socket.socket:
    """A TCP connection to the first address of the host that answers, all within the deadline (the
    standard library's ``create_connection`` gives each address the whole timeout)."""
    error: OSError = ConnectionRefusedError("no address")
    for family, kind, protocol, _, address in socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM):
        sock = socket.socket(family, kind, protocol)
        try:
            sock.settimeout(_left(deadline))
            sock.connect(address)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
        except BaseException:
            sock.close()
            raise
    raise error


def _send_all(sock: socket.socket, data: bytes, deadline: float) -> None:
    """``sendall`` within the deadline (a socket timeout applies to each send, not to all of them)."""
    view = memoryview(data)
    while view:
        sock.settimeout(_left(deadline))
        view = view[sock.send(view) :]


def _receive(connection: _Connection, deadline: float) -> bytes:
    connection.sock.settimeout(_left(deadline))
    return connection.sock.recv(READ_SIZE)


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise _TimedOut()
    return left


def _outcome(status: int, excerpt: str, complete: bool) -> Outcome:
    if 200 <= status < 300:
        return Outcome(True, status, None)
    if 300 <= status < 400:
        return Outcome(False, status, f"Answered {status} (redirects are not followed)")
    if not complete and not excerpt:
        return Outcome(False, status, f"Answered {status}")
    return Outcome(False, status, f"Answered {status}: {excerpt[:ERROR_EXCERPT]}".rstrip(": "))


def _text(chunks: list[bytes]) -> str:
    return b"".join(chunks)[: ERROR_EXCERPT * 4].decode("utf-8", "replace").strip()


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed ({exc.reason or exc.__class__.__name__})"
    if isinstance(exc, h11.ProtocolError):
        return "the answer is not valid HTTP/1.1"
    return "connection failed (refused, reset, or the name does not resolve)"
