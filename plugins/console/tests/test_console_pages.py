"""The console's server side, in process: page shells, security headers, assets, hidden pages, upload."""

from __future__ import annotations

import io
import re
from html.parser import HTMLParser

import pytest

from trellis_console.views import CSP, PAGES

ALL_PAGES = [page.slug for page in PAGES]


class Tags(HTMLParser):
    """Every start tag with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def tags_of(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = Tags()
    parser.feed(html)
    return parser.tags


def loaded(app) -> set[str]:
    return {module.name for module in app.extensions["trellis"].modules}


def test_every_page_renders_with_strict_headers(app, client):
    available = [p.slug for p in PAGES if p.module is None or p.module in loaded(app)]
    for slug in ["login", *available]:
        response = client.get(f"/console/{slug}")
        assert response.status_code == 200, slug
        assert response.mimetype == "text/html"
        assert response.headers["Content-Security-Policy"] == CSP
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["X-Frame-Options"] == "DENY"
        assert response.headers["Cache-Control"] == "no-store"
        html = response.get_data(as_text=True)
        for tag, attrs in tags_of(html):
            # No inline code or style anywhere: the CSP would block it, so it must not be needed.
            assert not any(name.startswith("on") for name in attrs), (slug, tag, attrs)
            assert "style" not in attrs, (slug, tag, attrs)
            if tag == "script":
                assert attrs.get("src", "").startswith("/console/static/"), (slug, attrs)
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), slug
        assert not re.search(r"<style", html), slug


def test_csp_forbids_inline_and_foreign_code():
    directives = dict(part.split(" ", 1) for part in CSP.split("; "))
    assert directives["default-src"] == "'none'"
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["connect-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe" not in CSP


def test_navigation_lists_the_pages_of_loaded_modules(app, client):
    html = client.get("/console/modules").get_data(as_text=True)
    links = {
        attrs["href"] for tag, attrs in tags_of(html) if tag == "a" and attrs.get("href", "").startswith("/console/")
    }
    expected = {f"/console/{p.slug}" for p in PAGES if p.module is None or p.module in loaded(app)}
    assert links == expected
    assert 'href="/openapi.json"' in html and 'download="trellis-openapi.json"' in html


def test_assets_referenced_by_pages_are_served(app, client):
    referenced: set[str] = set()
    for slug in ["login", *[p.slug for p in PAGES if p.module is None or p.module in loaded(app)]]:
        for tag, attrs in tags_of(client.get(f"/console/{slug}").get_data(as_text=True)):
            url = attrs.get("src") or (attrs.get("href") if tag == "link" else None)
            if url:
                referenced.add(url)
    assert {"/console/static/console.js", "/console/static/console.css", "/console/static/modules.js"} <= referenced
    for url in referenced:
        response = client.get(url)
        assert response.status_code == 200, url
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        if url.endswith(".js"):
            assert response.mimetype in ("text/javascript", "application/javascript")
            # ES modules import each other: every import must be served too.
            for imported in re.findall(r'from "\./([\w.]+)"', response.get_data(as_text=True)):
                assert client.get(f"/console/static/{imported}").status_code == 200, imported


def test_root_redirects_to_the_modules_page(client):
    response = client.get("/console/")
    assert response.status_code == 302
    assert response.headers["Location"].endswith("/console/modules")


@pytest.mark.parametrize("path", ["/console/nope", "/console/static/nope.js", "/console/a/b"])
def test_unknown_console_paths_are_404_with_the_same_headers(client, path):
    response = client.get(path)
    assert response.status_code == 404
    assert response.get_json()["name"] == "NOT_FOUND"
    assert response.headers["Content-Security-Policy"] == CSP


def test_page_size_comes_from_the_console_config(client, admin_headers):
    assert client.put("/config/console", json={"pageSize": 0}, headers=admin_headers).status_code == 400
    assert client.put("/config/console", json={"pageSize": 50}, headers=admin_headers).status_code == 200
    assert 'data-page-size="50"' in client.get("/console/users").get_data(as_text=True)


def test_an_inactive_console_is_offline(client, admin_headers):
    assert client.put("/config/console", json={"active": False}, headers=admin_headers).status_code == 200
    for path in ("/console/modules", "/console/login", "/console/static/console.js"):
        assert client.get(path).status_code == 404, path
    # The API that configures it still answers, so it can be switched back on.
    assert client.put("/config/console", json={"active": True}, headers=admin_headers).status_code == 200
    assert client.get("/console/modules").status_code == 200


def test_pages_of_modules_that_are_not_loaded_are_hidden(app_config, db, admin_headers):
    from trellis import create_app
    from trellis_console import module

    # Another app on the same database with the console alone (think: TRELLIS_MODULES=console).
    client = create_app(app_config, modules=[module]).test_client()
    html = client.get("/console/modules").get_data(as_text=True)
    assert 'href="/console/modules"' in html
    for page in PAGES:
        if page.module is not None:
            assert f'href="/console/{page.slug}"' not in html
            assert client.get(f"/console/{page.slug}").status_code == 404
    assert client.post("/console/storage/upload", headers=admin_headers).status_code == 404


# ---- upload on behalf of a user -------------------------------------------------------------------


def _upload(client, headers, **form):
    data = {"file": (io.BytesIO(b"hello from the console\n"), "note.txt"), **form}
    return client.post("/console/storage/upload", data=data, headers=headers, content_type="multipart/form-data")


@pytest.fixture()
def storage_loaded(app):
    if not {"storage", "authentication"} <= loaded(app):
        pytest.skip("needs the storage and authentication modules")


def test_upload_for_a_user(storage_loaded, client, admin_headers, make_user):
    owner = make_user()
    response = _upload(client, admin_headers, owner=owner.id, isPublic="true")
    assert response.status_code == 201, response.get_json()
    record = response.get_json()
    assert record["owner"] == owner.id and record["displayName"] == "note.txt" and record["isPublic"] is True
    # The user owns it: it is in their files, readable with their token.
    download = client.get(f"/storage/download/{record['_id']}", headers=owner.headers)
    assert download.status_code == 200 and download.data == b"hello from the console\n"


def test_upload_needs_admin_credentials(storage_loaded, client, make_user):
    owner = make_user()
    assert _upload(client, {}, owner=owner.id).status_code == 401
    assert _upload(client, owner.headers, owner=owner.id).status_code == 403


def test_upload_refusals_name_the_field(storage_loaded, client, admin_headers, make_user):
    response = _upload(client, admin_headers, owner="no-such-user")
    assert response.status_code == 400 and "owner" in response.get_json()["errors"]
    response = client.post(
        "/console/storage/upload",
        data={"owner": make_user().id},
        headers=admin_headers,
        content_type="multipart/form-data",
    )
    assert response.status_code == 400 and "file" in response.get_json()["errors"]
    other = make_user()
    folder = client.post("/storage/folder", json={"name": "theirs"}, headers=other.headers).get_json()
    response = _upload(client, admin_headers, owner=make_user().id, folder=folder["_id"])
    assert response.status_code == 400 and "folder" in response.get_json()["errors"]


def test_upload_follows_the_storage_limits(storage_loaded, client, admin_headers, make_user):
    assert client.put("/config/storage", json={"maxFileSize": 5}, headers=admin_headers).status_code == 200
    assert _upload(client, admin_headers, owner=make_user().id).status_code == 413
    assert (
        client.put(
            "/config/storage", json={"maxFileSize": 10_000, "allowedTypes": ["image/*"]}, headers=admin_headers
        ).status_code
        == 200
    )
    assert _upload(client, admin_headers, owner=make_user().id).status_code == 415


def test_upload_with_a_nameless_part_is_a_400(storage_loaded, client, admin_headers):
    # werkzeug keys a part without a name as None; the answer must still be a 400 naming the fields.
    body = b"--b\r\nContent-Disposition: form-data\r\n\r\nnull\r\n--b--\r\n"
    response = client.post(
        "/console/storage/upload", data=body, content_type="multipart/form-data; boundary=b", headers=admin_headers
    )
    assert response.status_code == 400
    assert {"file", "owner"} <= set(response.get_json()["errors"])
