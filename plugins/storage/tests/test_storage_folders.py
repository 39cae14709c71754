"""Folders: create, contents, delete (409 unless recursive), visibility to others and admins."""

from __future__ import annotations

import pytest


def new_folder(client, headers, name: str, **body):
    response = client.post("/storage/folder", json={"name": name, **body}, headers=headers)
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def test_create_folder(client, user):
    response = client.post("/storage/folder", json={"name": "Photos 2024", "isPublic": True}, headers=user.headers)
    assert response.status_code == 201
    folder = response.get_json()
    assert folder["name"] == "Photos 2024" and folder["isPublic"] is True
    assert folder["owner"] == user.id and folder["parent"] is None and folder["_id"]
    assert folder["createdAt"].endswith("Z")
    assert new_folder(client, user.headers, "private")["isPublic"] is False  # the default


def test_folder_names_are_unique_per_parent_and_owner(client, user, make_user):
    parent = new_folder(client, user.headers, "docs")
    duplicate = client.post("/storage/folder", json={"name": "docs"}, headers=user.headers)
    assert duplicate.status_code == 409 and duplicate.get_json()["name"] == "CONFLICT"
    child = new_folder(client, user.headers, "docs", parent=parent["_id"])  # same name, another place
    assert child["parent"] == parent["_id"]
    assert (
        client.post("/storage/folder", json={"name": "docs", "parent": parent["_id"]}, headers=user.headers).status_code
        == 409
    )
    new_folder(client, make_user().headers, "docs")  # another owner


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "a/b"}, "name"),
        ({"name": "..\\x"}, "name"),
        ({"name": ".."}, "name"),
        ({"name": "x" * 256}, "name"),
        ({"name": "ok", "isPublic": "perhaps"}, "isPublic"),
        ({"name": "ok", "colour": "red"}, "colour"),
        ({"name": "ok", "parent": "no-such-folder"}, "parent"),
    ],
)
def test_create_folder_validation(client, user, body, field):
    response = client.post("/storage/folder", json=body, headers=user.headers)
    assert response.status_code == 400
    assert field in response.get_json()["errors"]


def test_create_folder_credentials(client, user, make_user, admin_headers):
    theirs = new_folder(client, make_user().headers, "theirs")
    response = client.post("/storage/folder", json={"name": "x", "parent": theirs["_id"]}, headers=user.headers)
    assert response.status_code == 400  # a folder of somebody else is no parent of yours
    assert client.post("/storage/folder", json={"name": "x"}).status_code == 401
    assert client.post("/storage/folder", json={"name": "x"}, headers=admin_headers).status_code == 403


def test_folder_contents(client, user, upload):
    folder = new_folder(client, user.headers, "album")
    child = new_folder(client, user.headers, "b-sub", parent=folder["_id"])
    new_folder(client, user.headers, "a-sub", parent=folder["_id"])
    ids = [
        upload(user.headers, f"file {n}".encode(), f"f{n}.txt", folder=folder["_id"]).get_json()["id"] for n in range(3)
    ]
    upload(user.headers, b"elsewhere")  # not in the folder
    upload(user.headers, b"deeper", folder=child["_id"])  # in a sub-folder: not listed here

    response = client.get(f"/storage/folder/{folder['_id']}", headers=user.headers)
    assert response.status_code == 200
    body = response.get_json()
    assert body["folder"]["_id"] == folder["_id"]
    assert [f["name"] for f in body["folders"]] == ["a-sub", "b-sub"]
    assert body["count"] == 3 and sorted(f["_id"] for f in body["files"]) == sorted(ids)

    page = client.get(f"/storage/folder/{folder['_id']}?skip=1&limit=1", headers=user.headers).get_json()
    assert page["count"] == 3 and len(page["files"]) == 1
    assert client.get(f"/storage/folder/{folder['_id']}?limit=5000", headers=user.headers).status_code == 400


def test_folder_visibility(client, user, make_user, upload, admin_headers):
    private = new_folder(client, user.headers, "private")
    public = new_folder(client, user.headers, "public", isPublic=True)
    new_folder(client, user.headers, "hidden-sub", parent=public["_id"])
    new_folder(client, user.headers, "shown-sub", parent=public["_id"], isPublic=True)
    upload(user.headers, b"shown", "shown.txt", folder=public["_id"])  # inherits public
    upload(user.headers, b"hidden", "hidden.txt", folder=public["_id"], isPublic=False)

    other = make_user()
    assert client.get(f"/storage/folder/{private['_id']}", headers=other.headers).status_code == 404
    seen = client.get(f"/storage/folder/{public['_id']}", headers=other.headers).get_json()
    assert [f["name"] for f in seen["files"]] == ["shown.txt"] and seen["count"] == 1
    assert [f["name"] for f in seen["folders"]] == ["shown-sub"]

    everything = client.get(f"/storage/folder/{public['_id']}", headers=admin_headers).get_json()
    assert everything["count"] == 2 and len(everything["folders"]) == 2
    assert client.get(f"/storage/folder/{private['_id']}", headers=admin_headers).status_code == 200
    assert client.get(f"/storage/folder/{private['_id']}").status_code == 401
    assert client.get("/storage/folder/no-such-folder", headers=user.headers).status_code == 404


def test_delete_empty_folder(client, user, make_user, admin_headers):
    folder = new_folder(client, user.headers, "empty")
    response = client.delete(f"/storage/folder/{folder['_id']}", headers=user.headers)
    assert response.status_code == 200 and response.get_json() == {"_id": folder["_id"], "deleted": True}
    assert client.get(f"/storage/folder/{folder['_id']}", headers=user.headers).status_code == 404
    assert client.delete(f"/storage/folder/{folder['_id']}", headers=user.headers).status_code == 404

    private = new_folder(client, user.headers, "private")
    public = new_folder(client, user.headers, "public", isPublic=True)
    other = make_user()
    assert client.delete(f"/storage/folder/{private['_id']}", headers=other.headers).status_code == 404
    assert client.delete(f"/storage/folder/{public['_id']}", headers=other.headers).status_code == 403
    assert client.delete(f"/storage/folder/{public['_id']}").status_code == 401
    assert client.delete(f"/storage/folder/{public['_id']}", headers=admin_headers).status_code == 200


def test_non_empty_folder_needs_recursive(client, storage, user, upload, admin_headers):
    top = new_folder(client, user.headers, "top")
    middle = new_folder(client, user.headers, "middle", parent=top["_id"])
    bottom = new_folder(client, user.headers, "bottom", parent=middle["_id"])
    upload(user.headers, b"in top", folder=top["_id"])
    upload(user.headers, b"in bottom", folder=bottom["_id"])
    kept = upload(user.headers, b"outside").get_json()["id"]
    assert len(storage.keys()) == 3

    refused = client.delete(f"/storage/folder/{top['_id']}", headers=user.headers)
    assert refused.status_code == 409 and "recursive" in refused.get_json()["message"]
    only_sub = client.delete(f"/storage/folder/{bottom['_id']}?recursive=false", headers=user.headers)
    assert only_sub.status_code == 409  # files make it non-empty too
    assert client.delete(f"/storage/folder/{middle['_id']}", headers=user.headers).status_code == 409  # sub-folder

    response = client.delete(f"/storage/folder/{top['_id']}?recursive=true", headers=user.headers)
    assert response.status_code == 200 and response.get_json() == {"_id": top["_id"], "deleted": True}
    folders = client.get("/admin/storage/folders", headers=admin_headers).get_json()
    files = client.get("/admin/storage/files", headers=admin_headers).get_json()
    assert folders["count"] == 0
    assert [f["_id"] for f in files["files"]] == [kept]
    assert storage.keys() == [f"{kept[:2]}/{kept[2:4]}/{kept}"]  # the blobs went with the records
