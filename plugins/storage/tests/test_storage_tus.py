"""Resumable uploads over tus 1.0.0 (``/storage/uploads``), in-process, on both backends: the protocol's
answers, chunks of any size (S3 parts of at least 5 MiB, the rest kept aside), completion through the same
record as ``POST /storage/upload``, ownership, bad headers and bodies, checksums, termination and expiry.
Every refusal leaves the upload as it was acknowledged, and every removal leaves nothing in the backend."""

from __future__ import annotations

import base64
import hashlib
import io
import os
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from trellis import db as trellis_db
from trellis import events as trellis_events
from trellis_storage import upload_expiry, uploads
from trellis_storage.models import File, Upload

TUS = {"Tus-Resumable": "1.0.0"}
STREAM = "application/offset+octet-stream"
MiB = 1024 * 1024


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def metadata(**pairs: str) -> str:
    return ",".join(f"{k} {b64(v)}" for k, v in pairs.items())


class Tus:
    """A tus client over the Flask test client, for one user."""

    def __init__(self, client, headers):
        self.client = client
        self.headers = {**headers, **TUS}

    def create(self, length: int, body: bytes | None = None, **meta: str):
        headers = {**self.headers, "Upload-Length": str(length)}
        if meta:
            headers["Upload-Metadata"] = metadata(**meta)
        if body is None:
            return self.client.post("/storage/uploads", headers=headers)
        return self.client.post("/storage/uploads", headers=headers, data=body, content_type=STREAM)

    def location(self, length: int, **meta: str) -> str:
        response = self.create(length, **meta)
        assert response.status_code == 201, response.get_json()
        return response.headers["Location"].replace("http://localhost", "")

    def patch(self, url: str, offset: int, body: bytes, **headers: str):
        return self.client.patch(
            url, headers={**self.headers, "Upload-Offset": str(offset), **headers}, data=body, content_type=STREAM
        )

    def head(self, url: str):
        return self.client.head(url, headers=self.headers)

    def send(self, url: str, content: bytes, chunk: int):
        response = None
        for start in range(0, len(content), chunk):
            response = self.patch(url, start, content[start : start + chunk])
            assert response.status_code == 204, response.get_json()
            assert response.headers["Upload-Offset"] == str(min(start + chunk, len(content)))
        return response


@pytest.fixture()
def tus(client, user):
    return Tus(client, user.headers)


def only_blob(storage, file_id: str) -> None:
    """The backend holds the file's blob and nothing else (no part file, tail or multipart upload)."""
    assert storage.keys() == [f"{file_id[:2]}/{file_id[2:4]}/{file_id}"]


# ------------------------------------------------------------------------------------------ protocol


def test_options_lists_the_capabilities_without_credentials(client, storage):
    storage.configure(maxFileSize=123456)
    response = client.options("/storage/uploads")
    assert response.status_code == 204
    assert response.headers["Tus-Version"] == "1.0.0" and response.headers["Tus-Resumable"] == "1.0.0"
    assert set(response.headers["Tus-Extension"].split(",")) == {
        "creation",
        "creation-with-upload",
        "termination",
        "expiration",
        "checksum",
        "concatenation",
    }
    assert response.headers["Tus-Max-Size"] == "123456"
    assert response.headers["Tus-Checksum-Algorithm"] == "sha1"


def test_chunked_upload_creates_the_file_as_a_form_upload_would(client, storage, tus, user, admin_headers):
    folder = client.post("/storage/folder", json={"name": "videos", "isPublic": True}, headers=user.headers)
    folder_id = folder.get_json()["_id"]
    content = os.urandom(2 * MiB + 77)
    url = tus.location(len(content), filename="clip ü.bin", filetype="video/mp4", folder=folder_id)

    head = tus.head(url)
    assert head.status_code == 200
    assert head.headers["Upload-Offset"] == "0" and head.headers["Upload-Length"] == str(len(content))
    assert head.headers["Upload-Expires"].endswith("GMT") and head.headers["Cache-Control"] == "no-store"
    assert "Trellis-File-Id" not in head.headers

    last = tus.send(url, content, 700 * 1024)  # uneven chunks: on S3 all but the last stay under 5 MiB
    file_id = last.headers["Trellis-File-Id"]
    assert "Upload-Expires" not in last.headers
    assert tus.head(url).headers["Trellis-File-Id"] == file_id

    record = client.get(f"/storage/file/{file_id}", headers=user.headers).get_json()
    assert record["displayName"] == "clip ü.bin" and record["name"] == "clip_u.bin"
    assert record["owner"] == user.id and record["folder"] == folder_id
    assert record["isPublic"] is True  # the folder's, as a form upload into it
    assert record["size"] == len(content) and record["sha256"] == hashlib.sha256(content).hexdigest()
    assert record["contentType"] == "application/octet-stream"  # sniffed; the client's filetype is ignored
    assert record["provider"] == storage.kind
    assert client.get(f"/storage/download/{file_id}", headers=user.headers).data == content
    only_blob(storage, file_id)

    recorded = trellis_events.recorded()
    events = trellis_db.session.execute(select(recorded.c.topic).where(recorded.c.topic == "storage.file.create")).all()
    assert len(events) >= 1


def test_s3_parts_are_at_least_five_mebibytes_and_the_hash_is_read_back_when_needed(client, storage, tus, user, app):
    """Chunks of 3 MiB: S3 gets parts of 6 MiB (two chunks each) plus the last. The running hash is dropped
    half-way (another process took a chunk): the SHA-256 is then read back from the stored bytes."""
    content = os.urandom(13 * MiB + 5)
    url = tus.location(len(content), filename="big.bin")
    upload_id = url.rsplit("/", 1)[1]
    for start in range(0, len(content), 3 * MiB):
        if start == 6 * MiB:
            app.extensions["trellis_storage"].running_hashes.forget(upload_id)
        response = tus.patch(url, start, content[start : start + 3 * MiB])
        assert response.status_code == 204, response.get_json()
        row = trellis_db.session.get(Upload, upload_id)
        if row is not None and row.file_id is None and storage.kind == "s3":
            assert row.tail_size == (row.offset % (6 * MiB))  # a tail under 5 MiB waits for the next chunk
            assert [k for k in storage.keys() if ".t" in k] == ([row.tail_key] if row.tail_size else [])
    file_id = response.headers["Trellis-File-Id"]
    record = client.get(f"/storage/file/{file_id}", headers=user.headers).get_json()
    assert record["sha256"] == hashlib.sha256(content).hexdigest()
    assert client.get(f"/storage/download/{file_id}", headers=user.headers).data == content
    only_blob(storage, file_id)


def test_creation_with_upload_and_a_whole_file_in_one_request(client, storage, tus, user, png):
    response = tus.create(len(png), body=png, filename="dot.png", isPublic="true")
    assert response.status_code == 201, response.get_json()
    file_id = response.headers["Trellis-File-Id"]
    assert response.headers["Upload-Offset"] == str(len(png))
    record = client.get(f"/storage/file/{file_id}", headers=user.headers).get_json()
    assert record["contentType"] == "image/png" and record["isPublic"] is True

    partial = tus.create(10, body=b"12345", filename="half.txt")
    assert partial.status_code == 201 and partial.headers["Upload-Offset"] == "5"
    url = partial.headers["Location"].replace("http://localhost", "")
    assert tus.patch(url, 5, b"67890").status_code == 204


def test_an_empty_file(client, storage, tus, user):
    url = tus.location(0, filename="empty.txt")
    head = tus.head(url)  # nothing to wait for: inspecting it finishes it
    file_id = head.headers["Trellis-File-Id"]
    assert client.get(f"/storage/file/{file_id}", headers=user.headers).get_json()["size"] == 0
    only_blob(storage, file_id)


def test_a_retried_last_request_is_harmless(storage, tus):
    url = tus.location(4, filename="a.txt")
    done = tus.patch(url, 0, b"abcd")
    again = tus.patch(url, 4, b"")
    assert again.status_code == 204 and again.headers["Trellis-File-Id"] == done.headers["Trellis-File-Id"]
    assert tus.patch(url, 0, b"abcd").status_code == 409


# ---------------------------------------------------------------------------------------- bad input


def test_wrong_offset_is_409_and_changes_nothing(storage, tus):
    url = tus.location(10, filename="a.txt")
    assert tus.patch(url, 0, b"12345").status_code == 204
    before = sorted(storage.keys())
    for offset in (0, 4, 6):
        wrong = tus.patch(url, offset, b"xxxxx")
        assert wrong.status_code == 409 and wrong.get_json()["name"] == "CONFLICT"
        assert "5" in wrong.get_json()["message"]
    assert tus.head(url).headers["Upload-Offset"] == "5"
    assert sorted(storage.keys()) == before


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Tus-Resumable": "0.2.2"}, 412),
        ({"Upload-Offset": "-1"}, 400),
        ({"Upload-Offset": "abc"}, 400),
        ({"Upload-Offset": "1e3"}, 400),
        ({"Upload-Checksum": "md5 AAAA"}, 400),
        ({"Upload-Checksum": "sha1 not*base64"}, 400),
        ({"Upload-Checksum": "sha1 " + base64.b64encode(b"short").decode()}, 400),
    ],
)
def test_bad_patch_headers(storage, tus, headers, status):
    url = tus.location(10, filename="a.txt")
    response = tus.patch(url, 0, b"12345", **headers)
    assert response.status_code == status, response.get_json()
    assert response.get_json()["status"] == status
    assert tus.head(url).headers["Upload-Offset"] == "0"


def test_head_repeats_upload_metadata_exactly_as_sent(client, storage, tus):
    """Every key, the ignored ones (filetype, Uppy's) included, in the client's order and spelling."""
    sent = f"filename {b64('report.bin')},filetype {b64('application/octet-stream')},isPublic {b64('false')},flag"
    for header in (sent, f"isPublic {b64('true')}, relativePath {b64('a/b.bin')}"):
        created = client.post(
            "/storage/uploads", headers={**tus.headers, "Upload-Length": "5", "Upload-Metadata": header}
        )
        assert created.status_code == 201, created.get_json()
        head = tus.head(created.headers["Location"].replace("http://localhost", ""))
        assert head.status_code == 200 and head.headers["Upload-Metadata"] == header
    plain = tus.head(tus.location(5))
    assert "Upload-Metadata" not in plain.headers


# ----------------------------------------------------------------------------------------- concatenation


def partial(tus, content: bytes, chunk: int = 2 * MiB, **meta: str) -> str:
    """A complete partial upload of ``content`` (sent in chunks); its URL."""
    headers = {**tus.headers, "Upload-Length": str(len(content)), "Upload-Concat": "partial"}
    if meta:
        headers["Upload-Metadata"] = metadata(**meta)
    created = tus.client.post("/storage/uploads", headers=headers)
    assert created.status_code == 201, created.get_json()
    url = created.headers["Location"].replace("http://localhost", "")
    if content:
        tus.send(url, content, chunk)
    return url


def final(tus, *urls: str, **meta: str):
    headers = {**tus.headers, "Upload-Concat": "final;" + " ".join(urls)}
    if meta:
        headers["Upload-Metadata"] = metadata(**meta)
    return tus.client.post("/storage/uploads", headers=headers)


def uploads_left() -> list[Upload]:
    trellis_db.session.rollback()
    return list(trellis_db.session.execute(select(Upload)).scalars())


def test_concatenation_makes_one_file_of_the_partial_uploads(client, storage, tus, user, png):
    """Two partial uploads (the first past S3's 5 MiB part, the second not a PNG by its own bytes, which
    ``allowedTypes`` would refuse), then the final one: exactly one file, named and typed as the whole, every byte
    once; the partial uploads' bytes are gone. A repeated final request answers the same file."""
    storage.configure(allowedTypes=["image/png"])
    first, second = png + os.urandom(6 * MiB), b"plain text " * 100_000
    url_a = partial(tus, first)
    url_b = partial(tus, second, chunk=len(second))
    assert tus.head(url_a).headers["Upload-Concat"] == "partial"
    assert not [r for r in uploads_left() if r.file_id is not None]  # a partial upload is never a file by itself

    sent = f"filename {b64('whole.png')},filetype {b64('image/png')}"
    response = client.post(
        "/storage/uploads",
        headers={**tus.headers, "Upload-Concat": f"final;http://localhost{url_a} {url_b}", "Upload-Metadata": sent},
    )
    assert response.status_code == 201, response.get_json()
    total = len(first) + len(second)
    assert response.headers["Upload-Offset"] == str(total) and response.headers["Upload-Length"] == str(total)
    file_id = response.headers["Trellis-File-Id"]
    final_url = response.headers["Location"].replace("http://localhost", "")
    assert final_url.endswith(file_id)

    record = client.get(f"/storage/file/{file_id}", headers=user.headers).get_json()
    assert (record["displayName"], record["size"], record["contentType"]) == ("whole.png", total, "image/png")
    assert record["sha256"] == hashlib.sha256(first + second).hexdigest()
    assert client.get(f"/storage/download/{file_id}", headers=user.headers).data == first + second
    assert trellis_db.session.execute(select(File)).scalars().all()[0].id == file_id
    assert len(trellis_db.session.execute(select(File)).all()) == 1
    only_blob(storage, file_id)  # no partial upload's bytes, tail or multipart upload left

    head = tus.head(final_url)
    assert head.headers["Upload-Concat"] == f"final;http://localhost{url_a} http://localhost{url_b}"
    assert head.headers["Upload-Metadata"] == sent and head.headers["Trellis-File-Id"] == file_id
    again = client.post(
        "/storage/uploads",
        headers={**tus.headers, "Upload-Concat": f"final;{url_a} {url_b}", "Upload-Metadata": sent},
    )
    assert again.status_code == 201 and again.headers["Trellis-File-Id"] == file_id
    assert len(trellis_db.session.execute(select(File)).all()) == 1
    only_blob(storage, file_id)
    assert tus.patch(final_url, total, b"x").status_code == 403


def test_a_final_upload_cut_short_is_taken_further_from_its_recorded_offset(client, storage, tus, user):
    """A request copying the partial uploads dies after the first (its progress recorded, as each chunk's is):
    a HEAD from any process copies only the rest and makes the file."""
    from trellis_storage import concatenation

    first, second = os.urandom(3 * MiB + 11), os.urandom(2 * MiB + 5)
    url_a, url_b = partial(tus, first), partial(tus, second)
    id_a, id_b = url_a.rsplit("/", 1)[1], url_b.rsplit("/", 1)[1]
    made = uploads.create(
        user.id, len(first) + len(second), {"filename": "cut.bin"}, "", concat="final", concat_parts=[id_a, id_b]
    )
    trellis_db.session.execute(update(Upload).where(Upload.id.in_([id_a, id_b])).values(concat_into=made.id))
    trellis_db.session.commit()
    made = concatenation._copy_part(made, trellis_db.session.get(Upload, id_a), 0, len(first))
    assert made.offset == len(first) and made.file_id is None

    head = tus.head(f"/storage/uploads/{made.id}")
    assert head.status_code == 200 and head.headers["Upload-Offset"] == str(len(first) + len(second))
    file_id = head.headers["Trellis-File-Id"]
    assert client.get(f"/storage/download/{file_id}", headers=user.headers).data == first + second
    only_blob(storage, file_id)


def test_concatenation_refusals_store_nothing_and_change_nothing(client, storage, tus, make_user):
    complete, unfinished = partial(tus, b"abcd"), tus.location(10, filename="whole.bin")
    half = tus.client.post(
        "/storage/uploads", headers={**tus.headers, "Upload-Length": "8", "Upload-Concat": "partial"}
    ).headers["Location"]
    tus.patch(half.replace("http://localhost", ""), 0, b"1234")
    other = Tus(client, make_user().headers)
    theirs = partial(other, b"theirs")
    for header, status in [
        ("whole", 400),
        ("final;", 400),
        ("final;/storage/other/abc", 400),
        (f"final;{complete} {complete}", 400),  # named twice
        (f"final;{complete} {unfinished}", 400),  # not a partial upload
        (f"final;{complete} {half}", 400),  # not complete
        (f"final;{complete} {theirs}", 400),  # somebody else's
        (f"final;{complete} /storage/uploads/{'0' * 32}", 400),  # unknown
    ]:
        response = client.post("/storage/uploads", headers={**tus.headers, "Upload-Concat": header})
        assert response.status_code == status, (header, response.get_json())
        assert "Upload-Concat" in response.get_json()["errors"], header
    body = client.post(
        "/storage/uploads",
        headers={**tus.headers, "Upload-Concat": f"final;{complete}"},
        data=b"xx",
        content_type=STREAM,
    )
    assert body.status_code == 400
    assert trellis_db.session.execute(select(File)).all() == []
    assert all(r.concat_into is None for r in uploads_left())

    done = final(tus, complete, filename="one.bin")
    assert done.status_code == 201
    assert final(tus, complete, half).status_code == 409  # already part of another final upload
    assert tus.client.delete(complete, headers=tus.headers).status_code == 409  # a part of a final upload
    assert "concatenation" in client.options("/storage/uploads").headers["Tus-Extension"].split(",")


def test_a_refused_final_upload_removes_its_partial_uploads_too(client, storage, tus):
    storage.configure(allowedTypes=["image/*"])
    url_a, url_b = partial(tus, b"plain text " * 1000), partial(tus, b"more text")
    refused = final(tus, url_a, url_b, filename="notes.txt")
    assert refused.status_code == 415 and "text/plain" in refused.get_json()["message"]
    assert trellis_db.session.execute(select(File)).all() == []
    assert storage.keys() == []
    assert [r.id for r in uploads_left() if r.concat != "partial"] == []


def test_missing_headers_and_wrong_content_type(client, storage, tus, user):
    url = tus.location(10, filename="a.txt")
    no_version = client.patch(url, headers={**user.headers, "Upload-Offset": "0"}, data=b"1", content_type=STREAM)
    assert no_version.status_code == 412 and no_version.headers["Tus-Version"] == "1.0.0"
    no_offset = client.patch(url, headers=tus.headers, data=b"1", content_type=STREAM)
    assert no_offset.status_code == 400 and "Upload-Offset" in no_offset.get_json()["errors"]
    wrong_type = client.patch(
        url, headers={**tus.headers, "Upload-Offset": "0"}, data=b"1", content_type="application/octet-stream"
    )
    assert wrong_type.status_code == 415

    for bad in ({}, {"Upload-Length": "-5"}, {"Upload-Length": "ten"}, {"Upload-Defer-Length": "1"}):
        response = client.post("/storage/uploads", headers={**tus.headers, **bad})
        assert response.status_code == 400, (bad, response.get_json())
    bad_meta = client.post(
        "/storage/uploads", headers={**tus.headers, "Upload-Length": "5", "Upload-Metadata": "filename ***"}
    )
    assert bad_meta.status_code == 400 and "Upload-Metadata" in bad_meta.get_json()["errors"]
    bad_public = tus.create(5, isPublic="maybe")
    assert bad_public.status_code == 400
    not_my_folder = tus.create(5, folder="0" * 32)
    assert not_my_folder.status_code == 400
    assert trellis_db.session.execute(select(Upload)).all() == [
        tuple(trellis_db.session.execute(select(Upload)).first())
    ]


def test_a_chunk_past_the_length_is_413_and_stores_nothing(storage, tus):
    url = tus.location(8, filename="a.txt")
    assert tus.patch(url, 0, b"1234").status_code == 204
    before = sorted(storage.keys())
    too_long = tus.patch(url, 4, b"567890")
    assert too_long.status_code == 413 and too_long.get_json()["name"] == "PAYLOAD_TOO_LARGE"
    assert tus.head(url).headers["Upload-Offset"] == "4" and sorted(storage.keys()) == before
    assert tus.create(20, body=b"x" * 21).status_code == 413


def test_checksums(storage, tus, client, user):
    url = tus.location(10, filename="a.txt")
    good = base64.b64encode(hashlib.sha1(b"12345").digest()).decode()
    bad = base64.b64encode(hashlib.sha1(b"other").digest()).decode()
    before = sorted(storage.keys())
    mismatch = tus.patch(url, 0, b"12345", **{"Upload-Checksum": f"sha1 {bad}"})
    assert mismatch.status_code == 460 and mismatch.get_json()["name"] == "CHECKSUM_MISMATCH"
    assert tus.head(url).headers["Upload-Offset"] == "0"
    assert sorted(k for k in storage.keys() if not k.endswith(".tus")) == before
    assert tus.patch(url, 0, b"12345", **{"Upload-Checksum": f"sha1 {good}"}).status_code == 204
    last = tus.patch(
        url, 5, b"67890", **{"Upload-Checksum": "sha1 " + base64.b64encode(hashlib.sha1(b"67890").digest()).decode()}
    )
    file_id = last.headers["Trellis-File-Id"]
    assert client.get(f"/storage/download/{file_id}", headers=user.headers).data == b"1234567890"
    only_blob(storage, file_id)


def test_over_max_file_size_is_413_at_creation(storage, tus):
    storage.configure(maxFileSize=1000)
    response = tus.create(1001, filename="big.bin")
    assert response.status_code == 413 and "1000" in response.get_json()["message"]
    assert tus.create(1000, filename="ok.bin").status_code == 201


def test_a_type_not_allowed_is_415_at_the_first_bytes_and_the_upload_goes(storage, tus, png):
    storage.configure(allowedTypes=["image/*"])
    url = tus.location(20000, filename="notes.txt")
    refused = tus.patch(url, 0, b"plain text " * 1000)
    assert refused.status_code == 415 and "text/plain" in refused.get_json()["message"]
    assert tus.head(url).status_code == 404
    assert storage.keys() == []
    image = tus.create(len(png), body=png, filename="a.png")
    assert image.status_code == 201 and "Trellis-File-Id" in image.headers


def test_only_the_creator_sees_an_upload(client, storage, tus, make_user, admin_headers):
    url = tus.location(10, filename="a.txt")
    assert tus.patch(url, 0, b"12345").status_code == 204
    other = Tus(client, make_user().headers)
    assert other.head(url).status_code == 404
    assert other.patch(url, 5, b"67890").status_code == 404
    assert client.delete(url, headers=other.headers).status_code == 404
    assert client.head(url, headers={**admin_headers, **TUS}).status_code == 403  # uploads belong to users
    assert client.head(url, headers=TUS).status_code == 401
    assert tus.head(url).headers["Upload-Offset"] == "5"
    assert client.head("/storage/uploads/" + "0" * 32, headers=tus.headers).status_code == 404


# --------------------------------------------------------------------------------- termination, expiry


def test_termination_removes_the_stored_bytes(client, storage, tus):
    url = tus.location(12 * MiB, filename="a.bin")
    assert tus.patch(url, 0, os.urandom(6 * MiB)).status_code == 204  # S3: a multipart upload with one part
    assert storage.keys() != []
    assert client.delete(url, headers=tus.headers).status_code == 204
    assert storage.keys() == []
    assert tus.head(url).status_code == 404
    assert client.delete(url, headers=tus.headers).status_code == 404


def test_a_finished_upload_cannot_be_terminated(client, storage, tus):
    url = tus.location(3, filename="a.txt")
    file_id = tus.patch(url, 0, b"abc").headers["Trellis-File-Id"]
    refused = client.delete(url, headers=tus.headers)
    assert refused.status_code == 409 and file_id in refused.get_json()["message"]
    only_blob(storage, file_id)


def test_expired_uploads_are_removed_by_one_sweep(client, storage, tus, user):
    unfinished = tus.location(12 * MiB, filename="a.bin")
    assert tus.patch(unfinished, 0, os.urandom(6 * MiB)).status_code == 204
    finished = tus.location(3, filename="b.txt")
    file_id = tus.patch(finished, 0, b"abc").headers["Trellis-File-Id"]
    assert upload_expiry.expire() == 0  # nothing is due yet

    past = trellis_db.utcnow() - timedelta(seconds=1)
    trellis_db.session.execute(update(Upload).values(expires_at=past, next_attempt_at=past))
    trellis_db.session.commit()
    assert tus.head(unfinished).status_code == 404  # expired: gone for the client at once
    assert tus.patch(unfinished, 6 * MiB, b"x").status_code == 404
    assert upload_expiry.expire() == 2
    assert upload_expiry.expire() == 0  # each is removed once
    assert trellis_db.session.execute(select(Upload)).all() == []
    only_blob(storage, file_id)  # the finished upload's file stays
    assert trellis_db.session.get(File, file_id) is not None


def test_the_expiry_leaves_an_upload_being_written(storage, tus):
    url = tus.location(10, filename="a.txt")
    upload_id = url.rsplit("/", 1)[1]
    past = trellis_db.utcnow() - timedelta(seconds=1)
    trellis_db.session.execute(
        update(Upload).values(
            next_attempt_at=past, writer="w" * 32, writer_until=trellis_db.utcnow() + timedelta(seconds=30)
        )
    )
    trellis_db.session.commit()
    assert upload_expiry.expire() == 0
    assert trellis_db.session.get(Upload, upload_id) is not None


def test_another_request_writing_is_423(storage, tus):
    url = tus.location(10, filename="a.txt")
    upload_id = url.rsplit("/", 1)[1]
    assert tus.patch(url, 0, b"12345").status_code == 204
    if storage.kind == "local":
        import fcntl

        part = storage.backend().path(f"{upload_id[:2]}/{upload_id[2:4]}/{upload_id}.tus")
        with open(part, "rb") as held:  # a live writer (its flock), whatever the database says
            fcntl.flock(held.fileno(), fcntl.LOCK_EX)
            locked = tus.patch(url, 5, b"67890")
    else:
        trellis_db.session.execute(
            update(Upload).values(writer="w" * 32, writer_until=trellis_db.utcnow() + timedelta(seconds=30))
        )
        trellis_db.session.commit()
        locked = tus.patch(url, 5, b"67890")
        trellis_db.session.execute(update(Upload).values(writer_until=trellis_db.utcnow() - timedelta(seconds=1)))
        trellis_db.session.commit()  # its lease ran out (a killed process): the upload is free again
    assert locked.status_code == 423 and locked.get_json()["name"] == "LOCKED"
    assert tus.head(url).headers["Upload-Offset"] == "5"
    assert tus.patch(url, 5, b"67890").status_code == 204


def test_cors_exposes_the_tus_headers(client, storage):
    preflight = client.options(
        "/storage/uploads/abc",
        headers={
            "Origin": "https://app.example",
            "Access-Control-Request-Method": "PATCH",
            "Access-Control-Request-Headers": "tus-resumable,upload-offset,upload-checksum,content-type",
        },
    )
    allowed = preflight.headers["Access-Control-Allow-Headers"].lower()
    assert {"tus-resumable", "upload-offset", "upload-checksum"} <= set(h.strip() for h in allowed.split(","))
    created = client.options("/storage/uploads", headers={"Origin": "https://app.example"})
    exposed = {h.strip().lower() for h in created.headers["Access-Control-Expose-Headers"].split(",")}
    assert {"upload-offset", "upload-length", "upload-expires", "location", "tus-resumable", "tus-version"} <= exposed
    assert {"tus-extension", "tus-max-size", "tus-checksum-algorithm", "trellis-file-id"} <= exposed


def test_chunked_transfer_body(client, storage, tus, user):
    url = tus.location(6, filename="a.txt")
    response = client.patch(
        url,
        headers={**tus.headers, "Upload-Offset": "0", "Transfer-Encoding": "chunked"},
        input_stream=io.BytesIO(b"abcdef"),
        content_type=STREAM,
        environ_overrides={"wsgi.input_terminated": True},  # what a server sets for a chunked body
    )
    assert response.status_code == 204, response.get_json()
    file_id = response.headers["Trellis-File-Id"]
    assert client.get(f"/storage/download/{file_id}", headers=user.headers).data == b"abcdef"
