"""Uploads in progress (tus) across a restore, counterexamples of the round-trip property
(``test_backups_round_trip.py``): the archive holds the bytes each unfinished upload has stored, so after a
restore (on another server, across databases) HEAD answers the archive's offset and the client finishes the
upload from there with exactly its bytes; an upload finished or started after the backup leaves no bytes
behind. An archive without those bytes (made before backups carried them) gets a clear 410, never a 500."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trellis.testing.plugin import database_kind
from trellis_authentication.testing import UserAccount, create_user_with_client
from trellis_storage.backends import LocalBackend

from .backup_apps import (
    ADMIN,
    backup,
    make_app,  # noqa: F401  (the fixture)
    restore,
)


def _tus(user: UserAccount, **headers: str) -> dict[str, str]:
    return {**user.headers, "Tus-Resumable": "1.0.0", **headers}


def _append(client: Any, user: UserAccount, location: str, offset: int, data: bytes) -> Any:
    headers = _tus(user, **{"Upload-Offset": str(offset), "Content-Type": "application/offset+octet-stream"})
    return client.patch(location, headers=headers, data=data)


def _half_sent(app: Any) -> tuple[UserAccount, str]:
    client = app.test_client()
    user = create_user_with_client(client)
    made = client.post("/storage/uploads", headers=_tus(user, **{"Upload-Length": "20"}))
    assert made.status_code == 201, made.get_json()
    assert _append(client, user, made.headers["Location"], 0, b"0123456789").status_code == 204
    return user, made.headers["Location"]


def _continued(client: Any, user: UserAccount, location: str) -> None:
    """A client continuing after the restore: the archive's offset, then the file of exactly the bytes sent."""
    state = client.head(location, headers=_tus(user))
    assert state.status_code == 200, state.get_json()
    assert state.headers["Upload-Offset"] == "10"
    answer = _append(client, user, location, 10, b"abcdefghij")
    assert answer.status_code == 204, answer.get_json()
    made = answer.headers["Trellis-File-Id"]
    download = client.get(f"/storage/download/{made}", headers=user.headers)
    assert download.data == b"0123456789abcdefghij"


def _other_kind() -> str:
    return "postgresql" if database_kind() == "sqlite" else "sqlite"


def _stored(app: Any) -> list[str]:
    """What the app's storage directory holds."""
    return LocalBackend(app.config["STORAGE_PATH"]).keys()


def test_an_upload_in_progress_continues_after_a_restore_on_another_server(make_app, tmp_path):
    here = make_app(database_kind())
    user, location = _half_sent(here)
    manifest = backup(here, tmp_path / "moved.zip")
    upload_id = location.rsplit("/", 1)[-1]
    assert {"name": f"storage/uploads/{upload_id}", "size": 10} in [
        {"name": f["name"], "size": f["size"]} for f in manifest["files"]
    ]
    there = make_app(_other_kind())
    restore(there, tmp_path / "moved.zip")
    _continued(there.test_client(), user, location)
    assert _stored(there) == [f"{upload_id[:2]}/{upload_id[2:4]}/{upload_id}"]  # the file's blob, nothing else


def test_an_upload_finished_after_the_backup_continues_after_the_restore(make_app, tmp_path):
    app = make_app(database_kind())
    user, location = _half_sent(app)
    backup(app, tmp_path / "half.zip")
    client = app.test_client()
    assert _append(client, user, location, 10, b"ABCDEFGHIJ").status_code == 204  # finished: a file now
    restore(app, tmp_path / "half.zip")
    upload_id = location.rsplit("/", 1)[-1]
    key = f"{upload_id[:2]}/{upload_id[2:4]}/{upload_id}"
    assert _stored(app) == [f"{key}.tus"]  # the finished file's blob is gone with its record
    _continued(client, user, location)
    assert _stored(app) == [key]


def test_an_upload_started_or_continued_after_the_backup_leaves_no_bytes_behind(make_app, tmp_path):
    app = make_app(database_kind())
    user, location = _half_sent(app)
    backup(app, tmp_path / "before.zip")
    client = app.test_client()
    _, later = _half_sent(app)
    assert _append(client, user, location, 10, b"ABCDE").status_code == 204  # 15 of 20 now
    restore(app, tmp_path / "before.zip")
    upload_id = location.rsplit("/", 1)[-1]
    assert _stored(app) == [f"{upload_id[:2]}/{upload_id[2:4]}/{upload_id}.tus"]  # the later upload's part went
    assert client.head(later, headers=_tus(user)).status_code == 404
    _continued(client, user, location)


def test_partial_uploads_become_their_file_after_a_restore_on_another_server(make_app, tmp_path):
    """tus ``concatenation`` (parallel uploads): the partial uploads' bytes travel too; one half-sent one is
    finished after the restore, then the final upload is made of both."""
    here = make_app(database_kind())
    client = here.test_client()
    user = create_user_with_client(client)
    locations = []
    for size in (6, 8):
        made = client.post(
            "/storage/uploads", headers=_tus(user, **{"Upload-Length": str(size), "Upload-Concat": "partial"})
        )
        assert made.status_code == 201, made.get_json()
        locations.append(made.headers["Location"])
    assert _append(client, user, locations[0], 0, b"hello ").status_code == 204
    assert _append(client, user, locations[1], 0, b"wor").status_code == 204
    backup(here, tmp_path / "parts.zip")
    there = make_app(_other_kind())
    restore(there, tmp_path / "parts.zip")
    client = there.test_client()
    assert client.head(locations[1], headers=_tus(user)).headers["Upload-Offset"] == "3"
    assert _append(client, user, locations[1], 3, b"ld!!!").status_code == 204
    metadata = "filename aGVsbG8udHh0"  # hello.txt
    final = client.post(
        "/storage/uploads",
        headers=_tus(user, **{"Upload-Concat": "final;" + " ".join(locations), "Upload-Metadata": metadata}),
    )
    assert final.status_code == 201, final.get_json()
    made = final.headers["Trellis-File-Id"]
    assert client.get(f"/storage/download/{made}", headers=user.headers).data == b"hello world!!!"


def _without_upload_bytes(source: Path, target: Path) -> None:
    """The archive as a backup made before backups carried uploads' bytes: the same, without them."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        manifest = json.loads(old.read("manifest.json"))
        manifest["files"] = [f for f in manifest["files"] if not f["name"].startswith("storage/uploads/")]
        for name in old.namelist():
            if name != "manifest.json" and not name.startswith("files/storage/uploads/"):
                new.writestr(name, old.read(name))
        new.writestr("manifest.json", json.dumps(manifest))


def test_an_archive_without_an_uploads_bytes_answers_410_not_500(make_app, tmp_path):
    here = make_app(database_kind())
    user, location = _half_sent(here)
    client = here.test_client()
    made = client.post("/storage/uploads", headers=_tus(user, **{"Upload-Length": "4", "Upload-Concat": "partial"}))
    partial = made.headers["Location"]
    assert _append(client, user, partial, 0, b"half").status_code == 204
    backup(here, tmp_path / "full.zip")
    _without_upload_bytes(tmp_path / "full.zip", tmp_path / "older.zip")
    there = make_app(_other_kind())
    restore(there, tmp_path / "older.zip")
    client = there.test_client()
    for answer in (
        client.head(location, headers=_tus(user)),
        _append(client, user, location, 10, b"abcdefghij"),
        client.post("/storage/uploads", headers=_tus(user, **{"Upload-Concat": f"final;{partial}"})),
        client.head(partial, headers=_tus(user)),
    ):
        assert answer.status_code == 410, (answer.status_code, answer.get_json())
        assert answer.headers["Tus-Resumable"] == "1.0.0"
    error = _append(client, user, location, 10, b"abcdefghij").get_json()
    assert error["name"] == "GONE" and "start the upload again" in error["message"]
    # Starting again works, and ending the gone upload does too.
    assert client.delete(location, headers=_tus(user)).status_code == 204
    fresh = client.post("/storage/uploads", headers=_tus(user, **{"Upload-Length": "3"}))
    assert _append(client, user, fresh.headers["Location"], 0, b"abc").status_code == 204


@pytest.fixture()
def s3(make_app: Any) -> Iterator[tuple[Any, dict[str, Any]]]:
    """moto's S3 server on 127.0.0.1 with one bucket: its client and the Storage module's settings for it."""
    import boto3
    from moto.server import ThreadedMotoServer

    from trellis.testing.plugin import free_port

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    keys = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing-secret"}
    client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1", **keys)
    client.create_bucket(Bucket="trellis-uploads-test")
    settings = {
        "bucket": "trellis-uploads-test",
        "region": "us-east-1",
        "endpointUrl": f"http://127.0.0.1:{port}",
        "accessKeyId": keys["aws_access_key_id"],
        "secretAccessKey": keys["aws_secret_access_key"],
    }
    try:
        yield client, settings
    finally:
        server.stop()


def test_s3_uploads_in_progress_across_a_restore(make_app, s3, tmp_path):
    """S3: an upload whose bytes are all in its unfinished part travels in the archive and continues after
    the restore; one past its first S3 part cannot be read back from S3 before it is completed, so after a
    restore that lost it (finished since, its file dropped) it answers 410, and starting again works."""
    bucket, settings = s3
    app = make_app(database_kind())
    client = app.test_client()
    assert client.put("/config/storage", headers=ADMIN, json={"provider": "s3", "s3": settings}).status_code == 200
    user, small = _half_sent(app)
    big_size = 6 * 1024 * 1024
    made = client.post("/storage/uploads", headers=_tus(user, **{"Upload-Length": str(big_size + 10)}))
    big = made.headers["Location"]
    assert _append(client, user, big, 0, b"x" * big_size).status_code == 204
    manifest = backup(app, tmp_path / "s3.zip")
    carried = {f["name"] for f in manifest["files"]}
    assert f"storage/uploads/{small.rsplit('/', 1)[-1]}" in carried
    assert f"storage/uploads/{big.rsplit('/', 1)[-1]}" not in carried
    assert _append(client, user, small, 10, b"ABCDEFGHIJ").status_code == 204  # both finished: files now
    assert _append(client, user, big, big_size, b"y" * 10).status_code == 204
    restore(app, tmp_path / "s3.zip")
    _continued(client, user, small)
    gone = client.head(big, headers=_tus(user))
    assert gone.status_code == 410, gone.get_json()
    assert _append(client, user, big, big_size, b"y" * 10).status_code == 410
    assert client.delete(big, headers=_tus(user)).status_code == 204
    small_id = small.rsplit("/", 1)[-1]
    listed = [o["Key"] for o in bucket.list_objects_v2(Bucket=settings["bucket"]).get("Contents", [])]
    assert listed == [f"{small_id[:2]}/{small_id[2:4]}/{small_id}"]  # no unfinished part or dropped file left
    assert bucket.list_multipart_uploads(Bucket=settings["bucket"]).get("Uploads", []) == []


def test_a_head_while_chunks_are_stored_is_never_told_the_bytes_are_gone(make_app, s3):
    """S3: each chunk replaces the upload's unfinished part by a new object and removes the old one, so a HEAD
    that read the row just before may find the part it names gone. That is not a lost upload: over many chunks
    and HEADs in between, no HEAD answers anything but 200."""
    import threading

    _, settings = s3
    app = make_app(database_kind())
    client = app.test_client()
    assert client.put("/config/storage", headers=ADMIN, json={"provider": "s3", "s3": settings}).status_code == 200
    user = create_user_with_client(client)
    chunks = 60
    made = client.post("/storage/uploads", headers=_tus(user, **{"Upload-Length": str(chunks * 100)}))
    location = made.headers["Location"]
    done = threading.Event()
    answers: list[int] = []

    def inspect() -> None:
        head = app.test_client()
        while not done.is_set():
            answers.append(head.head(location, headers=_tus(user)).status_code)

    watcher = threading.Thread(target=inspect)
    watcher.start()
    try:
        for n in range(chunks - 1):  # the last one finishes the upload, which a HEAD may do too (a 423 then)
            sent = _append(client, user, location, n * 100, bytes([n]) * 100)
            assert sent.status_code == 204, sent.get_json()
    finally:
        done.set()
        watcher.join()
    assert len(answers) > chunks and set(answers) == {200}, sorted(set(answers))
    last = _append(client, user, location, (chunks - 1) * 100, bytes([chunks - 1]) * 100)
    download = client.get(f"/storage/download/{last.headers['Trellis-File-Id']}", headers=user.headers)
    assert download.data == b"".join(bytes([n]) * 100 for n in range(chunks))
