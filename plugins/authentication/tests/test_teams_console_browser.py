"""The console's Teams page in headless Chromium against a real server: every team listed and searched,
a team opened shows its members with their roles and its sub-teams, and a sub-team opens in turn.
Fails on an uncaught script error or a Content-Security-Policy violation in the page."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from playwright.sync_api import expect

from trellis.testing.browser import browser_page, watch_problems
from trellis.testing.plugin import TEST_ADMIN, TEST_MASTER_KEY
from trellis_authentication.testing import create_user_over_http

pytestmark = [pytest.mark.browser, pytest.mark.live]

TIMEOUT = 15_000
expect.set_options(timeout=TIMEOUT)
ADMIN = {"masterkey": TEST_MASTER_KEY}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with browser_page() as page:
        page.set_default_timeout(TIMEOUT)
        yield page


def _call(url: str, method: str, path: str, headers: dict[str, str], **kwargs: Any) -> Any:
    response = requests.request(method, url + path, headers=headers, timeout=30, **kwargs)
    assert response.status_code < 400, response.text
    return response.json()


def test_the_teams_page_lists_teams_and_opens_members_and_sub_teams(browser: Any, live_server: Any) -> None:
    url = live_server.url
    _call(url, "PUT", "/config/authentication", ADMIN, json={"teams": {"enabled": True, "allowAddWithoutInvite": True}})
    alice, bob = create_user_over_http(url), create_user_over_http(url)
    company = _call(url, "POST", "/authentication/teams", alice.headers, json={"name": "Acme <Company>"})
    design = _call(
        url, "POST", "/authentication/teams", alice.headers, json={"name": "Design", "parentTeam": company["_id"]}
    )
    _call(
        url,
        "POST",
        f"/authentication/teams/{design['_id']}/add",
        alice.headers,
        json={"userId": bob.id, "role": "owner"},
    )
    _call(url, "POST", "/authentication/teams", bob.headers, json={"name": "Bob's own"})

    page = browser
    with watch_problems(page) as problems:
        page.goto(url + "/console/login")
        page.fill("input[name=username]", TEST_ADMIN[0])
        page.fill("input[name=password]", TEST_ADMIN[1])
        page.fill("input[name=masterkey]", TEST_MASTER_KEY)
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r"/console/modules$"))
        page.locator("nav.sidebar a", has_text="Teams").click()
        page.wait_for_url(re.compile(r"/console/teams$"))

        listed = page.locator("#teams")
        listed.locator("tbody tr", has_text="Bob's own").wait_for()
        listed.locator("input[name=search]").fill("acme")
        listed.locator("form.filters button[type=submit]").click()
        expect(listed.locator("tbody tr")).to_have_count(1)
        row = listed.locator("tbody tr", has_text="Acme <Company>")  # shown as text, not markup
        row.locator("button", has_text="Open").click()

        members = page.locator("#team-members")
        expect(members.locator("h2")).to_have_text("Members of Acme <Company>")
        expect(members.locator("tbody tr")).to_have_count(1)
        expect(members.locator("tbody tr").first).to_contain_text(alice.email)
        expect(members.locator("tbody tr").first).to_contain_text("owner")
        subs = page.locator("#team-teams")
        subs.locator("tbody tr", has_text="Design").locator("button", has_text="Open").click()
        expect(members.locator("h2")).to_have_text("Members of Design")
        expect(members.locator("tbody tr")).to_have_count(2)
        expect(members.locator("tbody tr", has_text=bob.email)).to_contain_text("owner")
        expect(subs.locator(".list-status")).to_have_text("Nothing here yet.")
    assert problems == []
