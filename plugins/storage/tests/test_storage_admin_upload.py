"""``POST /admin/storage/upload``: an administrator uploads a file on behalf of a user (the console's upload)."""

from __future__ import annotations

import io
from typing import Any

import pytest

PATH = "/admin/storage/upload"


@pytest.fixture()
def admin_upload(client, storage):
    """``admin_upload(headers, content=…, filename=…, **form)`` → the test client's response."""

    def send(
        headers: dict[str, str], content: bytes = b"hello from an admin\n", filename: str = "note.txt", **form: Any
    ):
        data: dict[str, Any] = {"file": (io.BytesIO(content), filename), **form}
        return client.post(PATH, data=data, headers=headers, content_type="multipart/form-data")

    return send


def test_upload_for_a_user(client, storage, admin_upload, admin_headers, make_user):
    owner = make_user()
    response = admin_upload(admin_headers, owner=owner.id, isPublic="true")
    assert response.status_code == 201, response.get_json()
    record = response.get_json()
    assert (record["owner"], record["displayName"], record["isPublic"]) == (owner.id, "note.txt", True)
    assert record == client.get(f"/storage/file/{record['_id']}", headers=admin_headers).get_json()
    # The user owns it: readable with their token, in the store of the active backend.
    download = client.get(f"/storage/download/{record['_id']}", headers=owner.headers)
    assert download.status_code == 200 and download.data == b"hello from an admin\n"
    assert len(storage.keys()) == 1
    # The administrative write is in the audit log, with who was made the owner.
    entries = client.get("/admin/audit?module=storage&action=file.create", headers=admin_headers).get_json()["entries"]
    assert [(e["target"], e["changes"]["owner"]) for e in entries] == [(record["_id"], owner.id)]


def test_upload_into_the_owners_folder(client, storage, admin_upload, admin_headers, make_user):
    owner = make_user()
    folder = client.post("/storage/folder", json={"name": "docs", "isPublic": True}, headers=owner.headers).get_json()
    record = admin_upload(admin_headers, owner=owner.id, folder=folder["_id"]).get_json()
    assert (record["folder"], record["isPublic"]) == (folder["_id"], True)  # visibility follows the folder


def test_upload_needs_admin_credentials(storage, admin_upload, make_user):
    owner = make_user()
    assert admin_upload({}, owner=owner.id).status_code == 401
    assert admin_upload(owner.headers, owner=owner.id).status_code == 403
    assert storage.keys() == []


def test_refusals_name_the_field_and_leave_nothing(client, storage, admin_upload, admin_headers, make_user):
    def refused(response: Any) -> set[str]:
        assert response.status_code == 400, response.get_json()
        assert response.get_json()["status"] == 400
        return set(response.get_json()["errors"])

    assert "owner" in refused(admin_upload(admin_headers, owner="no-such-user"))
    assert "owner" in refused(admin_upload(admin_headers))
    no_file = client.post(
        PATH, data={"owner": make_user().id}, headers=admin_headers, content_type="multipart/form-data"
    )
    assert "file" in refused(no_file)
    theirs = client.post("/storage/folder", json={"name": "theirs"}, headers=make_user().headers).get_json()
    assert "folder" in refused(admin_upload(admin_headers, owner=make_user().id, folder=theirs["_id"]))
    # werkzeug keys a part without a name as None; the answer is still a 400 naming the fields.
    nameless = b"--b\r\nContent-Disposition: form-data\r\n\r\nnull\r\n--b--\r\n"
    response = client.post(PATH, data=nameless, content_type="multipart/form-data; boundary=b", headers=admin_headers)
    assert {"file", "owner"} <= refused(response)
    json_body = client.post(PATH, json={"owner": "x"}, headers=admin_headers)
    assert 400 <= json_body.status_code < 500 and json_body.get_json()["status"] == json_body.status_code
    assert storage.keys() == []


def test_upload_follows_the_storage_limits(storage, admin_upload, admin_headers, make_user):
    storage.configure(maxFileSize=5)
    assert admin_upload(admin_headers, owner=make_user().id).status_code == 413
    storage.configure(maxFileSize=10_000, allowedTypes=["image/*"])
    assert admin_upload(admin_headers, owner=make_user().id).status_code == 415
    assert storage.keys() == []


def test_upload_route_is_documented(client):
    document = client.get("/openapi.json").get_json()
    operation = document["paths"][PATH]["post"]
    reference = operation["requestBody"]["content"]["multipart/form-data"]["schema"]["$ref"]
    form = document["components"]["schemas"][reference.rsplit("/", 1)[-1]]
    assert form["required"] == ["file", "owner"] and form["properties"]["file"]["format"] == "binary"
    assert {"folder", "isPublic"} <= set(form["properties"])
    record = operation["responses"]["201"]["content"]["application/json"]["schema"]
    assert (
        record
        == document["paths"]["/storage/file/{fileId}"]["get"]["responses"]["200"]["content"]["application/json"][
            "schema"
        ]
    )
    assert {"masterkey": []} in operation["security"] and {"bearerAuth": []} in operation["security"]
    assert {"201", "400", "401", "403", "413", "415"} <= set(operation["responses"])
    assert operation["operationId"]
