"""Processes killed (SIGKILL) in the middle of uploads, then a new server on the same storage and database:
its start-up sweep leaves no part file, no blob without a record, and no journal entry, while an upload
still running in another process is not disturbed.

The uploads are real: 20 MB bodies over raw sockets to a real server, and ``piped_upload.py`` processes
(``store_upload`` fed from a pipe) for the points a server cannot be held at: the server spools a whole
body before storing a byte. A database write lock held by the test stops a process just before a write
(its journal entry, its record) at a known point, where it is killed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy import select, update

from trellis import db as trellis_db
from trellis.testing.plugin import live_server_env
from trellis.testing.waiting import wait_until
from trellis_authentication.testing import create_user_over_http
from trellis_storage.backends import key_for
from trellis_storage.journal import S3_UPLOAD_GRACE
from trellis_storage.models import File, PendingBlob

pytestmark = pytest.mark.live
MiB = 1024 * 1024
SIZE = 20 * MiB
HALF = 10 * MiB  # fed to hold an upload mid-write: its first 9 MiB are stored (a part file, an S3 part)
T = TypeVar("T")


class Piped:
    """A ``piped_upload.py`` process storing ``SIZE`` random bytes as fast as the test feeds them."""

    def __init__(self, env: dict[str, str], owner: str, log: Path) -> None:
        self.content = os.urandom(SIZE)
        self.sent = 0
        script = Path(__file__).with_name("piped_upload.py")
        with open(log, "wb") as errors:
            self.process = subprocess.Popen(
                [sys.executable, str(script), owner],
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
            )

    def feed(self, upto: int) -> None:
        self.process.stdin.write(self.content[self.sent : upto])
        self.process.stdin.flush()
        self.sent = upto

    def end_input(self) -> None:
        self.feed(SIZE)
        self.process.stdin.close()

    def finish(self) -> str:
        """The rest of the bytes; the id of the file once its record is saved."""
        out, _ = self.process.communicate(self.content[self.sent :], timeout=120)
        assert self.process.returncode == 0, out
        return out.decode().strip()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)
        with contextlib.suppress(OSError):
            self.process.stdin.close()


@contextlib.contextmanager
def uploaders(app_config: dict[str, Any], folder: Path, owner: str, **env: str) -> Iterator[Callable[[], Piped]]:
    started: list[Piped] = []
    settings = live_server_env(app_config, folder, 0, TRELLIS_ASYNC_MODE="threading", **env)

    def start() -> Piped:
        started.append(Piped(settings, owner, folder / f"piped-{len(started)}.log"))
        return started[-1]

    try:
        yield start
    finally:
        for piped in started:
            piped.kill()


@contextlib.contextmanager
def writes_held(app) -> Iterator[None]:
    """Writes to the storage tables wait until the block ends (on SQLite: every write to the database)."""
    engine = app.extensions["trellis"].engine
    with engine.connect() as connection:
        connection.begin()
        if engine.dialect.name == "postgresql":
            connection.exec_driver_sql("LOCK TABLE storage_files, storage_pending_blobs IN EXCLUSIVE MODE")
        else:
            connection.exec_driver_sql("DELETE FROM storage_files WHERE 0 = 1")  # takes SQLite's write lock
        yield
        connection.rollback()


def rows(app, statement) -> list[Any]:
    with app.extensions["trellis"].engine.connect() as connection:
        return list(connection.execute(statement))


def journal(app) -> set[str]:
    return {key for (key,) in rows(app, select(PendingBlob.key))}


def key_of_part(part: Path) -> str:
    """``ab/cd/.upload-<id>-<random>.part`` → ``ab/cd/<id>``."""
    return key_for(part.name.removeprefix(".upload-")[:32])


class Root:
    """The local storage root the servers and uploaders share."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def parts(self) -> set[Path]:
        return set(self.path.glob("*/*/.upload-*.part"))

    def blobs(self) -> set[str]:
        return {p.relative_to(self.path).as_posix() for p in self.path.glob("*/*/*") if not p.name.startswith(".")}

    def new_part(self, known: set[Path], size: int = 0) -> Path | None:
        """A part file not in ``known`` holding at least ``size`` bytes."""
        for part in self.parts() - known:
            with contextlib.suppress(FileNotFoundError):
                if part.stat().st_size >= size:
                    return part
        return None


def raw_upload(port: int, token: str, content: bytes) -> socket.socket:
    """A multipart upload sent on a socket of its own by a thread (the server may stop reading any time)."""
    boundary = "kill-test-boundary"
    body = b"".join(
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n'.encode(),
            b"Content-Type: application/octet-stream\r\n\r\n",
            content,
            f"\r\n--{boundary}--\r\n".encode(),
        )
    )
    head = (
        f"POST /storage/upload HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)

    def send() -> None:
        with contextlib.suppress(OSError):  # the server is killed under it
            sock.sendall(head.encode() + body)

    threading.Thread(target=send, daemon=True).start()
    return sock


@pytest.mark.long
def test_local_leftovers_of_killed_uploads_are_swept_at_start(live_server_factory, app, app_config, tmp_path):
    root = Root(tmp_path / "store")
    env = {"TRELLIS_STORAGE_PATH": str(root.path)}
    victim = live_server_factory(**env)
    user = create_user_over_http(victim.url)
    with uploaders(app_config, tmp_path, user.id, **env) as start:
        running, killed_writing, killed_recording = start(), start(), start()

        # Two uploads held mid-write (part file written, journal entry committed); one of them runs on.
        running.feed(HALF)
        running_part = wait_until(lambda: root.new_part(set(), 9 * MiB), "the running upload's part")
        killed_writing.feed(HALF)
        writing_part = wait_until(lambda: root.new_part({running_part}, 9 * MiB), "the second upload's part")

        # One killed with its blob in place, its record not saved: the record's insert waits for the lock.
        killed_recording.feed(SIZE - 1)
        late_key = key_of_part(wait_until(lambda: root.new_part({running_part, writing_part}, 19 * MiB), "a part"))
        with writes_held(app):
            killed_recording.end_input()
            wait_until(lambda: late_key in root.blobs(), "the blob of the upload that is saving its record")
            killed_recording.kill()
        killed_writing.kill()

        # The server, with 20 MB uploads arriving on raw sockets, killed once one is storing (its journal
        # entry waits for the lock; on SQLite that holds the whole process, so the others are mid-body).
        with writes_held(app):
            sockets = [raw_upload(victim.port, user.access_token, os.urandom(SIZE)) for _ in range(3)]
            victim_part = wait_until(lambda: root.new_part({running_part, writing_part}), "the server's part file")
            victim.process.send_signal(signal.SIGKILL)
            victim.process.wait(30)
        for sock in sockets:
            sock.close()

        running_key = key_of_part(running_part)
        assert {writing_part, victim_part} <= root.parts() and late_key in root.blobs()  # what was left
        assert journal(app) == {running_key, key_of_part(writing_part), late_key}
        assert rows(app, select(File.id)) == []

        live_server_factory(**env)  # a new server on the same root and database: it sweeps at start
        wait_until(
            lambda: root.parts() == {running_part} and not root.blobs() and journal(app) == {running_key},
            "the start-up sweep to leave only the running upload",
        )

        file_id = running.finish()  # undisturbed: it completes, whole
        assert key_for(file_id) == running_key
        assert rows(app, select(File.id, File.sha256)) == [(file_id, hashlib.sha256(running.content).hexdigest())]
        assert (root.path / running_key).read_bytes() == running.content
        assert root.blobs() == {running_key} and root.parts() == set() and journal(app) == set()


@pytest.mark.long
def test_s3_leftovers_of_killed_uploads_are_swept_at_start(
    live_server_factory, app, app_config, tmp_path, s3_bucket_settings, s3_admin
):
    s3 = s3_bucket_settings()
    bucket = s3["bucket"]
    with app.app_context():
        app.extensions["trellis"].configs.put("storage", {"provider": "s3", "s3": s3})

    def uploads() -> set[str]:
        return {u["Key"] for u in s3_admin.list_multipart_uploads(Bucket=bucket).get("Uploads", [])}

    def objects() -> set[str]:
        return {o["Key"] for o in s3_admin.list_objects_v2(Bucket=bucket).get("Contents", [])}

    def new_upload(known: set[str]) -> str | None:
        return next(iter(uploads() - known), None)

    with uploaders(app_config, tmp_path, trellis_db.new_id()) as start:
        running, killed_writing, killed_recording = start(), start(), start()
        running.feed(HALF)  # 9 MiB stored: the first part of a multipart upload is up
        running_key = wait_until(lambda: new_upload(set()), "the running upload's multipart upload")
        killed_writing.feed(HALF)
        writing_key = wait_until(lambda: new_upload({running_key}), "the second multipart upload")
        killed_recording.feed(SIZE - 1)
        late_key = wait_until(lambda: new_upload({running_key, writing_key}), "the third multipart upload")
        with writes_held(app):
            killed_recording.end_input()
            wait_until(lambda: late_key in objects(), "the object of the upload that is saving its record")
            killed_recording.kill()
        killed_writing.kill()
        assert uploads() == {running_key, writing_key} and objects() == {late_key}
        assert journal(app) == {running_key, writing_key, late_key}

        # S3 cannot tell a dead writer from a live one: the killed uploads' entries are made older than any
        # upload may run; the running one's is fresh.
        old = trellis_db.utcnow() - S3_UPLOAD_GRACE - timedelta(hours=1)
        with app.extensions["trellis"].engine.begin() as connection:
            dead = PendingBlob.key.in_([writing_key, late_key])
            connection.execute(update(PendingBlob).where(dead).values(created_at=old))

        live_server_factory()  # sweeps at start
        wait_until(lambda: journal(app) == {running_key}, "the start-up sweep to leave only the running upload")
        assert uploads() == {running_key} and objects() == set()  # aborted and deleted; the running one kept

        file_id = running.finish()
        assert key_for(file_id) == running_key
        assert rows(app, select(File.id, File.sha256)) == [(file_id, hashlib.sha256(running.content).hexdigest())]
        assert objects() == {running_key} and uploads() == set() and journal(app) == set()
