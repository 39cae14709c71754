"""Against the real server (eventlet, real sockets): streaming both ways, Range, and a 413 that comes
before the body is sent."""

from __future__ import annotations

import hashlib
import os
import socket
import time

import pytest
import requests

from trellis.testing.plugin import TEST_MASTER_KEY
from trellis_authentication.testing import create_user_over_http

pytestmark = pytest.mark.live
MiB = 1024 * 1024


def test_streaming_range_s3_and_early_413_over_http(live_server, s3_bucket_settings):
    """One server start for every check (a live server costs seconds)."""
    user = create_user_over_http(live_server.url)
    _large_upload_and_ranged_download(live_server, user)
    _s3_under_eventlet(live_server, user, s3_bucket_settings())
    _oversized_upload_is_refused_before_the_body_is_sent(live_server, user)


def _s3_under_eventlet(live_server, user, s3):
    """boto3 inside the eventlet server (green sockets, SSL context) against moto."""
    admin = {"masterkey": TEST_MASTER_KEY}
    assert requests.put(f"{live_server.url}/admin/storage/config", json={"provider": "s3", "s3": s3}, headers=admin).ok
    content = os.urandom(9 * MiB)  # more than one 8 MiB part: a multipart upload
    response = requests.post(
        f"{live_server.url}/storage/upload", files={"file": ("s3.bin", content)}, headers=user.headers, timeout=60
    )
    assert response.status_code == 201, response.text
    file_id = response.json()["id"]
    download = requests.get(f"{live_server.url}/storage/download/{file_id}", headers=user.headers, timeout=60)
    assert download.status_code == 200 and download.content == content
    signed = requests.get(f"{live_server.url}/storage/getUrl/{file_id}", headers=user.headers, timeout=60).json()
    assert requests.get(signed["url"], headers={"Range": "bytes=0-9"}, timeout=60).content == content[:10]
    assert requests.put(f"{live_server.url}/admin/storage/config", json={"provider": "local"}, headers=admin).ok


def _large_upload_and_ranged_download(live_server, user):
    content = os.urandom(3 * MiB + 123)
    response = requests.post(
        f"{live_server.url}/storage/upload",
        files={"file": ("big.bin", content)},
        data={"isPublic": "true"},
        headers=user.headers,
        timeout=60,
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["size"] == len(content)

    with requests.get(body["url"], stream=True, timeout=60) as download:  # the public URL, no credentials
        assert download.status_code == 200
        assert download.headers["Content-Length"] == str(len(content))
        digest = hashlib.sha256()
        for chunk in download.iter_content(256 * 1024):
            digest.update(chunk)
    assert digest.hexdigest() == hashlib.sha256(content).hexdigest()

    tail = requests.get(body["url"], headers={"Range": "bytes=-100"}, timeout=60)
    assert tail.status_code == 206 and tail.content == content[-100:]


def _oversized_upload_is_refused_before_the_body_is_sent(live_server, user):
    changed = requests.put(
        f"{live_server.url}/admin/storage/config", json={"maxFileSize": MiB}, headers={"masterkey": TEST_MASTER_KEY}
    )
    assert changed.status_code == 200
    head = (
        "POST /storage/upload HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{live_server.port}\r\n"
        f"Authorization: Bearer {user.access_token}\r\n"
        "Content-Type: multipart/form-data; boundary=xyz\r\n"
        f"Content-Length: {10 * 1024 * MiB}\r\n"  # announces 10 GiB, sends none of it
        "Connection: close\r\n\r\n"
    )
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", live_server.port), timeout=10) as sock:
        sock.sendall(head.encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert time.monotonic() - started < 5
