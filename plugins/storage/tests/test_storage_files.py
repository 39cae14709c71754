"""Files: upload, record, download (Range, ETag), delete, URLs, ownership, limits, clean-up.

Every test taking ``storage`` runs on both backends (local disk and S3 through moto's server).
"""

from __future__ import annotations

import hashlib
import io
import re
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
import requests
from requests.structures import CaseInsensitiveDict
from sqlalchemy import text

from trellis import db as trellis_db

KEY = re.compile(r"^[0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]{32}$")


def path_of(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def record_count(client, admin_headers) -> int:
    return client.get("/admin/storage/files", headers=admin_headers).get_json()["count"]


# ------------------------------------------------------------------------------------------- upload


def test_upload_answers_the_short_form_and_stores_the_bytes(client, storage, user, upload):
    content = b"hello storage\n" * 100
    response = upload(user.headers, content, "notes.txt")
    assert response.status_code == 201
    body = response.get_json()
    assert set(body) >= {"id", "url", "name", "size"}
    assert body["name"] == "notes.txt" and body["size"] == len(content)
    assert body["isPublic"] is False and body["contentType"] == "text/plain"
    assert path_of(body["url"]) == f"/storage/download/{body['id']}"

    record = client.get(f"/storage/file/{body['id']}", headers=user.headers).get_json()
    assert record["_id"] == body["id"] and record["owner"] == user.id
    assert record["sha256"] == hashlib.sha256(content).hexdigest()
    assert record["provider"] == storage.kind and record["displayName"] == "notes.txt"
    assert record["createdAt"].endswith("Z") and record["folder"] is None
    assert [k for k in storage.keys()] == [f"{body['id'][:2]}/{body['id'][2:4]}/{body['id']}"]

    download = client.get(f"/storage/download/{body['id']}", headers=user.headers)
    assert download.status_code == 200 and download.data == content


def test_upload_needs_a_user(client, storage, user, upload, admin_headers):
    assert upload({}).status_code == 401
    assert upload({"Authorization": "Bearer not-a-token"}).status_code == 401
    forbidden = upload(admin_headers)
    assert forbidden.status_code == 403 and forbidden.get_json()["name"] == "FORBIDDEN"
    assert storage.keys() == []


@pytest.mark.parametrize(
    "data, field",
    [
        ({}, "file"),
        ({"file": "just a string"}, "file"),
        ({"file": (io.BytesIO(b"x"), "")}, "file"),
        ({"file": (io.BytesIO(b"x"), "a.txt"), "isPublic": "maybe"}, "isPublic"),
        ({"file": (io.BytesIO(b"x"), "a.txt"), "colour": "red"}, "colour"),
    ],
)
def test_upload_rejects_a_bad_form(client, user, data, field):
    response = client.post("/storage/upload", data=data, headers=user.headers, content_type="multipart/form-data")
    assert response.status_code == 400
    assert field in response.get_json()["errors"]


def test_upload_into_a_folder_that_is_not_yours_is_a_400(client, user, make_user, upload):
    other = make_user()
    theirs = client.post("/storage/folder", json={"name": "theirs"}, headers=other.headers).get_json()["_id"]
    for folder in (theirs, "no-such-folder"):
        response = upload(user.headers, folder=folder)
        assert response.status_code == 400 and "folder" in response.get_json()["errors"]


def test_content_type_is_sniffed_not_taken_from_the_client(client, user, png):
    def sent(content: bytes, name: str, claimed: str) -> str:
        data = {"file": (io.BytesIO(content), name, claimed)}
        response = client.post("/storage/upload", data=data, headers=user.headers, content_type="multipart/form-data")
        assert response.status_code == 201, response.get_json()
        return response.get_json()["contentType"]

    assert sent(png, "holiday.txt", "text/plain") == "image/png"  # the bytes win over name and header
    assert sent(b"%PDF-1.7\n...", "report", "text/html") == "application/pdf"
    assert sent(b"just words", "readme.md", "image/png") == "text/markdown"  # no magic: by extension
    assert sent(b"\x01\x02\x03 opaque", "blob", "image/png") == "application/octet-stream"


def test_names_are_sanitised_and_the_display_name_kept(client, storage, user, upload):
    response = upload(user.headers, b"root:x:0:0", "../../etc/passwd")
    assert response.status_code == 201
    record = client.get(f"/storage/file/{response.get_json()['id']}", headers=user.headers).get_json()
    assert record["name"] == "passwd" and record["displayName"] == "passwd"

    response = upload(user.headers, b"%PDF-1.4", "Résumé été\x00\n 2024.pdf")
    record = client.get(f"/storage/file/{response.get_json()['id']}", headers=user.headers).get_json()
    assert record["name"] == "Resume_ete_2024.pdf" and record["displayName"] == "Résumé été 2024.pdf"
    disposition = client.get(f"/storage/download/{record['_id']}", headers=user.headers).headers["Content-Disposition"]
    assert disposition.startswith('inline; filename="Resume_ete_2024.pdf"; ')
    assert unquote(disposition.split("filename*=UTF-8''")[1]) == "Résumé été 2024.pdf"

    response = upload(user.headers, b"x", "..\\..\\windows\\..")
    name = response.get_json()["name"]
    assert response.status_code == 201 and name and not set(name) & {"/", "\\"} and not name.startswith(".")
    assert all(KEY.match(key) for key in storage.keys())  # every blob under the root, at a key of ours


def test_is_public_defaults_to_the_folder(client, user, upload):
    public = client.post("/storage/folder", json={"name": "pub", "isPublic": True}, headers=user.headers)
    folder = public.get_json()["_id"]
    assert upload(user.headers, folder=folder).get_json()["isPublic"] is True
    assert upload(user.headers, folder=folder, isPublic=False).get_json()["isPublic"] is False
    assert upload(user.headers).get_json()["isPublic"] is False


# ----------------------------------------------------------------------------------------- download


@pytest.fixture()
def stored(storage, user, upload):
    content = bytes(range(256)) * 40  # 10 240 bytes
    body = upload(user.headers, content, "data.bin").get_json()
    return body["id"], content


def test_download_headers(client, user, stored):
    file_id, content = stored
    response = client.get(f"/storage/download/{file_id}", headers=user.headers)
    assert response.status_code == 200 and response.data == content
    assert response.headers["Content-Type"] == "application/octet-stream"
    assert response.headers["Content-Length"] == str(len(content))
    assert response.headers["Accept-Ranges"] == "bytes"
    assert response.headers["ETag"] == f'"{hashlib.sha256(content).hexdigest()}"'
    assert response.headers["Content-Disposition"] == "attachment; filename=\"data.bin\"; filename*=UTF-8''data.bin"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Cache-Control"] == "private, no-store"

    head = client.head(f"/storage/download/{file_id}", headers=user.headers)
    assert head.status_code == 200 and head.data == b"" and head.headers["Content-Length"] == str(len(content))


RANGES = [  # Range header → status, the span of the 10 240 bytes that comes back
    ("bytes=0-99", 206, (0, 100)),
    ("bytes=10000-", 206, (10000, 10240)),
    ("bytes=-40", 206, (10200, 10240)),
    ("bytes=10200-999999", 206, (10200, 10240)),
    ("bytes=5-5", 206, (5, 6)),
    ("bytes=0-1,5-9", 200, (0, 10240)),  # several ranges: the whole file
    ("bytes=abc", 200, (0, 10240)),  # malformed: ignored (RFC 9110)
    ("items=0-5", 200, (0, 10240)),  # a unit we do not serve: ignored
]


def test_range_requests(client, user, stored):
    file_id, content = stored
    for header, status, (start, stop) in RANGES:
        response = client.get(f"/storage/download/{file_id}", headers={**user.headers, "Range": header})
        assert response.status_code == status, header
        assert response.data == content[start:stop], header
        assert response.headers["Content-Length"] == str(stop - start)
        if status == 206:
            assert response.headers["Content-Range"] == f"bytes {start}-{stop - 1}/{len(content)}"
        else:
            assert "Content-Range" not in response.headers


def test_unsatisfiable_range_is_a_416(client, user, stored):
    file_id, content = stored
    for header in ["bytes=10240-", "bytes=20000-30000", "bytes=10240-10250"]:
        response = client.get(f"/storage/download/{file_id}", headers={**user.headers, "Range": header})
        assert response.status_code == 416, header
        assert response.get_json()["name"] == "RANGE_NOT_SATISFIABLE"
        assert response.headers["Content-Range"] == f"bytes */{len(content)}"


def test_conditional_requests(client, user, stored):
    file_id, content = stored
    etag = client.get(f"/storage/download/{file_id}", headers=user.headers).headers["ETag"]
    assert (
        client.get(f"/storage/download/{file_id}", headers={**user.headers, "If-None-Match": etag}).status_code == 304
    )
    assert (
        client.get(f"/storage/download/{file_id}", headers={**user.headers, "If-None-Match": '"x"'}).status_code == 200
    )
    same = client.get(f"/storage/download/{file_id}", headers={**user.headers, "Range": "bytes=0-9", "If-Range": etag})
    assert same.status_code == 206 and same.data == content[:10]
    changed = client.get(
        f"/storage/download/{file_id}", headers={**user.headers, "Range": "bytes=0-9", "If-Range": '"old"'}
    )
    assert changed.status_code == 200 and changed.data == content


def test_missing_blob_is_a_404_not_a_500(client, storage, user, stored):
    file_id, _ = stored
    storage.backend().delete(f"{file_id[:2]}/{file_id[2:4]}/{file_id}")
    response = client.get(f"/storage/download/{file_id}", headers=user.headers)
    assert response.status_code == 404


# -------------------------------------------------------------------------------------- ownership


def test_private_files_of_somebody_else_are_not_found(client, storage, user, make_user, upload, admin_headers):
    file_id = upload(user.headers, b"secret").get_json()["id"]
    other = make_user()
    for method, path in [
        ("get", f"/storage/file/{file_id}"),
        ("get", f"/storage/download/{file_id}"),
        ("get", f"/storage/getUrl/{file_id}"),
        ("delete", f"/storage/file/{file_id}"),
    ]:
        response = getattr(client, method)(path, headers=other.headers)
        assert response.status_code == 404, (method, path)
        assert response.get_json()["name"] == "NOT_FOUND"
    # An admin sees and reads every file.
    assert client.get(f"/storage/file/{file_id}", headers=admin_headers).status_code == 200
    assert client.get(f"/storage/download/{file_id}", headers=admin_headers).data == b"secret"
    assert client.get(f"/storage/file/{file_id}").status_code == 401
    assert client.get(f"/storage/download/{file_id}").status_code == 401


def test_public_files_are_readable_by_others_but_not_deletable(client, storage, user, make_user, upload):
    file_id = upload(user.headers, b"for everyone", isPublic=True).get_json()["id"]
    other = make_user()
    assert client.get(f"/storage/file/{file_id}", headers=other.headers).status_code == 200
    assert client.get(f"/storage/download/{file_id}", headers=other.headers).data == b"for everyone"
    response = client.delete(f"/storage/file/{file_id}", headers=other.headers)
    assert response.status_code == 403 and response.get_json()["name"] == "FORBIDDEN"
    assert len(storage.keys()) == 1


# ----------------------------------------------------------------------------------------- delete


def test_delete_removes_record_and_blob(client, storage, user, upload, admin_headers):
    mine = upload(user.headers, b"one").get_json()["id"]
    theirs_by_admin = upload(user.headers, b"two").get_json()["id"]
    assert len(storage.keys()) == 2

    response = client.delete(f"/storage/file/{mine}", headers=user.headers)
    assert response.status_code == 200 and response.get_json() == {"_id": mine, "deleted": True}
    assert client.get(f"/storage/file/{mine}", headers=user.headers).status_code == 404
    assert client.delete(f"/storage/file/{mine}", headers=user.headers).status_code == 404

    assert client.delete(f"/storage/file/{theirs_by_admin}", headers=admin_headers).status_code == 200
    assert storage.keys() == []
    assert client.delete("/storage/file/whatever").status_code == 401


def test_deleting_a_user_deletes_their_files(client, storage, make_user, upload, admin_headers):
    owner, keeper = make_user(), make_user()
    folder = client.post("/storage/folder", json={"name": "a"}, headers=owner.headers).get_json()["_id"]
    client.post("/storage/folder", json={"name": "b", "parent": folder}, headers=owner.headers)
    upload(owner.headers, b"mine", folder=folder)
    kept = upload(keeper.headers, b"kept").get_json()["id"]
    assert len(storage.keys()) == 2

    assert client.delete(f"/authentication/users/{owner.id}", headers=admin_headers).status_code == 200
    files = client.get("/admin/storage/files", headers=admin_headers).get_json()
    assert [f["_id"] for f in files["files"]] == [kept]
    assert client.get("/admin/storage/folders", headers=admin_headers).get_json()["count"] == 0
    assert storage.keys() == [f"{kept[:2]}/{kept[2:4]}/{kept}"]


# -------------------------------------------------------------------------------------------- URLs


def test_public_url_is_served_without_credentials(client, storage, user, upload):
    body = upload(user.headers, b"public bytes", "pub.txt", isPublic=True).get_json()
    assert path_of(body["url"]) == f"/storage/public/{body['id']}/pub.txt"
    answer = client.get(f"/storage/getUrl/{body['id']}")  # no header at all
    assert answer.status_code == 200
    assert answer.get_json() == {"url": body["url"], "isPublic": True, "expiresAt": None}

    served = client.get(path_of(body["url"]))
    assert served.status_code == 200 and served.data == b"public bytes"
    assert served.headers["Cache-Control"] == "public, max-age=86400"
    ranged = client.get(path_of(body["url"]), headers={"Range": "bytes=7-"})
    assert ranged.status_code == 206 and ranged.data == b"bytes"
    assert client.get(f"/storage/public/{body['id']}/other-name.txt").status_code == 200  # the name is cosmetic


def test_private_files_have_no_public_url(client, storage, user, upload):
    file_id = upload(user.headers, b"private").get_json()["id"]
    assert client.get(f"/storage/public/{file_id}/hello.txt").status_code == 404
    assert client.get("/storage/public/nope/hello.txt").status_code == 404


def test_signed_url_needs_the_owner_or_an_admin(client, storage, user, make_user, upload, admin_token):
    file_id = upload(user.headers, b"private").get_json()["id"]
    anonymous = client.get(f"/storage/getUrl/{file_id}")
    assert anonymous.status_code == 401 and anonymous.get_json()["name"] == "UNAUTHORIZED"
    assert client.get(f"/storage/getUrl/{file_id}", headers={"Authorization": "Bearer junk"}).status_code == 401
    assert client.get(f"/storage/getUrl/{file_id}", headers=make_user().headers).status_code == 404
    assert client.get("/storage/getUrl/no-such-file").status_code == 404
    by_admin = client.get(f"/storage/getUrl/{file_id}", headers={"Authorization": f"Bearer {admin_token}"})
    assert by_admin.status_code == 200 and by_admin.get_json()["isPublic"] is False


def _fetch(client, url: str) -> tuple[int, bytes, CaseInsensitiveDict]:
    """A signed URL, without credentials: ours through the test client, S3's over HTTP (moto)."""
    if url.startswith("http://localhost/"):
        response = client.get(path_of(url))
        return response.status_code, response.data, CaseInsensitiveDict(dict(response.headers))
    response = requests.get(url, timeout=10)
    return response.status_code, response.content, response.headers


def test_signed_url_serves_the_private_file_for_an_hour(client, storage, user, upload, monkeypatch):
    from trellis_storage import signed_urls

    file_id = upload(user.headers, b"%PDF-1.4 private", "Ünïcode.pdf").get_json()["id"]
    answer = client.get(f"/storage/getUrl/{file_id}", headers=user.headers)
    assert answer.status_code == 200
    url, expires_at = answer.get_json()["url"], answer.get_json()["expiresAt"]
    assert answer.get_json()["isPublic"] is False and expires_at.endswith("Z")

    status, content, headers = _fetch(client, url)
    assert status == 200 and content == b"%PDF-1.4 private"
    assert headers["Content-Type"] == "application/pdf"
    assert "filename*=UTF-8''%C3%9Cn%C3%AFcode.pdf" in headers["Content-Disposition"]

    if storage.kind == "s3":
        # S3 itself enforces the expiry of a presigned URL (moto does not); check what was signed.
        query = parse_qs(urlsplit(url).query)
        assert query["X-Amz-Expires"] == ["3600"] and "X-Amz-Signature" in query
        return
    now = signed_urls._clock()
    monkeypatch.setattr(signed_urls, "_clock", lambda: now + 3590)
    assert _fetch(client, url)[0] == 200
    monkeypatch.setattr(signed_urls, "_clock", lambda: now + 3601)
    expired = client.get(path_of(url))
    assert expired.status_code == 403 and "expired" in expired.get_json()["message"]
    monkeypatch.setattr(signed_urls, "_clock", lambda: now)
    assert client.delete(f"/storage/file/{file_id}", headers=user.headers).status_code == 200
    assert client.get(path_of(url)).status_code == 404  # a valid signature for a file that is gone


def test_signed_url_expiry_follows_the_config(client, storage, user, upload):
    storage.configure(signedUrlExpiry=60)
    file_id = upload(user.headers, b"short-lived").get_json()["id"]
    url = client.get(f"/storage/getUrl/{file_id}", headers=user.headers).get_json()["url"]
    if storage.kind == "s3":
        assert parse_qs(urlsplit(url).query)["X-Amz-Expires"] == ["60"]
    else:
        from itsdangerous import URLSafeSerializer

        token = path_of(url).rsplit("/", 1)[1]
        payload = URLSafeSerializer("unused").loads_unsafe(token)[1]
        from trellis_storage import signed_urls

        assert 58 <= payload["e"] - signed_urls._clock() <= 60


def test_forged_signed_urls_are_refused(client, storage, user, upload):
    file_id = upload(user.headers, b"x").get_json()["id"]
    url = client.get(f"/storage/getUrl/{file_id}", headers=user.headers).get_json()["url"]
    if storage.kind == "s3":
        return  # S3 checks its own signatures
    token = path_of(url).rsplit("/", 1)[1]
    tampered = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    assert client.get(f"/storage/signed/{tampered}").status_code == 403
    from itsdangerous import URLSafeSerializer

    forged = URLSafeSerializer("another-secret", salt="trellis-storage-signed-url").dumps({"f": file_id, "e": 2**40})
    assert client.get(f"/storage/signed/{forged}").status_code == 403
    assert client.get("/storage/signed/..%2F..%2Fetc%2Fpasswd").status_code in (403, 404)


# ------------------------------------------------------------------------------------------ limits


def test_file_over_max_size_is_a_413_and_leaves_nothing(client, storage, user, upload, admin_headers):
    storage.configure(maxFileSize=1000)
    assert upload(user.headers, b"a" * 1000).status_code == 201
    # The body is under the request limit (file + form overhead), the file part is not: the streamed check.
    response = upload(user.headers, b"a" * 1001)
    assert response.status_code == 413 and response.get_json()["name"] == "PAYLOAD_TOO_LARGE"
    assert record_count(client, admin_headers) == 1
    assert len(storage.keys()) == 1


def test_form_limits_are_413_saying_which_limit(client, user, upload, admin_headers):
    # Over werkzeug's 1,000 parts, and a text field over 500,000 bytes: the body is within the upload
    # limit, so "the file is larger than …" would be wrong.
    response = upload(user.headers, b"small", **{f"extra{i}": "x" for i in range(1000)})
    assert response.status_code == 413
    assert response.get_json()["message"] == "The form has more than 1000 fields"
    response = upload(user.headers, b"small", note="x" * 600_000)
    assert response.status_code == 413
    assert response.get_json()["message"] == "A form field is larger than 500000 bytes"
    assert record_count(client, admin_headers) == 0


class CountingInput(io.RawIOBase):
    """A request body that records how much of it the server read."""

    def __init__(self, size: int) -> None:
        self.size, self.position, self.read_bytes = size, 0, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:  # the test client measures the body by seeking to its end and back
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self.position = self.size + offset if whence == io.SEEK_END else offset
        return self.position

    def tell(self) -> int:
        return self.position

    def readinto(self, buffer) -> int:
        n = max(0, min(len(buffer), self.size - self.position))
        buffer[:n] = b"x" * n
        self.position += n
        self.read_bytes += n
        return n


def test_oversized_content_length_is_refused_before_reading_the_body(client, storage, user):
    storage.configure(maxFileSize=1000)
    body = CountingInput(10 * 1024 * 1024)
    response = client.post(
        "/storage/upload",
        headers={**user.headers, "Content-Type": "multipart/form-data; boundary=b", "Content-Length": str(body.size)},
        input_stream=body,
    )
    assert response.status_code == 413
    assert body.read_bytes == 0
    assert storage.keys() == []


def test_chunked_body_is_cut_off_at_the_limit(client, storage, user):
    storage.configure(maxFileSize=1000)
    body = CountingInput(10 * 1024 * 1024)
    response = client.post(
        "/storage/upload",
        headers={**user.headers, "Content-Type": "multipart/form-data; boundary=b", "Transfer-Encoding": "chunked"},
        input_stream=body,
        environ_overrides={"wsgi.input_terminated": True},
    )
    assert response.status_code == 413
    assert body.read_bytes < 1000 + 64 * 1024 + 64 * 1024  # the limit plus at most one read buffer
    assert storage.keys() == []


def test_allowed_types(client, storage, user, upload, png, admin_headers):
    storage.configure(allowedTypes=["image/*", "application/pdf"])
    refused = upload(user.headers, b"plain text", "sneaky.png")  # the name says png, the bytes do not
    assert refused.status_code == 415 and refused.get_json()["name"] == "UNSUPPORTED_MEDIA_TYPE"
    assert upload(user.headers, png, "real.png").status_code == 201
    assert upload(user.headers, b"%PDF-1.4", "doc.pdf").status_code == 201
    assert record_count(client, admin_headers) == 2 and len(storage.keys()) == 2


# ---------------------------------------------------------------------------------------- failures


def _refuse_inserts(connection) -> None:
    """A real database failure: a trigger that aborts any insert into storage_files (rolled back with the test)."""
    if connection.dialect.name == "postgresql":
        connection.execute(
            text(
                "CREATE FUNCTION storage_test_refuse() RETURNS trigger AS $$ "
                "BEGIN RAISE EXCEPTION 'refused by test trigger'; END $$ LANGUAGE plpgsql"
            )
        )
        connection.execute(
            text(
                "CREATE TRIGGER storage_test_refuse BEFORE INSERT ON storage_files "
                "FOR EACH ROW EXECUTE FUNCTION storage_test_refuse()"
            )
        )
    else:
        connection.execute(
            text(
                "CREATE TRIGGER storage_test_refuse BEFORE INSERT ON storage_files "
                "BEGIN SELECT RAISE(ABORT, 'refused by test trigger'); END"
            )
        )


def test_database_failure_after_the_write_removes_the_blob(client, storage, user, upload, db, admin_headers):
    storage.keys()  # the backend is reachable before the failure is armed
    _refuse_inserts(db.connection())
    response = upload(user.headers, b"doomed" * 1000)
    assert response.status_code in (409, 500)  # an aborting trigger is a constraint error on SQLite
    assert storage.keys() == []
    assert trellis_db.session.execute(text("SELECT count(*) FROM storage_files")).scalar_one() == 0


def test_backend_failure_is_a_provider_error_and_leaves_nothing(client, storage, user, upload, tmp_path, admin_headers):
    if storage.kind == "s3":
        storage.configure(s3={"bucket": "no-such-bucket-here"})
    else:
        blocker = tmp_path / "not-a-directory"
        blocker.write_text("a file where the storage root should be")
        storage.configure(local={"path": str(blocker / "root")})
    response = upload(user.headers, b"x" * 100)
    assert response.status_code == 500
    body = response.get_json()
    assert body["name"] == "PROVIDER_ERROR"
    assert "testing-secret" not in response.get_data(as_text=True)
    assert record_count(client, admin_headers) == 0


def test_switching_provider_affects_new_files_only(client, app, user, upload, tmp_path, s3_bucket_settings):
    configs = app.extensions["trellis"].configs
    configs.put("storage", {"provider": "local", "local": {"path": str(tmp_path / "disk")}})
    on_disk = upload(user.headers, b"written to disk").get_json()["id"]
    configs.put("storage", {"provider": "s3", "s3": s3_bucket_settings()})
    in_s3 = upload(user.headers, b"written to s3").get_json()["id"]

    providers = {
        file_id: client.get(f"/storage/file/{file_id}", headers=user.headers).get_json()["provider"]
        for file_id in (on_disk, in_s3)
    }
    assert providers == {on_disk: "local", in_s3: "s3"}
    assert client.get(f"/storage/download/{on_disk}", headers=user.headers).data == b"written to disk"
    assert client.get(f"/storage/download/{in_s3}", headers=user.headers).data == b"written to s3"
    # Back to local: the S3 file is still read from its bucket, and deleted from there.
    configs.put("storage", {"provider": "local"})
    assert client.get(f"/storage/download/{in_s3}", headers=user.headers).data == b"written to s3"
    assert client.delete(f"/storage/file/{in_s3}", headers=user.headers).status_code == 200
