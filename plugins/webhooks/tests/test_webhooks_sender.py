"""The HTTP client of deliveries against real sockets on 127.0.0.1: keep-alive, a receiver that closed an
idle connection, the 10 s limit (shortened here), trickled and invalid answers, TLS."""

from __future__ import annotations

import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import trustme

from trellis_webhooks.sender import Sender

BODY = b'{"id":1,"event":"ping"}'
HEADERS = {"Content-Type": "application/json", "Trellis-Event": "ping"}


class RawServer:
    """Accepts connections on 127.0.0.1 and hands each to ``serve(connection)`` in a thread of its own."""

    def __init__(self, serve: Callable[[socket.socket], None], wrap: ssl.SSLContext | None = None) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.requests: list[bytes] = []
        self._serve, self._wrap = serve, wrap
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(connection,), daemon=True).start()

    def _handle(self, connection: socket.socket) -> None:
        try:
            if self._wrap is not None:
                connection = self._wrap.wrap_socket(connection, server_side=True)
            self._serve(connection)
        except OSError:
            pass
        finally:
            connection.close()

    def read_request(self, connection: socket.socket) -> bool:
        """Read one request (headers and a Content-Length body); False when the client closed."""
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = connection.recv(65536)
            if not chunk:
                return False
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
        )
        while len(rest) < length:
            rest += connection.recv(65536)
        self.requests.append(head + b"\r\n\r\n" + rest)
        return True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook?x=1"

    def close(self) -> None:
        self.listener.close()


@pytest.fixture()
def raw_server() -> Iterator[Callable[..., RawServer]]:
    made: list[RawServer] = []

    def make(serve: Callable[[RawServer, socket.socket], None], wrap: ssl.SSLContext | None = None) -> RawServer:
        server = RawServer(lambda connection: serve(server, connection), wrap)
        made.append(server)
        return server

    yield make
    for server in made:
        server.close()


NO_CONTENT = b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"


def keep_alive(server: RawServer, connection: socket.socket) -> None:
    while server.read_request(connection):
        connection.sendall(NO_CONTENT)


def test_connections_are_kept_alive_and_the_request_is_as_sent(raw_server):
    server = raw_server(keep_alive)
    sender = Sender()
    outcomes = [sender.post(server.url, BODY, HEADERS, allow_private=True) for _ in range(3)]
    assert {(o.delivered, o.status, o.error) for o in outcomes} == {(True, 204, None)}
    assert server.connections == 1
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /hook?x=1 HTTP/1.1" and body == BODY
    assert {b"host: 127.0.0.1:%d" % server.port, b"trellis-event: ping", b"content-length: %d" % len(BODY)} <= {
        line.lower() for line in lines[1:]
    }


def test_an_idle_connection_the_receiver_closed_is_replaced_once(raw_server):
    def one_then_close(server: RawServer, connection: socket.socket) -> None:
        if server.read_request(connection):
            connection.sendall(NO_CONTENT)  # keep-alive by HTTP/1.1's default, then closed anyway

    server = raw_server(one_then_close)
    sender = Sender()
    assert sender.post(server.url, BODY, HEADERS, allow_private=True).delivered
    time.sleep(0.2)  # the receiver has closed the pooled connection
    again = sender.post(server.url, BODY, HEADERS, allow_private=True)
    assert (again.delivered, again.status) == (True, 204)
    assert server.connections == 2 and len(server.requests) == 2, "the request went once, on a new connection"


def test_a_receiver_closing_without_an_answer_is_an_error(raw_server):
    server = raw_server(lambda server, connection: server.read_request(connection))
    outcome = Sender().post(server.url, BODY, HEADERS, allow_private=True)
    assert (outcome.delivered, outcome.status) == (False, None)
    assert outcome.error.startswith("Cannot reach the target: connection failed")


def test_an_answer_that_is_not_http_is_an_error(raw_server):
    def garbage(server: RawServer, connection: socket.socket) -> None:
        server.read_request(connection)
        connection.sendall(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")

    outcome = Sender().post(raw_server(garbage).url, BODY, HEADERS, allow_private=True)
    assert outcome.error == "Cannot reach the target: the answer is not valid HTTP/1.1"


def test_no_answer_within_the_limit(raw_server):
    held = threading.Event()

    def hold(server: RawServer, connection: socket.socket) -> None:
        server.read_request(connection)
        held.wait(5)

    started = time.monotonic()
    outcome = Sender(timeout=0.5).post(raw_server(hold).url, BODY, HEADERS, allow_private=True)
    held.set()
    assert outcome == type(outcome)(False, None, "No answer within 0.5 s")
    assert time.monotonic() - started < 2


def test_a_trickled_answer_is_cut_off_at_the_limit_and_its_status_counts(raw_server):
    stop = threading.Event()

    def trickle(server: RawServer, connection: socket.socket) -> None:
        server.read_request(connection)
        connection.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 100000\r\n\r\nslow")
        while not stop.wait(0.05):
            connection.sendall(b".")

    started = time.monotonic()
    outcome = Sender(timeout=0.6).post(raw_server(trickle).url, BODY, HEADERS, allow_private=True)
    stop.set()
    assert time.monotonic() - started < 2
    assert outcome.status == 500 and outcome.error.startswith("Answered 500: slow.")


def test_https_is_verified(raw_server):
    authority = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_context)
    server = raw_server(keep_alive, wrap=server_context)
    url = server.url.replace("http://", "https://")

    trusting = ssl.create_default_context()
    authority.configure_trust(trusting)
    outcome = Sender(ssl_context=trusting).post(url, BODY, HEADERS, allow_private=True)
    assert (outcome.delivered, outcome.status) == (True, 204)

    untrusted = Sender().post(url, BODY, HEADERS, allow_private=True)  # the system's authorities only
    assert untrusted.delivered is False and "TLS failed (CERTIFICATE_VERIFY_FAILED)" in untrusted.error


def test_a_private_peer_is_refused_before_anything_is_sent(raw_server):
    server = raw_server(keep_alive)
    outcome = Sender().post(server.url, BODY, HEADERS, allow_private=False)
    assert outcome.error == "refused: 127.0.0.1 is a loopback address (allowPrivateTargets is off)"
    assert server.requests == []


def test_idle_connections_are_closed_after_a_while(raw_server, monkeypatch):
    from trellis_webhooks import sender as sender_module

    monkeypatch.setattr(sender_module, "IDLE_SECONDS", 0.2)
    first, second = raw_server(keep_alive), raw_server(keep_alive)
    sender = Sender()
    assert sender.post(first.url, BODY, HEADERS, allow_private=True).delivered
    time.sleep(0.3)
    assert sender.post(second.url, BODY, HEADERS, allow_private=True).delivered  # sweeps the first's
    assert sum(len(idle) for idle in sender._idle.values()) == 1
    assert sender.post(first.url, BODY, HEADERS, allow_private=True).delivered
    assert first.connections == 2, "an expired connection is not reused"


def test_a_non_ascii_url_is_sent_encoded(raw_server):
    server = raw_server(keep_alive)
    url = f"http://127.0.0.1:{server.port}/café/hook?q=ü&x=%20"
    assert Sender().post(url, BODY, HEADERS, allow_private=True).delivered
    assert server.requests[0].split(b"\r\n", 1)[0] == b"POST /caf%C3%A9/hook?q=%C3%BC&x=%20 HTTP/1.1"


def test_a_reused_connection_broken_mid_answer_is_not_sent_again(raw_server):
    """Once a byte of an answer came, the receiver may have taken the request: no second send."""

    def then_break(server: RawServer, connection: socket.socket) -> None:
        server.read_request(connection)
        connection.sendall(NO_CONTENT)
        server.read_request(connection)
        connection.sendall(b"HTTP/1.1 2")
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset

    server = raw_server(then_break)
    sender = Sender()
    assert sender.post(server.url, BODY, HEADERS, allow_private=True).delivered
    broken = sender.post(server.url, BODY, HEADERS, allow_private=True)
    assert broken.delivered is False and broken.error.startswith("Cannot reach the target")
    assert len(server.requests) == 2 and server.connections == 1
