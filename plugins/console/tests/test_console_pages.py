"""The console's server side, in process: page shells, security headers, assets, pages contributed by modules."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from trellis import ConsolePage, Module
from trellis.http import PAGE_CSP as CSP
from trellis.modules import ModuleError


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


def offered(app) -> list[str]:
    """The slugs of every page the loaded modules contribute (the console's own included)."""
    return [page.slug for module in app.extensions["trellis"].modules for page in module.console_pages]


def test_every_page_renders_with_strict_headers(app, client):
    assert {"modules", "project", "audit"} <= set(offered(app))
    for slug in ["login", *offered(app)]:
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
                assert attrs.get("src", "").startswith(("/console/static/", "/console/scripts/")), (slug, attrs)
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
    assert links == {f"/console/{slug}" for slug in offered(app)}
    assert 'href="/openapi.json"' in html and 'download="trellis-openapi.json"' in html


def test_the_consoles_own_pages_frame_the_navigation(app, client):
    tags = tags_of(client.get("/console/modules").get_data(as_text=True))
    sidebar = tags[next(i for i, (tag, attrs) in enumerate(tags) if tag == "nav") :]  # not the brand's link
    order = [attrs["href"].rsplit("/", 1)[-1] for tag, attrs in sidebar if tag == "a"]
    others = [s for s in order if s not in ("modules", "project", "audit")]
    assert order == ["modules", *others, "project", "audit"]  # Modules first; Project, then the audit log, last
    titles = {page.slug: page.title for m in app.extensions["trellis"].modules for page in m.console_pages}
    assert [titles[s].casefold() for s in others] == sorted(titles[s].casefold() for s in others)
    page = client.get("/console/project").get_data(as_text=True)
    assert "<title>Project · Trellis console</title>" in page
    assert '<script type="module" src="/console/scripts/project.js">' in page
    ids = {attrs.get("id") for _, attrs in tags_of(page)}
    assert {"project-export", "project-form", "project-plan", "project-apply", "project-plan-result"} <= ids


def test_assets_referenced_by_pages_are_served(app, client):
    referenced: set[str] = set()
    for slug in ["login", *offered(app)]:
        for tag, attrs in tags_of(client.get(f"/console/{slug}").get_data(as_text=True)):
            url = attrs.get("src") or (attrs.get("href") if tag == "link" else None)
            if url:
                referenced.add(url)
    assert {
        "/console/static/console.js",
        "/console/static/console.css",
        "/console/scripts/modules.js",
        "/console/scripts/project.js",
    } <= referenced
    for url in referenced:
        response = client.get(url)
        assert response.status_code == 200, url
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        if url.endswith(".js"):
            assert response.mimetype in ("text/javascript", "application/javascript")
            # ES modules import each other: every import must be served too.
            for imported in re.findall(r'from "([^"]+)"', response.get_data(as_text=True)):
                assert imported.startswith("/console/static/"), (url, imported)  # pages' scripts live elsewhere
                assert client.get(imported).status_code == 200, imported


def test_root_redirects_to_the_modules_page(client):
    response = client.get("/console/")
    assert response.status_code == 302
    assert response.headers["Location"].endswith("/console/modules")


@pytest.mark.parametrize(
    "path",
    [
        "/console/nope",
        "/console/static/nope.js",
        "/console/a/b",
        "/console/scripts/nope.js",
        "/console/scripts/audit.js",
    ],
)
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


# ---- pages contributed through the Module contract -----------------------------------------------------


def _greeter(folder) -> Module:
    """A module of the test's own with one console page (a template and a script in its folder)."""
    (folder / "greetings.html").write_text(
        '{% extends "console/layout.html" %}{% block content %}<p id="greetings">Hello from greeter</p>{% endblock %}'
    )
    (folder / "greetings.js").write_text('import { onReady } from "/console/static/console.js";\nonReady(() => {});\n')
    page = ConsolePage("greetings", "Greetings", str(folder / "greetings.html"), str(folder / "greetings.js"))
    return Module(name="greeter", console_pages=(page,))


def _links(client) -> set[str]:
    html = client.get("/console/modules").get_data(as_text=True)
    return {
        attrs["href"] for tag, attrs in tags_of(html) if tag == "a" and attrs.get("href", "").startswith("/console/")
    }


def test_a_modules_page_is_offered_only_while_it_is_loaded(app_config, db, tmp_path):
    from trellis import create_app
    from trellis_console import module as console

    with_greeter = create_app(app_config, modules=[console, _greeter(tmp_path)]).test_client()
    own = {"/console/modules", "/console/project", "/console/audit"}
    assert _links(with_greeter) == {*own, "/console/greetings"}  # the console's own pages frame it
    page = with_greeter.get("/console/greetings")
    assert page.status_code == 200 and page.headers["Content-Security-Policy"] == CSP
    html = page.get_data(as_text=True)
    assert '<p id="greetings">Hello from greeter</p>' in html and "<title>Greetings · Trellis console</title>" in html
    assert '<script type="module" src="/console/scripts/greetings.js">' in html
    script = with_greeter.get("/console/scripts/greetings.js")
    assert script.status_code == 200 and script.mimetype == "text/javascript"
    assert script.get_data(as_text=True) == (tmp_path / "greetings.js").read_text()

    # The same console on the same database without the module (think: TRELLIS_MODULES=console).
    alone = create_app(app_config, modules=[console]).test_client()
    assert _links(alone) == own
    assert alone.get("/console/greetings").status_code == 404
    assert alone.get("/console/scripts/greetings.js").status_code == 404
    assert alone.get("/console/users").status_code == 404  # nor any other module's page


def test_pages_of_the_installed_modules_come_from_their_packages(app, client):
    from pathlib import Path

    import trellis_console

    console_package = Path(trellis_console.__file__).parent
    for module in app.extensions["trellis"].modules:
        if module.name == "console":
            continue
        for page in module.console_pages:
            # In the module's own package, not the console's.
            assert not Path(page.template).is_relative_to(console_package), page
            assert client.get(f"/console/{page.slug}").status_code == 200


def test_a_clash_of_page_names_fails_at_start_up(app_config, db, tmp_path):
    from trellis import create_app
    from trellis_console import module as console

    greeter = _greeter(tmp_path)
    twin = Module(name="twin", console_pages=greeter.console_pages)
    with pytest.raises(ModuleError, match="greetings"):
        create_app(app_config, modules=[console, greeter, twin])
    missing = Module(name="missing", console_pages=(ConsolePage("missing", "Missing", str(tmp_path / "nope.html")),))
    with pytest.raises(ModuleError, match="does not exist"):
        create_app(app_config, modules=[console, missing])
    login = Module(name="login", console_pages=(ConsolePage("login", "Login", str(tmp_path / "greetings.html")),))
    with pytest.raises(ModuleError, match="reserved"):
        create_app(app_config, modules=[console, login])
    with pytest.raises(ModuleError, match="slug"):
        ConsolePage("Not A Slug", "Bad", str(tmp_path / "greetings.html"))


def test_console_is_not_in_the_openapi_document(client):
    document = client.get("/openapi.json").get_json()
    assert not [path for path in document["paths"] if path.startswith("/console")]
    assert "console" not in {tag["name"] for tag in document.get("tags", [])}
