"""What Chromium makes of our answers: stylesheets apply, stored markup and uploads never run script.

A second ``Content-Type: text/html`` on every answer once turned a JSON document holding
``<img src=x onerror=…>`` and a ``text/plain`` upload into pages running script on the API's origin (where
the console keeps the admin token), and made Chromium refuse the console's and Swagger UI's stylesheets.
Each marker script here would set the page title to ``pwned`` if it ran.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from trellis.testing.browser import browser_page
from trellis.testing.plugin import TEST_MASTER_KEY
from trellis_authentication.testing import create_user_over_http

pytestmark = [pytest.mark.browser, pytest.mark.live]

MARK = "document.title='pwned'"
UPLOADS = {
    "note.txt": f'<html><body><script>{MARK}</script><img src=x onerror="{MARK}"></body></html>',
    "page.html": f"<html><body><script>{MARK}</script></body></html>",
    "drawing.svg": f'<svg xmlns="http://www.w3.org/2000/svg"><script>{MARK}</script></svg>',
    "data.xml": (
        f'<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><body><script>{MARK}</script></body></html>'
    ),
}


@pytest.fixture(scope="module")
def page() -> Iterator[Any]:
    with browser_page() as page:
        page.set_default_timeout(15_000)
        yield page


def _visit(page: Any, url: str) -> str:
    """The title after opening ``url`` (a download leaves the blank page: nothing was rendered)."""
    page.goto("about:blank")
    try:
        page.goto(url)
    except Exception as error:  # Playwright raises "Download is starting" for an attachment
        if "Download is starting" not in str(error):
            raise
    page.wait_for_timeout(300)  # an onerror handler runs after the image fails to load
    return page.title()


def test_console_and_swagger_stylesheets_apply(page, live_server):
    page.goto(f"{live_server.url}/console")
    accent = page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--accent').trim()")
    assert accent == "#1f6f5c"  # a custom property of console.css: the sheet was accepted
    page.goto(f"{live_server.url}/swagger")
    loaded = page.evaluate(
        "[...document.styleSheets].filter(s => s.href && s.href.includes('swagger-ui')).map(s => s.cssRules.length)"
    )
    assert loaded and all(count > 100 for count in loaded)


def test_stored_markup_and_uploads_never_run_script(page, live_server):
    url = live_server.url
    user = create_user_over_http(url)
    schema = {"name": "Note", "fields": {"title": "String"}}
    admin = {"masterkey": TEST_MASTER_KEY}
    assert requests.post(f"{url}/admin/database/schemas", json=schema, headers=admin, timeout=30).status_code == 201
    note = requests.post(
        f"{url}/database/Note", json={"title": f'<img src=x onerror="{MARK}">'}, headers=user.headers, timeout=30
    ).json()
    page.set_extra_http_headers(user.headers)  # navigations carry the user's token, as a console tab would

    assert _visit(page, f"{url}/database/Note/{note['_id']}") != "pwned"
    assert page.evaluate("document.querySelectorAll('img').length") == 0  # shown as text, not parsed as HTML

    for name, content in UPLOADS.items():
        record = requests.post(
            f"{url}/storage/upload",
            files={"file": (name, content.encode())},
            data={"isPublic": "true"},
            headers=user.headers,
            timeout=30,
        ).json()
        signed = requests.get(f"{url}/storage/getUrl/{record['id']}", headers=user.headers, timeout=30).json()
        for route in (f"{url}/storage/download/{record['id']}", record["url"], signed["url"]):
            assert _visit(page, route) != "pwned", (name, record["contentType"], route)
