"""The console end to end: a real server, headless Chromium, clicks and typing, checked through the API.

One browser for the module; each test gets its own live server (a new origin, so a new sessionStorage).
Every test fails on an uncaught script error or a Content-Security-Policy violation in the page.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from playwright.sync_api import expect

from trellis.testing.browser import browser_page, watch_problems
from trellis.testing.plugin import TEST_ADMIN, TEST_MASTER_KEY

pytestmark = [pytest.mark.browser, pytest.mark.live]

TIMEOUT = 15_000
expect.set_options(timeout=TIMEOUT)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with browser_page() as page:
        page.set_default_timeout(TIMEOUT)
        page.on("dialog", lambda dialog: dialog.accept())  # the console confirms deletes and blocks
        yield page


# A 2x2 PNG (red, green, blue, white), made by Pillow.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000002000000020802000000fdd49a73"
    "0000001649444154789c63f8cfc0c0f09f819181e1ffffff0c001ef604fd09ed343e"
    "0000000049454e44ae426082"
)


class Console:
    """The page and the server it talks to."""

    def __init__(self, page: Any, url: str) -> None:
        self.page = page
        self.url = url
        self.problems: list[str] = []

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        response = requests.request(
            method, self.url + path, headers={"masterkey": TEST_MASTER_KEY}, timeout=10, **kwargs
        )
        assert response.status_code < 400, response.text
        return response.json()

    def open(self, name: str) -> None:
        self.page.goto(f"{self.url}/console/{name}")
        self.page.wait_for_selector("body[data-started]")  # its first lists are shown (console.js start)

    def sign_in(self) -> None:
        self.page.goto(self.url + "/console/login")
        self.page.fill("input[name=username]", TEST_ADMIN[0])
        self.page.fill("input[name=password]", TEST_ADMIN[1])
        self.page.fill("input[name=masterkey]", TEST_MASTER_KEY)
        self.page.click("button[type=submit]")
        self.page.wait_for_url(re.compile(r"/console/modules$"))


@pytest.fixture()
def console(browser: Any, live_server: Any) -> Iterator[Console]:
    console = Console(browser, live_server.url)
    with watch_problems(browser) as console.problems:
        yield console
    assert console.problems == []


def test_sign_in_configure_a_module_and_block_a_user(console: Console) -> None:
    page = console.page
    email = f"console-{uuid.uuid4().hex[:8]}@example.com"
    user = console.api("POST", "/authentication/users", json={"email": email, "password": "long-enough-1"})

    # Without a session every page sends you to the sign-in form, which refuses a wrong password.
    page.goto(console.url + "/console/users")
    page.wait_for_url(re.compile(r"/console/login\?next=%2Fconsole%2Fusers$"))
    page.fill("input[name=username]", TEST_ADMIN[0])
    page.fill("input[name=password]", "wrong password")
    page.fill("input[name=masterkey]", TEST_MASTER_KEY)
    page.click("button[type=submit]")
    expect(page.locator("#login-form .form-error")).to_contain_text("Wrong username or password")
    page.fill("input[name=password]", TEST_ADMIN[1])
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/console/users$"))

    # Block the user from the list; the API sees it.
    row = page.locator("#users tbody tr", has_text=email)
    row.locator("button", has_text="Block").click()
    expect(row.locator("td").nth(1)).to_have_text("blocked")
    expect(row.locator("button", has_text="Unblock")).to_be_visible()
    assert console.api("GET", f"/authentication/users?search={email}")["users"][0]["isActive"] is False
    assert user["isActive"] is True

    # A module config: a value the module refuses is shown next to its field and not stored …
    console.open("modules")
    card = page.locator("#module-authentication")
    field = card.locator("input[name=accessTokenMinutes]")
    field.fill("0")
    card.locator("button[type=submit]").click()
    error = card.locator("label:has(input[name=accessTokenMinutes]) .field-error")
    expect(error).to_contain_text("greater than or equal to 1")
    expect(field).to_have_attribute("aria-invalid", "true")
    assert console.api("GET", "/config/authentication")["accessTokenMinutes"] == 60
    # … a valid one is stored.
    field.fill("90")
    card.locator("button[type=submit]").click()
    expect(card.locator(".form-status")).to_have_text("Saved.")
    expect(card.locator(".field-error")).to_have_count(0)
    assert console.api("GET", "/config/authentication")["accessTokenMinutes"] == 90

    # Switching a module off from its card shows at once.
    sms = page.locator("#module-sms")
    if sms.count():
        sms.locator("input[name=active]").uncheck()
        sms.locator("button[type=submit]").click()
        expect(sms.locator(".badge")).to_have_text("inactive")
        assert console.api("GET", "/config/sms")["active"] is False

    # Signing out forgets the token: the pages ask for a sign-in again.
    page.click("#sign-out")
    page.wait_for_url(re.compile(r"/console/login"))
    assert page.evaluate("sessionStorage.length") == 0
    page.goto(console.url + "/console/modules")
    page.wait_for_url(re.compile(r"/console/login\?next="))


def test_schema_documents_and_openapi_export(console: Console, tmp_path: Any) -> None:
    page = console.page
    console.sign_in()
    console.open("database")

    # A new schema: a bad name is refused next to the name field, then the schema is created.
    page.click("#new-schema")
    form = page.locator("#schema-form")
    form.locator("input[name=name]").fill("9Books")
    rows = page.locator("#field-rows tr")
    assert rows.first.locator("[data-role=name]").input_value() == "title"
    page.click("#add-field")
    rows.nth(1).locator("[data-role=name]").fill("price")
    rows.nth(1).locator("[data-role=type]").select_option("Number")
    form.locator("button[type=submit]").click()
    form.locator("label:has(input[name=name]) .field-error").wait_for()
    form.locator("input[name=name]").fill("Book")
    form.locator("button[type=submit]").click()
    page.locator("#schema-editor").wait_for(state="hidden")
    schema = console.api("GET", "/admin/database/schemas/Book")
    assert schema["fields"] == {"title": {"type": "String", "required": True}, "price": {"type": "Number"}}

    # A document: a missing required field is shown inline, then the document is stored.
    page.locator("#schemas tbody tr", has_text="Book").locator("button", has_text="Documents").click()
    documents = page.locator("#document-form")
    documents.locator("input[name=price]").fill("9.5")
    documents.locator("button[type=submit]").click()
    documents.locator("label:has([name=title]) .field-error").wait_for()
    documents.locator("input[name=title]").fill("Dune <b>&amp;</b>")
    documents.locator("button[type=submit]").click()
    row = page.locator("#documents tbody tr", has_text="Dune")
    expect(row).to_contain_text("Dune <b>&amp;</b>")  # data is shown as text, never parsed as HTML
    stored = console.api("GET", "/database/Book")["documents"]
    assert [(d["title"], d["price"]) for d in stored] == [("Dune <b>&amp;</b>", 9.5)]

    # Edit it, and filter the list.
    row.locator("button", has_text="Edit").click()
    documents.locator("input[name=price]").fill("12")
    documents.locator("button[type=submit]").click()
    expect(page.locator("#documents tbody tr td", has_text=re.compile(r"^12$"))).to_have_count(1)
    assert console.api("GET", f"/database/Book/{stored[0]['_id']}")["price"] == 12
    filters = page.locator("#document-filter")
    filters.locator("select[name=field]").select_option("price")
    filters.locator("select[name=op]").select_option("$lt")
    filters.locator("input[name=value]").fill("10")
    filters.locator("button[type=submit]").click()
    expect(page.locator("#documents .list-status")).to_have_text("Nothing here yet.")

    # Export OpenAPI: the downloaded document has the routes generated for the new schema.
    with page.expect_download() as download:
        page.click("#export-openapi")
    saved = tmp_path / "openapi.json"
    download.value.save_as(saved)
    assert download.value.suggested_filename == "trellis-openapi.json"
    document = json.loads(saved.read_text())
    assert {"/database/Book", "/database/Book/{id}"} <= set(document["paths"])
    assert "/login" in document["paths"]


def test_every_page_shows_its_records(console: Console) -> None:
    from trellis_console.screenshots import Client, seed

    seed(Client(console.url, TEST_MASTER_KEY))
    loaded = {m["name"] for m in console.api("GET", "/config")["modules"]}
    page = console.page
    console.sign_in()
    expectations = {
        "database": ("#schemas", "Book"),
        "users": ("#users", "ada@example.com"),
        "email": ("#outbox", "Maintenance tonight"),
        "forms": ("#forms", "Contact"),
        "chat": ("#rooms", "Book club"),
        "storage": ("#files", "q3-summary.txt"),
        "sms": ("#sms-outbox", "Your code is 123456"),
        "push": ("#push-outbox", "Hello"),
    }
    # The pages the navigation offers: those of the loaded modules.
    offered = {
        href.rsplit("/", 1)[-1] for href in page.locator("nav.sidebar a").evaluate_all("a => a.map(l => l.href)")
    }
    assert {"modules", "project", "audit"} <= offered
    for name, (list_id, text) in expectations.items():
        if name not in offered:
            continue
        console.open(name)
        page.locator(f"{list_id} tbody tr", has_text=text).wait_for()

    if "database" in loaded:  # the audit log lists the seed's changes, filtered by module
        console.open("audit")
        audit = page.locator("#audit")
        audit.locator("select[name=module]").select_option("database")
        audit.locator("form.filters button[type=submit]").click()
        audit.locator("tbody tr", has_text="schema.create").first.wait_for()
        expect(audit.locator("tbody tr", has_text="config.update")).to_have_count(0)

    if "forms" in offered:  # a body field's documented choices, read from /openapi.json
        console.open("forms")
        expect(page.locator("#form-form [data-enum-text]")).to_have_text(
            re.compile(r"^text \| .*\bemail\b.* \| checkbox$")
        )

    if "chat" in loaded:  # rows open their details
        console.open("chat")
        page.locator("#rooms tbody tr", has_text="Book club").locator("button", has_text="Messages").click()
        page.locator("#messages tbody tr", has_text="Next up: Earthsea?").wait_for()

    if "storage" in loaded:  # an upload on behalf of a user
        console.open("storage")
        upload = page.locator("#upload-form")
        upload.locator("select[name=owner] option", has_text="grace@example.com").wait_for(state="attached")
        upload.locator("select[name=owner]").select_option(label="grace@example.com")
        upload.locator("input[name=file]").set_input_files(
            {"name": "minutes.txt", "mimeType": "text/plain", "buffer": b"meeting minutes\n"}
        )
        upload.locator("button[type=submit]").click()
        page.locator("#files tbody tr", has_text="minutes.txt").wait_for()
        grace = console.api("GET", "/authentication/users?search=grace@example.com")["users"][0]
        files = console.api("GET", "/admin/storage/files?search=minutes")["files"]
        assert [(f["owner"], f["size"]) for f in files] == [(grace["_id"], len(b"meeting minutes\n"))]
        # An image's row shows a thumbnail made by the transform route (the text file's has none).
        expect(upload.locator("select[name=owner]")).to_have_value("")  # the form is reset after an upload
        upload.locator("select[name=owner]").select_option(label="grace@example.com")
        upload.locator("input[name=file]").set_input_files(
            {"name": "pixel.png", "mimeType": "image/png", "buffer": PNG}
        )
        upload.locator("button[type=submit]").click()
        thumbnail = page.locator("#files tbody tr", has_text="pixel.png").locator("img.thumbnail")
        thumbnail.wait_for()
        assert thumbnail.evaluate("img => img.complete && img.naturalWidth") == 64
        assert thumbnail.get_attribute("src").startswith("data:image/webp;base64,")
        expect(page.locator("#files tbody tr", has_text="minutes.txt").locator("img")).to_have_count(0)


def test_pages_come_from_the_loaded_modules(console: Console, live_server_factory: Any) -> None:
    page = console.page
    loaded = [m["name"] for m in console.api("GET", "/config")["modules"]]
    console.sign_in()
    links = page.locator("nav.sidebar a")
    expect(links.first).to_have_text("Modules")
    expect(links.last).to_have_text("Audit log")
    if "sms" in loaded:
        # A filter's choices are the list route's documented enum, read from /openapi.json.
        console.open("sms")
        provider = page.locator("#sms-outbox select[name=provider] option")
        expect(provider).to_have_text(["Any provider", "outbox", "twilio"])
        expect(page.locator("#sms-outbox select[name=status] option")).to_have_text(["Any status", "sent", "failed"])

    # Another server on the same database with the console and one module: that module's page and no other.
    alone = Console(page, live_server_factory(TRELLIS_MODULES="console,sms").url)
    alone.sign_in()
    expect(links).to_have_text(["Modules", "SMS", "Project", "Audit log"])
    links.filter(has_text="SMS").click()
    page.locator("#sms-form").wait_for()
    expect(page.locator("#sms-outbox select[name=provider] option")).to_have_count(3)
    assert requests.get(f"{alone.url}/console/users", timeout=10).status_code == 404
    assert requests.get(f"{alone.url}/console/database", timeout=10).status_code == 404
