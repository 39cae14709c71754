"""Slow and idle clients against a real server process (``trellis.server.http_protocol.ConnectionGuard``): a crowd
of half-sent requests cannot make the server unreachable, and partial or idle connections are closed."""

from __future__ import annotations

import json
import resource
import socket
import time

import pytest
import requests

pytestmark = pytest.mark.live

PARTIAL = b"GET /health HTTP/1.1\r\nHo"  # a request line and the start of a header, never finished


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a socket timeout fails the test)."""
    received = b""
    while chunk := sock.recv(4096):
        received += chunk
    return received


def test_a_crowd_of_partial_requests_leaves_health_answering(live_server_factory):
    # More half-sent requests than the default cap of 1,024 connections, and a header timeout far longer
    # than the test: /health gets in because the connection waiting longest makes room, not by a timeout.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 2048:  # this process holds the crowd's sockets
        resource.setrlimit(resource.RLIMIT_NOFILE, (2048 if hard == resource.RLIM_INFINITY else min(2048, hard), hard))
    server = live_server_factory(TRELLIS_HEADER_TIMEOUT="600")
    crowd = []
    try:
        for _ in range(1100):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
            sock.sendall(PARTIAL)
            crowd.append(sock)
        response = requests.get(f"{server.url}/health", timeout=30)
        assert response.status_code == 200
        crowd[0].settimeout(30)
        assert read_until_closed(crowd[0]) == b""  # the oldest was closed to make room, unanswered
    finally:
        for sock in crowd:
            sock.close()


def test_at_the_cap_the_connections_waiting_longest_make_room_in_order(live_server_factory):
    server = live_server_factory(TRELLIS_MAX_CONNECTIONS="5", TRELLIS_HEADER_TIMEOUT="600")
    crowd = [socket.create_connection(("127.0.0.1", server.port), timeout=30) for _ in range(8)]
    try:
        for sock in crowd:  # a burst: all eight arrive before the server has run any of them
            sock.sendall(PARTIAL)
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as health:
            health.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert read_until_closed(health).startswith(b"HTTP/1.1 200 ")
        # Nine connections for five places: the four oldest were closed, the newest four finish their request.
        assert [read_until_closed(sock) for sock in crowd[:4]] == [b""] * 4
        for sock in crowd[4:]:
            sock.sendall(b"st: x\r\nConnection: close\r\n\r\n")
            assert read_until_closed(sock).startswith(b"HTTP/1.1 200 ")
    finally:
        for sock in crowd:
            sock.close()


@pytest.fixture(scope="module")
def impatient_server(app, app_config, tmp_path_factory):
    from trellis.testing.plugin import running_servers

    with running_servers(app, app_config, tmp_path_factory.mktemp("impatient")) as start:
        yield start(TRELLIS_HEADER_TIMEOUT="1", TRELLIS_IDLE_TIMEOUT="1")


def test_a_partial_request_gets_408_and_is_closed(impatient_server):
    with socket.create_connection(("127.0.0.1", impatient_server.port), timeout=30) as sock:
        sock.sendall(PARTIAL)
        answer = read_until_closed(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ")
    assert json.loads(body)["name"] == "REQUEST_TIMEOUT"


def test_a_request_trickled_byte_by_byte_has_the_header_timeout_in_all(impatient_server):
    # Each byte comes well within the timeout; the whole head does not: the deadline is for all of it.
    request = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"y" * 100 + b"\r\n\r\n"
    with socket.create_connection(("127.0.0.1", impatient_server.port), timeout=30) as sock:
        try:
            for byte in request:
                sock.sendall(bytes([byte]))
                time.sleep(0.1)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed while sending: what is asserted is what it answered before
        answer = read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 408 ")


def test_a_connection_that_sends_nothing_is_closed(impatient_server):
    with socket.create_connection(("127.0.0.1", impatient_server.port), timeout=30) as sock:
        assert read_until_closed(sock) == b""


def test_an_idle_keep_alive_connection_is_closed_after_its_answer(impatient_server):
    with socket.create_connection(("127.0.0.1", impatient_server.port), timeout=30) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.count(b"HTTP/1.1") == 1


def test_requests_in_time_are_served_on_one_connection(impatient_server):
    with socket.create_connection(("127.0.0.1", impatient_server.port), timeout=30) as sock:
        for _ in range(3):
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(4096).startswith(b"HTTP/1.1 200 ")
