"""Admin routes: all files and folders, statistics, configuration (the core's ConfigStore)."""

from __future__ import annotations

import pytest


@pytest.fixture()
def some_files(client, storage, make_user, upload, png):
    alice, bob = make_user(), make_user()
    folder = client.post("/storage/folder", json={"name": "pics"}, headers=alice.headers).get_json()["_id"]
    upload(alice.headers, png, "a.png", folder=folder)
    upload(alice.headers, png + b"more", "b.png", isPublic=True)
    upload(bob.headers, b"plain text here", "Notes.TXT")
    return alice, bob, folder


def test_admin_lists_every_file(client, some_files, admin_headers, admin_token):
    alice, bob, folder = some_files
    response = client.get("/admin/storage/files", headers=admin_headers)
    assert response.status_code == 200
    body = response.get_json()
    assert body["count"] == 3 and len(body["files"]) == 3
    assert body["files"][0]["name"] == "Notes.TXT"  # newest first

    def names(query: str) -> list[str]:
        found = client.get(f"/admin/storage/files?{query}", headers=admin_headers).get_json()
        return sorted(f["name"] for f in found["files"])

    assert names(f"owner={alice.id}") == ["a.png", "b.png"]
    assert names(f"folder={folder}") == ["a.png"]
    assert names("isPublic=true") == ["b.png"]
    assert names("contentType=image/png") == ["a.png", "b.png"]
    assert names("search=notes") == ["Notes.TXT"]
    assert names("search=%25") == []  # LIKE wildcards are literal
    page = client.get("/admin/storage/files?skip=1&limit=1", headers=admin_headers).get_json()
    assert page["count"] == 3 and len(page["files"]) == 1
    assert client.get("/admin/storage/files?limit=1001", headers=admin_headers).status_code == 400
    assert client.get("/admin/storage/files", headers={"Authorization": f"Bearer {admin_token}"}).status_code == 200


def test_admin_lists_every_folder(client, user, make_user, admin_headers):
    other = make_user()
    top = client.post("/storage/folder", json={"name": "top"}, headers=user.headers).get_json()["_id"]
    client.post("/storage/folder", json={"name": "sub", "parent": top}, headers=user.headers)
    client.post("/storage/folder", json={"name": "theirs"}, headers=other.headers)
    body = client.get("/admin/storage/folders", headers=admin_headers).get_json()
    assert body["count"] == 3 and {f["name"] for f in body["folders"]} == {"top", "sub", "theirs"}
    assert client.get(f"/admin/storage/folders?owner={other.id}", headers=admin_headers).get_json()["count"] == 1
    assert [
        f["name"]
        for f in client.get(f"/admin/storage/folders?parent={top}", headers=admin_headers).get_json()["folders"]
    ] == ["sub"]


def test_stats(client, some_files, storage, png, admin_headers):
    response = client.get("/admin/storage/stats", headers=admin_headers)
    assert response.status_code == 200
    stats = response.get_json()
    text_size = len(b"plain text here")
    assert stats["count"] == 3 and stats["folders"] == 1
    assert stats["bytes"] == 2 * len(png) + 4 + text_size
    assert stats["byContentType"] == {
        "image/png": {"count": 2, "bytes": 2 * len(png) + 4},
        "text/plain": {"count": 1, "bytes": text_size},
    }
    assert stats["byProvider"] == {storage.kind: {"count": 3, "bytes": stats["bytes"]}}


def test_stats_of_nothing(client, admin_headers):
    stats = client.get("/admin/storage/stats", headers=admin_headers).get_json()
    assert stats == {"count": 0, "bytes": 0, "folders": 0, "byContentType": {}, "byProvider": {}}


@pytest.mark.parametrize(
    "path", ["/admin/storage/files", "/admin/storage/folders", "/admin/storage/stats", "/admin/storage/config"]
)
def test_admin_routes_need_admin_credentials(client, user, path):
    assert client.get(path).status_code == 401
    assert client.get(path, headers={"masterkey": "wrong"}).status_code == 401
    assert client.get(path, headers=user.headers).status_code == 403


def test_config_defaults(client, app, admin_headers):
    response = client.get("/admin/storage/config", headers=admin_headers)
    assert response.status_code == 200
    config = response.get_json()
    assert config == {
        "active": True,
        "provider": "local",
        "maxFileSize": 100 * 1024 * 1024,
        "allowedTypes": [],
        "signedUrlExpiry": 3600,
        "local": {"path": None},
        "s3": {"bucket": "", "region": "us-east-1", "endpointUrl": None, "accessKeyId": None, "secretAccessKey": None},
    }


def test_put_config_merges_and_is_shared_with_the_core_route(client, admin_headers):
    response = client.put(
        "/admin/storage/config", json={"maxFileSize": 5000, "allowedTypes": ["image/*"]}, headers=admin_headers
    )
    assert response.status_code == 200
    assert response.get_json()["maxFileSize"] == 5000 and response.get_json()["provider"] == "local"
    response = client.put(
        "/admin/storage/config",
        json={"provider": "s3", "s3": {"bucket": "b", "endpointUrl": "http://127.0.0.1:9"}},
        headers=admin_headers,
    )
    assert response.status_code == 200
    config = response.get_json()
    assert config["s3"]["bucket"] == "b" and config["s3"]["region"] == "us-east-1"
    assert config["maxFileSize"] == 5000  # earlier changes stay
    assert client.get("/config/storage", headers=admin_headers).get_json() == config
    assert client.get("/admin/storage/config", headers=admin_headers).get_json() == config


@pytest.mark.parametrize(
    "body, field",
    [
        ({"provider": "ftp"}, "provider"),
        ({"provider": "s3"}, "s3"),  # no bucket
        ({"maxFileSize": 0}, "maxFileSize"),
        ({"allowedTypes": ["images"]}, "allowedTypes"),
        ({"signedUrlExpiry": 8 * 24 * 3600}, "signedUrlExpiry"),
        ({"s3": {"bucket": "b", "colour": "red"}}, "s3"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_put_config_validation(client, admin_headers, body, field):
    response = client.put("/admin/storage/config", json=body, headers=admin_headers)
    assert response.status_code == 400
    assert field in response.get_json()["errors"]
    assert client.get("/admin/storage/config", headers=admin_headers).get_json()["provider"] == "local"


def test_inactive_module_hides_user_routes_not_admin_ones(client, storage, user, upload, admin_headers):
    file_id = upload(user.headers, b"x", isPublic=True).get_json()["id"]
    assert client.put("/admin/storage/config", json={"active": False}, headers=admin_headers).status_code == 200
    assert upload(user.headers).status_code == 404
    assert client.get(f"/storage/getUrl/{file_id}").status_code == 404
    assert client.get("/admin/storage/files", headers=admin_headers).status_code == 200


def test_openapi_documents_the_routes(client):
    spec = client.get("/openapi.json").get_json()
    paths = spec["paths"]
    for path in [
        "/storage/upload",
        "/storage/file/{fileId}",
        "/storage/download/{fileId}",
        "/storage/getUrl/{fileId}",
        "/storage/folder",
        "/storage/folder/{folderId}",
        "/storage/public/{fileId}/{name}",
        "/storage/signed/{token}",
        "/admin/storage/files",
        "/admin/storage/folders",
        "/admin/storage/stats",
        "/admin/storage/config",
    ]:
        assert path in paths, path
    body = paths["/storage/upload"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
    schema = spec["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]] if "$ref" in body else body
    assert schema["properties"]["file"] == {"type": "string", "format": "binary", "description": "the file"}
    assert "413" in paths["/storage/upload"]["post"]["responses"]
    assert "206" in paths["/storage/download/{fileId}"]["get"]["responses"]
