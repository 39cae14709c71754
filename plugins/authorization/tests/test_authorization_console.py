"""The console's Access control page end to end: a real server, headless Chromium, clicks and typing,
checked through the API. Fails on an uncaught script error or a Content-Security-Policy violation."""

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


class Session:
    def __init__(self, page: Any, url: str) -> None:
        self.page, self.url = page, url

    def api(self, method: str, path: str, headers: dict[str, str] | None = None, **kwargs: Any) -> Any:
        headers = headers or {"masterkey": TEST_MASTER_KEY}
        response = requests.request(method, self.url + path, headers=headers, timeout=10, **kwargs)
        assert response.status_code < 400, response.text
        return response.json()

    def sign_in(self) -> None:
        self.page.goto(self.url + "/console/login?next=/console/access")
        self.page.fill("input[name=username]", TEST_ADMIN[0])
        self.page.fill("input[name=password]", TEST_ADMIN[1])
        self.page.fill("input[name=masterkey]", TEST_MASTER_KEY)
        self.page.click("button[type=submit]")
        self.page.wait_for_url(re.compile(r"/console/access$"))
        self.page.wait_for_selector("body[data-started]")  # its first lists are shown (console.js start)


@pytest.fixture()
def session(live_server: Any) -> Iterator[Session]:
    with browser_page() as page, watch_problems(page) as problems:
        page.set_default_timeout(TIMEOUT)
        page.on("dialog", lambda dialog: dialog.accept())  # removing a grant asks first
        yield Session(page, live_server.url)
    assert problems == []


def test_definition_grants_and_what_a_user_sees(session: Session) -> None:
    page = session.page
    options = {"conduit": {"authorization": {"enabled": True}}}
    session.api(
        "POST", "/admin/database/schemas", json={"name": "Memo", "fields": {"text": "String"}, "modelOptions": options}
    )
    alice, bob = create_user_over_http(session.url), create_user_over_http(session.url)
    memo = session.api(
        "POST", "/database/Memo", headers={"Authorization": f"Bearer {alice.access_token}"}, json={"text": "m"}
    )
    session.sign_in()

    # A schema's access settings: a bad definition is refused next to its field, a good one saved.
    page.locator("#resources tbody tr", has_text="Memo").locator("button", has_text="Edit").click()
    permissions = page.locator("#resource-form textarea[name=permissions]")
    expect(permissions).to_have_value(re.compile(r'"share"'))
    permissions.fill('{"read": ["reader", "ghost"], "edit": ["owner"], "delete": ["owner"], "share": ["owner"]}')
    page.locator("#resource-form button[type=submit]").click()
    expect(page.locator("#resource-form .form-error")).to_contain_text("definition of Memo has errors")
    expect(page.locator("#resource-form .field-error")).to_contain_text("Unknown relation 'ghost'")
    assert session.api("GET", "/admin/authorization/resources/Memo")["permissions"]["read"] == [
        "reader",
        "editor",
        "owner",
    ]
    permissions.fill('{"read": ["reader", "owner"], "edit": ["owner"], "delete": ["owner"], "share": ["owner"]}')
    page.locator("#resource-form button[type=submit]").click()
    expect(page.locator("#resource-editor")).to_be_hidden()
    expect(page.locator("#resources tbody tr", has_text="Memo")).to_contain_text('"read":["reader","owner"]')
    assert session.api("GET", "/admin/authorization/resources/Memo")["permissions"]["edit"] == ["owner"]

    # A document's grants: listed, added, removed.
    target = page.locator("#grants-target")
    target.locator("select[name=schema]").select_option("Memo")
    target.locator("input[name=document]").fill(memo["_id"])
    target.locator("button[type=submit]").click()
    grants = page.locator("#grants tbody tr")
    expect(grants).to_have_count(1)
    expect(grants.first).to_contain_text(f"User:{alice.id}")
    form = page.locator("#grant-form")
    form.locator("input[name=subject]").fill(f"User:{bob.id}")
    form.locator("select[name=relation]").select_option("reader")
    form.locator("button[type=submit]").click()
    expect(grants).to_have_count(2)
    query = {"resource": f"Memo:{memo['_id']}"}
    assert session.api("GET", "/admin/authorization/relations", params=query)["count"] == 2
    form.locator("input[name=subject]").fill("User:nobody")
    form.locator("button[type=submit]").click()
    expect(form.locator(".form-error")).to_contain_text("No user with id 'nobody'")

    # What can this user see: bob reads the memo through his grant, and the page says why.
    sees = page.locator("#sees-form")
    sees.locator("select[name=user]").select_option(label=bob.email)
    sees.locator("select[name=schema]").select_option("Memo")
    sees.locator("select[name=action]").select_option("read")
    sees.locator("button[type=submit]").click()
    row = page.locator("#sees tbody tr", has_text=memo["_id"])
    expect(row).to_contain_text("yes")
    expect(row).to_contain_text(f"User:{bob.id} reader Memo:{memo['_id']} → reader grants read")
    expect(page.locator("#sees-status")).to_have_text("1 of 1 documents (of 1) allow read.")

    page.locator("#grants tbody tr", has_text=f"User:{bob.id}").locator("button", has_text="Remove").click()
    expect(grants).to_have_count(1)
    assert session.api("GET", "/admin/authorization/relations", params=query)["count"] == 1
    sees.locator("button[type=submit]").click()
    expect(row).to_contain_text("no")
    expect(page.locator("#sees-status")).to_have_text("0 of 1 documents (of 1) allow read.")
