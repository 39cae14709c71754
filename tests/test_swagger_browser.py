"""Swagger UI at /swagger renders the operations in a real headless Chromium, from local assets only."""

import pytest

from trellis.testing.browser import browser_page

pytestmark = pytest.mark.browser


def test_swagger_ui_renders_operations(live_server, tmp_path):
    external = []
    with browser_page() as page:
        page.on("request", lambda r: external.append(r.url) if not r.url.startswith(live_server.url) else None)
        page.goto(live_server.url + "/swagger")
        page.wait_for_selector(".opblock", timeout=20_000)
        summaries = page.locator(".opblock-summary-path").all_inner_texts()
        page.screenshot(path=str(tmp_path / "swagger.png"), full_page=False)
        title = page.locator(".info .title").inner_text()
    paths = {s.replace("\u200b", "").strip() for s in summaries}
    assert {"/login", "/config/{moduleName}", "/health"} <= paths
    assert "Trellis" in title
    assert external == [], f"the page fetched from outside the server: {external}"
