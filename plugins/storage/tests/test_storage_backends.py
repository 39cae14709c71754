"""The backends on their own (real disk, moto's S3 server) and the naming / sniffing helpers."""

from __future__ import annotations

import os
import uuid

import pytest

from trellis_storage.backends import (
    S3_PART_SIZE,
    BackendError,
    LocalBackend,
    S3Backend,
    S3Clients,
    UnsafeKey,
    check_key,
    key_for,
)
from trellis_storage.config import type_allowed
from trellis_storage.service import display_name, safe_name, sniff


def a_key() -> str:
    return key_for(uuid.uuid4().hex)


@pytest.mark.parametrize(
    "key",
    [
        "../../etc/passwd",
        "/etc/passwd",
        "ab/cd/../../../../etc/passwd",
        "ab/cd/" + "0" * 31,
        "AB/CD/" + "0" * 32,
        "ab/cd/" + "0" * 32 + "/..",
        "",
    ],
)
def test_keys_that_are_not_ours_are_refused(tmp_path, key):
    backend = LocalBackend(tmp_path)
    with pytest.raises(UnsafeKey):
        backend.path(key)
    with pytest.raises(UnsafeKey):
        backend.writer(key, "text/plain")
    with pytest.raises(UnsafeKey):
        check_key(key)


def test_a_symlink_out_of_the_root_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    key = a_key()
    os.symlink(outside, root / key[:2])
    with pytest.raises(UnsafeKey):
        LocalBackend(root).path(key)
    with pytest.raises(UnsafeKey):
        LocalBackend(root).writer(key, "text/plain")
    assert list(outside.iterdir()) == []


def test_local_write_is_atomic(tmp_path):
    backend = LocalBackend(tmp_path)
    key = a_key()
    writer = backend.writer(key, "application/octet-stream")
    writer.write(b"first part, ")
    assert not backend.path(key).exists()  # readers never see a half-written file
    [temp] = backend.keys()
    assert temp.startswith(f"{key[:5]}/.upload-") and temp.endswith(".part")  # beside its target
    writer.write(b"second part")
    writer.commit()
    assert backend.keys() == [key]
    assert backend.path(key).read_bytes() == b"first part, second part"
    assert b"".join(backend.read(key, 6, 10)) == b"part"
    assert b"".join(backend.read(key, 12)) == b"second part"


def test_reads_come_in_chunks_and_can_stop_early(tmp_path):
    backend = LocalBackend(tmp_path)
    key = a_key()
    writer = backend.writer(key, "application/octet-stream")
    writer.write(b"a" * (600 * 1024))
    writer.commit()
    assert [len(c) for c in backend.read(key)] == [256 * 1024, 256 * 1024, 88 * 1024]
    assert [len(c) for c in backend.read(key, 100, 300 * 1024)] == [256 * 1024, 44 * 1024 - 100]
    chunks = backend.read(key)
    next(chunks)
    chunks.close()  # a HEAD request or a client that hung up
    assert list(chunks) == []


def test_local_abort_leaves_nothing(tmp_path):
    backend = LocalBackend(tmp_path)
    writer = backend.writer(a_key(), "text/plain")
    writer.write(b"x" * 1000)
    writer.abort()
    assert backend.keys() == []


def test_local_read_of_a_missing_file_is_a_backend_error(tmp_path):
    with pytest.raises(BackendError):
        LocalBackend(tmp_path).read(a_key())
    LocalBackend(tmp_path).delete(a_key())  # deleting what is not there is fine


@pytest.fixture(scope="module")
def clients() -> S3Clients:
    return S3Clients()


@pytest.fixture()
def s3(s3_bucket_settings, clients) -> S3Backend:
    settings = s3_bucket_settings()
    return S3Backend(clients.get(settings), settings["bucket"])


def test_s3_large_file_goes_up_in_parts(s3):
    key = a_key()
    content = os.urandom(S3_PART_SIZE) + b"tail"
    writer = s3.writer(key, "application/x-test")
    for start in range(0, len(content), 1024 * 1024):
        writer.write(content[start : start + 1024 * 1024])
    writer.commit()
    head = s3.client.head_object(Bucket=s3.location, Key=key)
    assert head["ContentLength"] == len(content) and head["ContentType"] == "application/x-test"
    assert head["ETag"].strip('"').endswith("-2")  # two parts: a multipart upload
    assert b"".join(s3.read(key)) == content
    assert b"".join(s3.read(key, S3_PART_SIZE)) == b"tail"
    assert b"".join(s3.read(key, 10, 20)) == content[10:20]
    assert s3.keys() == [key]
    s3.delete(key)
    assert s3.keys() == []


def test_s3_abort_removes_the_unfinished_upload(s3):
    writer = s3.writer(a_key(), "application/octet-stream")
    writer.write(b"x" * (S3_PART_SIZE + 1))  # one part is up already
    assert len(s3.keys()) == 1  # the unfinished multipart upload counts
    writer.abort()
    assert s3.keys() == []


def test_s3_errors_carry_the_code_not_the_credentials(s3_endpoint, clients):
    settings = {"bucket": "missing", "endpointUrl": s3_endpoint, "accessKeyId": "AKIA-ID", "secretAccessKey": "s3cr3t"}
    backend = S3Backend(clients.get(settings), "missing-bucket")
    with pytest.raises(BackendError) as raised:
        backend.writer(a_key(), "text/plain").commit()
    assert "NoSuchBucket" in str(raised.value) and "s3cr3t" not in str(raised.value)
    with pytest.raises(BackendError):
        backend.read(a_key())


def test_s3_clients_are_reused_per_configuration(s3_endpoint):
    clients = S3Clients()
    one = {"endpointUrl": s3_endpoint, "accessKeyId": "a", "secretAccessKey": "b", "region": "us-east-1"}
    assert clients.get(one) is clients.get(dict(one, bucket="other"))
    assert clients.get(one) is not clients.get(dict(one, secretAccessKey="c"))


@pytest.mark.parametrize(
    "given, display, safe",
    [
        ("report.pdf", "report.pdf", "report.pdf"),
        ("../../etc/passwd", "passwd", "passwd"),
        ("C:\\Users\\me\\photo.JPG", "photo.JPG", "photo.JPG"),
        ("..", "file", "file"),
        ("", "file", "file"),
        (None, "file", "file"),
        (".bashrc", "bashrc", "bashrc"),
        ("na\x00me\r\n.txt", "name.txt", "name.txt"),
        ("Grüße aus Köln.txt", "Grüße aus Köln.txt", "Grue_aus_Koln.txt"),
        ("写真.png", "写真.png", "file.png"),
        ("a" * 300 + ".txt", "a" * 251 + ".txt", "a" * 251 + ".txt"),
    ],
)
def test_names(given, display, safe):
    assert display_name(given) == display
    assert safe_name(display) == safe


@pytest.mark.parametrize(
    "head, name, expected",
    [
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * 30, "x.txt", "image/png"),
        (b"\xff\xd8\xff\xe0" + b"\x00" * 30, "x", "image/jpeg"),
        (b"GIF89a" + b"\x00" * 30, "x.png", "image/gif"),
        (b"%PDF-1.7", "x.exe", "application/pdf"),
        (b"PK\x03\x04" + b"\x00" * 30, "x.txt", "application/zip"),
        (b"<html><script>", "page.html", "text/html"),
        (b"a,b\n1,2", "data.csv", "text/csv"),
        (b"just text", "fake.png", "application/octet-stream"),  # the name claims a type the bytes deny
        (b"just text", "no-extension", "application/octet-stream"),
        (b"", "empty.txt", "text/plain"),
    ],
)
def test_sniffing(head, name, expected):
    assert sniff(head, name) == expected


def test_type_patterns():
    assert type_allowed("image/png", [])
    assert type_allowed("image/png", ["image/*"])
    assert type_allowed("image/png", ["IMAGE/PNG"])
    assert type_allowed("text/plain", ["*/*"])
    assert not type_allowed("text/plain", ["image/*", "application/pdf"])
    assert not type_allowed("image/png", ["image/jpeg"])
