"""The server's own request-line and header parser (``trellis.server.http_protocol``), over raw sockets against
the real server: what the standard library's parser decided is decided the same way."""

from __future__ import annotations

import json
import socket

import pytest

pytestmark = pytest.mark.live


def exchange(server, raw: bytes, answers: int = 1) -> list[tuple[int, dict[str, str], bytes]]:
    """Send ``raw`` on one connection; read ``answers`` responses as (status, headers, body)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(raw)
        reader = sock.makefile("rb")
        responses = []
        for _ in range(answers):
            status_line = reader.readline()
            if not status_line:
                break
            headers: dict[str, str] = {}
            while (line := reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            body = reader.read(int(headers.get("content-length", "0")))
            responses.append((int(status_line.split()[1]), headers, body))
        return responses


def test_keep_alive_serves_several_requests_and_headers_reach_the_app_in_any_case(module_live_server):
    raw = (
        b"GET /health HTTP/1.1\r\nHost: x\r\nx-request-id: first-one\r\n\r\n"
        b"GET /health HTTP/1.1\r\nHost: x\r\nX-REQUEST-ID:second\r\n\r\n"
    )
    (status1, headers1, _), (status2, headers2, _) = exchange(module_live_server, raw, 2)
    assert (status1, status2) == (200, 200)
    assert headers1["x-request-id"] == "first-one" and headers2["x-request-id"] == "second"


def test_connection_close_and_http_1_0_end_the_connection(module_live_server):
    for raw in (b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", b"GET /health HTTP/1.0\r\n\r\n"):
        responses = exchange(module_live_server, raw + b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", 2)
        assert [status for status, _, _ in responses] == [200]  # the second request is never answered


def chunked(path: str, body: bytes, masterkey: str, pieces: int = 3) -> bytes:
    """A POST of ``body`` as ``pieces`` chunks, without Content-Length."""
    size = -(-len(body) // pieces)
    chunks = b"".join(
        b"%x\r\n%s\r\n" % (len(part), part) for part in (body[i : i + size] for i in range(0, len(body), size))
    )
    return (
        b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\nmasterkey: " + masterkey.encode() + b"\r\n\r\n" + chunks + b"0\r\n\r\n"
    )


def test_a_chunked_json_body_is_read_like_one_with_a_length(module_live_server, admin_headers):
    schema = {"name": "ChunkedBody", "fields": {"title": "String"}}
    [(status, _, answer)] = exchange(
        module_live_server, chunked("/admin/database/schemas", json.dumps(schema).encode(), admin_headers["masterkey"])
    )
    assert status == 201, answer
    assert json.loads(answer)["name"] == "ChunkedBody"
    invalid = b'{"active": tru'
    [(status, _, answer)] = exchange(module_live_server, chunked("/admin/database/schemas", invalid, "x"))
    assert status == 400 and "Invalid JSON" in json.loads(answer)["message"]


def test_a_chunked_body_over_the_limit_is_413(live_server_factory, admin_headers):
    server = live_server_factory(TRELLIS_MAX_CONTENT_LENGTH="4096")
    body = json.dumps({"name": "TooLarge", "fields": {"title": "String"}, "pad": "x" * 5000}).encode()
    [(status, _, answer)] = exchange(server, chunked("/admin/database/schemas", body, admin_headers["masterkey"]))
    assert status == 413
    assert json.loads(answer)["message"] == "The request body is larger than this route's limit of 4096 bytes"


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"GET /health HTTP/2.0\r\n\r\n", 505),
        (b"GET /health HTTQ/1.1\r\n\r\n", 400),
        (b"GET /health HTTP/1.1.1\r\n\r\n", 400),
        (b"GET /health extra HTTP/1.1\r\n\r\n", 400),
        (b"POST /health\r\n\r\n", 400),  # HTTP/0.9 knows GET only
        (b"GET /health HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", 400),
        (b"GET /health HTTP/1.1\r\nHost : x\r\n\r\n", 400),  # whitespace before the colon (RFC 9112)
        (b"GET /health HTTP/1.1\r\n folded: first\r\n\r\n", 400),  # a continuation of nothing
        (b"GET /health HTTP/1.1\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(101)) + b"\r\n", 431),
        (b"GET /health HTTP/1.1\r\nX-Big: " + b"a" * 10_000 + b"\r\n\r\n", 431),  # over 8 KiB, one line
        (b"GET /health HTTP/1.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", 431),
        (b"GET /health HTTP/1.1\r\n" + b"".join(b"X-%d: %s\r\n" % (i, b"a" * 8000) for i in range(9)) + b"\r\n", 431),
    ],
)
def test_malformed_request_lines_and_headers_are_refused(module_live_server, raw, status):
    [(answered, headers, body)] = exchange(module_live_server, raw)
    assert answered == status
    assert headers["content-type"] == "application/json" and headers["x-content-type-options"] == "nosniff"
    assert json.loads(body)["status"] == status


def test_a_folded_header_continues_the_previous_value(module_live_server):
    raw = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Request-ID: folded\r\n \t-value\r\n\r\n"
    [(status, headers, _)] = exchange(module_live_server, raw)
    # joined with one space, "folded -value" is not a valid request id: the server makes its own
    assert status == 200 and headers["x-request-id"] not in ("folded", "folded-value")
    assert len(headers["x-request-id"]) == 32


def test_a_double_slash_path_is_reduced(module_live_server):
    [(status, _, body)] = exchange(module_live_server, b"GET //health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200 and json.loads(body)
