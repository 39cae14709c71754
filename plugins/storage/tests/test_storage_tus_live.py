"""Resumable uploads against real servers (eventlet, real sockets) sharing one database and one storage, on
both backends: two processes taking alternate chunks, a client that hangs up mid-chunk, and a server killed
(SIGKILL) mid-chunk whose upload a new process continues. Acknowledged bytes are never lost, no byte is
stored twice, and the finished file is the bytes that were sent."""

from __future__ import annotations

import hashlib
import os
import socket
import time
from urllib.parse import urlsplit

import pytest
import requests

from trellis.testing.plugin import TEST_MASTER_KEY
from trellis.testing.waiting import wait_until
from trellis_authentication.testing import create_user_over_http
from trellis_storage.upload_lease import WRITER_LEASE

pytestmark = pytest.mark.live
MiB = 1024 * 1024
TUS = {"Tus-Resumable": "1.0.0"}
STREAM = {"Content-Type": "application/offset+octet-stream"}


class Client:
    """tus over ``requests`` for one user, against whichever server is named."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.headers = {"Authorization": f"Bearer {token}", **TUS}

    def create(self, server, length: int) -> str:
        response = requests.post(
            f"{server.url}/storage/uploads",
            headers={**self.headers, "Upload-Length": str(length), "Upload-Metadata": "filename YS5iaW4="},
            timeout=30,
        )
        assert response.status_code == 201, response.text
        return urlsplit(response.headers["Location"]).path

    def offset(self, server, path: str) -> int:
        response = requests.head(f"{server.url}{path}", headers=self.headers, timeout=30)
        assert response.status_code == 200, response.status_code
        return int(response.headers["Upload-Offset"])

    def patch(self, server, path: str, offset: int, body: bytes) -> requests.Response:
        return requests.patch(
            f"{server.url}{path}",
            headers={**self.headers, **STREAM, "Upload-Offset": str(offset)},
            data=body,
            timeout=120,
        )

    def partial_patch(self, server, path: str, offset: int, length: int, sent: bytes) -> socket.socket:
        """A PATCH announcing ``length`` bytes that sends only ``sent`` (the socket stays open)."""
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        head = (
            f"PATCH {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAuthorization: Bearer {self.token}\r\n"
            f"Tus-Resumable: 1.0.0\r\nUpload-Offset: {offset}\r\n"
            f"Content-Type: application/offset+octet-stream\r\nContent-Length: {length}\r\n\r\n"
        )
        sock.sendall(head.encode() + sent)
        return sock


def configure(server, settings: dict) -> None:
    response = requests.put(
        f"{server.url}/admin/storage/config", json=settings, headers={"masterkey": TEST_MASTER_KEY}, timeout=30
    )
    assert response.status_code == 200, response.text


def finished(client: Client, server, file_id: str, content: bytes) -> None:
    record = requests.get(f"{server.url}/storage/file/{file_id}", headers=client.headers, timeout=30).json()
    assert record["size"] == len(content) and record["sha256"] == hashlib.sha256(content).hexdigest()
    download = requests.get(f"{server.url}/storage/download/{file_id}", headers=client.headers, timeout=60)
    assert download.status_code == 200 and download.content == content


@pytest.mark.parametrize("backend", ["local", "s3"])
@pytest.mark.long
def test_chunks_across_processes_hang_ups_and_a_killed_server(live_server_factory, backend, request):
    first, second = live_server_factory(), live_server_factory()
    if backend == "s3":
        configure(first, {"provider": "s3", "s3": request.getfixturevalue("s3_bucket_settings")()})
    client = Client(create_user_over_http(first.url).access_token)

    # Two processes take alternate chunks (S3: the unfinished part one left, the other continues).
    content = os.urandom(14 * MiB + 3)
    path = client.create(first, len(content))
    servers = [first, second]
    response = None
    for n, start in enumerate(range(0, len(content), 3 * MiB)):
        response = client.patch(servers[n % 2], path, start, content[start : start + 3 * MiB])
        assert response.status_code == 204, response.text
    finished(client, second, response.headers["Trellis-File-Id"], content)

    # A client hangs up mid-chunk: what arrived is kept, and the upload continues on the other process.
    content = os.urandom(12 * MiB)
    path = client.create(first, len(content))
    assert client.patch(first, path, 0, content[: 2 * MiB]).status_code == 204
    sock = client.partial_patch(first, path, 2 * MiB, 10 * MiB, content[2 * MiB : 8 * MiB])
    time.sleep(0.5)
    sock.close()
    kept = wait_until(lambda: (o := client.offset(second, path)) > 2 * MiB and o, "the hung-up chunk's bytes")
    assert kept <= 8 * MiB
    done = client.patch(second, path, kept, content[kept:])
    assert done.status_code == 204, done.text
    finished(client, second, done.headers["Trellis-File-Id"], content)

    # The server is killed mid-chunk: a new process resumes from the last acknowledged offset.
    content = os.urandom(16 * MiB)
    path = client.create(first, len(content))
    assert client.patch(first, path, 0, content[: 5 * MiB]).status_code == 204
    sock = client.partial_patch(first, path, 5 * MiB, 11 * MiB, content[5 * MiB : 13 * MiB])
    time.sleep(1.0)
    first.process.kill()
    first.process.wait(30)
    sock.close()
    third = live_server_factory()
    assert client.offset(third, path) == 5 * MiB  # acknowledged bytes are kept, the cut chunk is not
    wrong = client.patch(third, path, 13 * MiB, content[13 * MiB :])
    assert wrong.status_code == 409

    def resumed() -> requests.Response | None:
        answer = client.patch(third, path, 5 * MiB, content[5 * MiB :])
        # S3: the killed request's lease holds the upload for a while (local: its flock died with it).
        if answer.status_code == 423 and backend == "s3":
            return None
        assert answer.status_code == 204, answer.text
        return answer

    started = time.monotonic()
    done = wait_until(resumed, "the upload to resume", timeout=WRITER_LEASE.total_seconds() + 30, interval=1.0)
    if backend == "local":
        assert time.monotonic() - started < WRITER_LEASE.total_seconds()
    finished(client, third, done.headers["Trellis-File-Id"], content)


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_two_processes_asked_for_one_final_upload_make_one_file(live_server_factory, backend, request):
    """The same final upload asked of two processes at once (a client retrying on another node), over many
    trials: one file each time, of every byte once; each answer is that file (201), or a 409 / 423 while the
    other request holds it; the parts' bytes are gone."""
    from concurrent.futures import ThreadPoolExecutor

    first, second = live_server_factory(), live_server_factory()
    if backend == "s3":
        configure(first, {"provider": "s3", "s3": request.getfixturevalue("s3_bucket_settings")()})
    user = create_user_over_http(first.url)
    client = Client(user.access_token)
    admin = {"masterkey": TEST_MASTER_KEY}

    def part(server, content: bytes) -> str:
        response = requests.post(
            f"{server.url}/storage/uploads",
            headers={**client.headers, "Upload-Length": str(len(content)), "Upload-Concat": "partial"},
            timeout=30,
        )
        assert response.status_code == 201, response.text
        path = urlsplit(response.headers["Location"]).path
        assert client.patch(server, path, 0, content).status_code == 204
        return path

    def final(server, paths: list[str]) -> requests.Response:
        headers = {
            **client.headers,
            "Upload-Concat": "final;" + " ".join(paths),
            "Upload-Metadata": "filename YS5iaW4=",
        }
        return requests.post(f"{server.url}/storage/uploads", headers=headers, timeout=60)

    trials = 8
    with ThreadPoolExecutor(2) as pool:
        for _ in range(trials):
            halves = os.urandom(MiB + 17), os.urandom(MiB // 2 + 3)
            paths = [part(first, halves[0]), part(second, halves[1])]
            answers = list(pool.map(lambda server: final(server, paths), (first, second)))
            statuses = sorted(a.status_code for a in answers)
            assert statuses[0] == 201 and set(statuses) <= {201, 409, 423}, [a.text for a in answers]
            made = {a.headers["Trellis-File-Id"] for a in answers if a.status_code == 201}
            assert len(made) == 1
            finished(client, second, made.pop(), halves[0] + halves[1])
    files = requests.get(f"{first.url}/admin/storage/files", params={"owner": user.id}, headers=admin, timeout=30)
    assert files.json()["count"] == trials
