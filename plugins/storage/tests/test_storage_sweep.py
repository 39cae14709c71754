"""The sweep (``journal.sweep``, run at start and every 10 minutes by each serving process) in this process:
part files and journal entries that no live writer holds are removed whatever their age, the others kept.
What killed server processes leave is in ``test_storage_kills.py``."""

from __future__ import annotations

import os
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, update

from trellis import db as trellis_db
from trellis.testing.plugin import free_port
from trellis_storage import journal
from trellis_storage.backends import S3_PART_SIZE, LocalBackend, key_for, remove_stale_parts
from trellis_storage.models import File, PendingBlob

from .conftest import s3_settings


def _dead_part(root: Path, age_seconds: float = 0) -> Path:
    """A part file as a killed upload leaves it: next to its target, nobody holding its lock."""
    folder = root / "ab" / "cd"
    folder.mkdir(parents=True, exist_ok=True)
    part = folder / f".upload-abcd{uuid.uuid4().hex[:28]}-killed.part"
    part.write_bytes(b"x" * 1024)
    moment = time.time() - age_seconds
    os.utime(part, (moment, moment))
    return part


def _journal(backend, key: str, reason: str = "upload") -> str:
    """A journal entry as an upload (or a delete) commits it."""
    entry = PendingBlob(reason=reason, backend=backend.name, location=backend.location, key=key)
    trellis_db.session.add(entry)
    trellis_db.session.commit()
    return entry.id


def _entries() -> set[str]:
    return set(trellis_db.session.execute(select(PendingBlob.key)).scalars())


def test_uploads_and_deletes_that_finish_leave_no_journal_entry(client, storage, user, upload):
    kept, deleted = (upload(user.headers).get_json()["id"] for _ in range(2))
    assert client.delete(f"/storage/file/{deleted}", headers=user.headers).status_code == 200
    assert _entries() == set() and storage.keys() == [key_for(kept)]


def test_parts_are_removed_unless_a_live_writer_holds_them(tmp_path):
    root = tmp_path / "storage"
    fresh, old = _dead_part(root), _dead_part(root, age_seconds=86400)
    writing = LocalBackend(root).writer(key_for(uuid.uuid4().hex), "application/octet-stream")
    writing.write(b"still coming")
    stored = root / "ab" / "cd" / ("abcd" + "0" * 28)  # a stored file is never touched
    stored.write_bytes(b"kept")
    assert remove_stale_parts(root) == 2
    assert not fresh.exists() and not old.exists() and stored.exists()
    [part] = root.glob("*/*/.upload-*.part")  # the live writer's, whatever its age
    writing.commit()
    writing.close()
    assert not part.exists()


def test_the_sweep_covers_the_storage_path_and_the_configured_local_root(app, storage):
    if storage.kind != "local":
        pytest.skip("a local root's part files")
    configured = _dead_part(Path(storage.settings["local"]["path"]))
    default = _dead_part(Path(app.config["STORAGE_PATH"]))
    journal.sweep()
    assert not configured.exists() and not default.exists()


def test_local_entries_are_settled_once_no_process_holds_their_files(storage, user, upload):
    if storage.kind != "local":
        pytest.skip("local liveness is a lock (S3's is an age, below)")
    backend = storage.backend()
    dead_key, live_key = key_for(uuid.uuid4().hex), key_for(uuid.uuid4().hex)
    dead = backend.writer(dead_key, "application/octet-stream")
    dead.write(b"killed after its blob was written")
    dead.commit()
    dead.close()  # what the kernel does to a killed writer's lock
    live = backend.writer(live_key, "application/octet-stream")
    live.write(b"blob written, record not saved yet")
    live.commit()  # renamed into place, still locked: its record is being saved
    recorded = upload(user.headers).get_json()["id"]  # an entry whose record exists never costs the blob
    for key in (dead_key, live_key, key_for(recorded)):
        _journal(backend, key)

    assert journal.sweep() == 2
    assert _entries() == {live_key}
    assert sorted(backend.keys()) == sorted([live_key, key_for(recorded)])
    live.close()
    assert journal.sweep() == 1
    assert _entries() == set() and backend.keys() == [key_for(recorded)]


def test_s3_entries_of_uploads_are_settled_after_the_grace(storage):
    if storage.kind != "s3":
        pytest.skip("S3 cannot tell a live writer: the age of the entry decides")
    backend = storage.backend()
    key = key_for(uuid.uuid4().hex)
    writer = backend.writer(key, "application/octet-stream")
    writer.write(b"x" * (S3_PART_SIZE + 1))  # one part is up: an unfinished multipart upload
    entry = _journal(backend, key)
    assert journal.sweep() == 0 and len(backend.keys()) == 1  # maybe still running

    old = trellis_db.utcnow() - journal.S3_UPLOAD_GRACE - timedelta(minutes=1)
    trellis_db.session.execute(update(PendingBlob).where(PendingBlob.id == entry).values(created_at=old))
    trellis_db.session.commit()
    assert journal.sweep() == 1
    assert backend.keys() == [] and _entries() == set()  # the multipart upload is aborted


def test_a_blob_left_by_a_delete_during_an_s3_outage_is_removed_by_the_sweep(client, storage, user, upload, s3_admin):
    """S3 is down when the record is deleted: the blob stays, its journal entry too, until a sweep after S3 is back."""
    if storage.kind != "s3":
        pytest.skip("an S3 outage")
    from moto.server import ThreadedMotoServer

    port = free_port()  # an S3 endpoint of this test's own, to stop; moto keeps its buckets across restarts
    outage = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    outage.start()
    bucket = storage.settings["s3"]["bucket"]
    storage.configure(s3=s3_settings(f"http://127.0.0.1:{port}", bucket))
    file_id = upload(user.headers).get_json()["id"]
    outage.stop()
    try:
        assert client.delete(f"/storage/file/{file_id}", headers=user.headers).status_code == 200
        assert trellis_db.session.get(File, file_id) is None
        assert _entries() == {key_for(file_id)}
    finally:
        outage = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        outage.start()
    try:
        assert [o["Key"] for o in s3_admin.list_objects_v2(Bucket=bucket).get("Contents", [])] == [key_for(file_id)]
        assert journal.sweep() == 1
        assert storage.keys() == [] and _entries() == set()
    finally:
        outage.stop()
