"""Every response of a real server carries each single-valued header once, and ``nosniff``.

A duplicated ``Content-Type`` is a stored XSS: browsers use the last one, so a JSON document or a
``text/plain`` upload that is followed by a stray ``text/html`` opens as a page on the API's origin.
The headers are read off the wire (``http.client`` keeps repeated headers), for every operation of
``/openapi.json``, the console and Swagger UI with their assets, file downloads (record, public,
signed) and a Server-Sent Events stream, each with and without an ``Origin`` header (the two CORS paths).
"""

from __future__ import annotations

import http.client
import re
from collections import Counter
from typing import Any

import pytest
import requests

from trellis.testing.plugin import TEST_MASTER_KEY
from trellis_authentication.testing import create_user_over_http

pytestmark = pytest.mark.live

ADMIN = {"masterkey": TEST_MASTER_KEY}
# Headers that may repeat by definition (RFC 9110 list syntax or Set-Cookie); every other one may not.
LIST_HEADERS = {"vary", "set-cookie", "link", "www-authenticate"}
ORIGINS = (None, "https://app.example")


def _headers(port: int, method: str, path: str, headers: dict[str, str]) -> tuple[int, list[tuple[str, str]]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        body = b"{}" if method in ("POST", "PUT", "PATCH") else None
        sent = {**headers, **({"Content-Type": "application/json"} if body else {})}
        connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()  # returns once the headers are read (an SSE stream stays open)
        return response.status, response.getheaders()
    finally:
        connection.close()


def _duplicates(received: list[tuple[str, str]]) -> dict[str, int]:
    counts = Counter(name.lower() for name, _ in received)
    return {name: n for name, n in counts.items() if n > 1 and name not in LIST_HEADERS}


def _upload(url: str, user: Any, name: str, content: bytes, public: bool) -> dict[str, Any]:
    files = {"file": (name, content)}
    data = {"isPublic": "true" if public else "false"}
    return requests.post(f"{url}/storage/upload", files=files, data=data, headers=user.headers, timeout=30).json()


def _targets(url: str) -> list[tuple[str, str, dict[str, str]]]:
    """(method, path, headers) of every operation in the OpenAPI document plus pages, assets and files."""
    user = create_user_over_http(url)
    schema = {"name": "Note", "fields": {"title": "String"}}
    assert requests.post(f"{url}/admin/database/schemas", json=schema, headers=ADMIN, timeout=30).status_code == 201
    note = requests.post(f"{url}/database/Note", json={"title": "hi"}, headers=user.headers, timeout=30).json()
    upload = _upload(url, user, "notes.txt", b"<script>alert(1)</script>", public=True)
    private = _upload(url, user, "p.html", b"<b>x</b>", public=False)
    signed = requests.get(f"{url}/storage/getUrl/{private['id']}", headers=user.headers, timeout=30).json()["url"]

    targets: list[tuple[str, str, dict[str, str]]] = []
    document = requests.get(f"{url}/openapi.json", timeout=30).json()
    for path, operations in document["paths"].items():
        concrete = re.sub(r"\{[^}]+\}", "x", path)
        for method in operations:
            if method in ("get", "post", "put", "patch", "delete", "head", "options"):
                targets.append((method.upper(), concrete, {}))
    targets += [
        ("GET", f"/database/Note/{note['_id']}", user.headers),
        ("GET", f"/storage/download/{upload['id']}", user.headers),
        ("GET", upload["url"].removeprefix(url), {}),
        ("GET", signed.removeprefix(url), {}),
        ("GET", "/database/Note/changes", {**user.headers, "Accept": "text/event-stream"}),
        ("GET", "/console", {}),
        ("GET", "/console/static/console.css", {}),
        ("GET", "/swagger", {}),
        ("GET", "/swagger/assets/swagger-ui.css", {}),
        ("GET", "/openapi.json", {}),
        ("GET", "/health", {}),
        ("GET", "/no/such/route", {}),
    ]
    return targets


def test_no_single_valued_header_twice_and_nosniff_everywhere(live_server):
    problems: list[str] = []
    targets = _targets(live_server.url)
    assert len(targets) > 100  # every operation of every module
    for origin in ORIGINS:
        for method, path, headers in targets:
            sent = {**headers, **({"Origin": origin} if origin else {})}
            status, received = _headers(live_server.port, method, path, sent)
            duplicated = _duplicates(received)
            if duplicated:
                problems.append(f"{method} {path} (Origin: {origin}) → {status}: {duplicated}")
            if dict((k.lower(), v) for k, v in received).get("x-content-type-options") != "nosniff":
                problems.append(f"{method} {path} (Origin: {origin}) → {status}: no nosniff")
    assert not problems, "\n".join(problems[:20])


def test_header_names_leave_as_the_app_wrote_them(live_server):
    # eventlet re-cased every name word by word (X-Request-Id); that is off (trellis.server.safety).
    _, received = _headers(live_server.port, "GET", "/health", {"Origin": "https://app.example"})
    names = {name for name, _ in received}
    assert {"X-Request-ID", "Content-Type", "Content-Length", "X-Content-Type-Options"} <= names
    assert "Access-Control-Expose-Headers" in names


def test_typed_answers_keep_their_one_content_type(live_server):
    """The concrete bug: a JSON answer and a text/plain upload each say exactly what they are."""
    user = create_user_over_http(live_server.url)
    upload = _upload(live_server.url, user, "x.txt", b"<img src=x onerror=alert(1)>", public=True)
    for path, expected in (
        ("/health", "application/json"),
        (upload["url"].removeprefix(live_server.url), "text/plain"),
        ("/console/static/console.css", "text/css; charset=utf-8"),
    ):
        _, received = _headers(live_server.port, "GET", path, {})
        types = [value for name, value in received if name.lower() == "content-type"]
        assert len(types) == 1 and types[0].startswith(expected), (path, types)
