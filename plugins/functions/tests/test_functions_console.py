"""The console's Functions page in headless Chromium against a real server: files with their errors and
lines, the triggers, functions and schedules, a run started from the page and its entry in the log; one
Content-Type, the console's stylesheet applied, no script error or CSP violation."""

from __future__ import annotations

import re

import pytest
import requests
from playwright.sync_api import expect

from trellis.testing.browser import browser_page, watch_problems
from trellis.testing.plugin import TEST_ADMIN, TEST_MASTER_KEY

from .conftest import WAIT, Api, eventually

pytestmark = [pytest.mark.browser, pytest.mark.live]

FILES = {
    "a_broken.py": "x = 1\nraise ValueError('no settings')\n",
    "b_jobs.py": """
        from trellis_functions import before_create, function, schedule

        @before_create("Note")
        def stamp(ctx, doc):
            doc["stamped"] = True

        @function("hello", auth="anyone")
        def hello(ctx, params):
            return "hi"

        @schedule("0 3 * * *")
        def nightly(ctx):
            ctx.log("swept from the page")
    """,
}


def test_the_functions_page(start, folder):
    for name, text in FILES.items():
        folder.write(name, text)
    server = start()
    page_response = requests.get(f"{server.url}/console/functions", timeout=WAIT)
    assert page_response.headers["Content-Type"] == "text/html; charset=utf-8"
    with browser_page() as page, watch_problems(page) as problems:
        page.set_default_timeout(WAIT * 1000)
        page.goto(server.url + "/console/login")
        page.fill("input[name=username]", TEST_ADMIN[0])
        page.fill("input[name=password]", TEST_ADMIN[1])
        page.fill("input[name=masterkey]", TEST_MASTER_KEY)
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r"/console/modules$"))
        page.goto(server.url + "/console/functions")
        page.wait_for_selector("body[data-started]")
        broken = page.locator("#files tbody tr", has_text="a_broken.py")
        expect(broken).to_contain_text("ValueError: no settings")
        expect(broken).to_contain_text("2")
        expect(page.locator("#triggers tbody tr", has_text="stamp")).to_contain_text("before_create")
        expect(page.locator("#callables tbody tr", has_text="hello")).to_contain_text("anyone")
        row = page.locator("#schedules tbody tr", has_text="nightly")
        expect(row).to_contain_text("0 3 * * *")
        row.locator("button", has_text="Run now").click()
        # The run is in the background: once its entry is written, the page's log shows it.
        eventually(lambda: Api(server.url).log(function="nightly"))
        page.reload()
        page.wait_for_selector("body[data-started]")
        page.locator("#log tbody tr", has_text="swept from the page").wait_for()
        # The console's stylesheet is applied: the sidebar is laid out by it, not the browser's defaults.
        assert page.locator("nav.sidebar").evaluate("n => getComputedStyle(n).display") != "inline"
    assert problems == []
