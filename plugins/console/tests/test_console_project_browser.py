"""The Project page in headless Chromium against a real server: the export downloaded, a changed copy of it
uploaded, planned (a schema to create, the email config's `from` to update) and applied with a second
click, then planned again to no changes; an invalid project shows the 400 naming its path."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import requests
from playwright.sync_api import expect

from trellis.testing.plugin import TEST_MASTER_KEY

from .test_console_browser import Console, browser, console  # noqa: F401  (the fixtures of the console's tests)

pytestmark = [pytest.mark.browser, pytest.mark.live]


def test_export_plan_and_apply_a_project(console: Console, tmp_path: Any) -> None:
    modules = {m["name"] for m in console.api("GET", "/config")["modules"]}
    if not {"database", "email"} <= modules:
        pytest.skip("the Database and Email modules are not loaded")
    page = console.page
    # Every console error, not only the CSP reports the fixture watches: the one expected below is the 400
    # Chromium logs for the invalid project.
    errors: list[str] = []

    def on_console(message: Any) -> None:
        if message.type == "error":
            errors.append(message.text)

    page.on("console", on_console)
    console.sign_in()
    console.open("project")
    expect(page.locator("nav.sidebar a[aria-current=page]")).to_have_text("Project")
    plan_button = page.locator("#project-plan")
    apply_button = page.locator("#project-apply")
    expect(plan_button).to_be_disabled()
    expect(apply_button).to_be_disabled()

    # Export: the file the server holds, as a download.
    with page.expect_download() as download:
        page.click("#project-export")
    assert download.value.suggested_filename == "project.json"
    exported = tmp_path / "exported.json"
    download.value.save_as(exported)
    project = json.loads(exported.read_text())
    assert project["version"] == 1 and "database" in project["modules"]
    assert "Note" not in project["modules"]["database"]["schemas"]
    assert (
        exported.read_text()
        == requests.get(console.url + "/admin/project", headers={"masterkey": TEST_MASTER_KEY}, timeout=10).text
    )

    # A file that is not JSON: said in the form, nothing thrown.
    form = page.locator("#project-form")
    broken = tmp_path / "broken.json"
    broken.write_text("{oops")
    form.locator("input[name=file]").set_input_files(broken)
    expect(form.locator(".form-error")).to_contain_text("broken.json is not valid JSON")
    expect(plan_button).to_be_disabled()

    # A changed copy: a new schema, another sender.
    before = project["modules"]["email"]["config"]["from"]
    project["modules"]["database"]["schemas"]["Note"] = {"fields": {"text": "String"}}
    sender = '"<b>Ops</b>" <ops@example.com>'
    project["modules"]["email"]["config"]["from"] = sender
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(project))
    form.locator("input[name=file]").set_input_files(changed)
    expect(form.locator(".form-error")).to_be_hidden()
    plan_button.click()
    result = page.locator("#project-plan-result")
    create = result.locator("tbody tr[data-action=create]")
    expect(create).to_have_count(1)
    expect(create.locator("td")).to_have_text(["+create", "database", "schema", "Note", ""])
    update = result.locator("tbody tr[data-action=update]")
    expect(update).to_have_count(1)
    expect(update.locator("td").nth(3)).to_have_text("email")
    expect(update.locator(".plan-detail li")).to_have_text(
        [f"~ from: {json.dumps(before)} → {json.dumps(sender)}"]  # as text.py shows it: text, never parsed as HTML
    )
    expect(result.locator("tbody b")).to_have_count(0)
    expect(page.locator("#project-plan-summary")).to_have_text("Plan: 1 to create, 1 to update, 0 to delete.")
    assert (
        requests.get(
            console.url + "/admin/database/schemas/Note", headers={"masterkey": TEST_MASTER_KEY}, timeout=10
        ).status_code
        == 404
    )  # a plan changes nothing

    # Apply asks for a second click, then applies and plans again: nothing left to change.
    expect(apply_button).to_be_enabled()
    apply_button.click()
    expect(apply_button).to_have_text("Confirm apply")
    expect(page.locator("#project-apply-hint")).to_be_visible()
    assert (
        requests.get(
            console.url + "/admin/database/schemas/Note", headers={"masterkey": TEST_MASTER_KEY}, timeout=10
        ).status_code
        == 404
    )
    apply_button.click()
    expect(page.locator("#flash")).to_have_text("Applied 2 changes.")
    expect(page.locator("#project-plan-summary")).to_have_text(
        "No changes: the server already is what the project says."
    )
    expect(result.locator("tbody tr")).to_have_count(0)
    expect(apply_button).to_be_disabled()
    expect(apply_button).to_have_text("Apply")
    schema = console.api("GET", "/admin/database/schemas/Note")
    assert schema["name"] == "Note" and "text" in schema["fields"]
    assert console.api("GET", "/config/email")["from"] == sender

    # An invalid project: the 400's message names the path; the plan shown before is gone.
    project["modules"]["database"]["schemas"]["Bad"] = {"fields": {"x": "NoSuchType"}}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(project))
    form.locator("input[name=file]").set_input_files(bad)
    expect(result).to_be_hidden()
    expect(page.locator("#flash")).to_be_hidden()
    plan_button.click()
    error = form.locator(".form-error")
    expect(error).to_contain_text(re.compile(r"Invalid project at modules\.database\.schemas\.Bad\.fields\.x"))
    expect(error.locator("div")).to_have_count(0)  # the one error's path is in the message: not listed again
    expect(result).to_be_hidden()
    expect(apply_button).to_be_disabled()
    assert (
        requests.get(
            console.url + "/admin/database/schemas/Bad", headers={"masterkey": TEST_MASTER_KEY}, timeout=10
        ).status_code
        == 404
    )

    page.remove_listener("console", on_console)
    expected = [e for e in errors if re.search(r"Failed to load resource: .* status of 400", e)]
    assert len(expected) == 1, errors
    assert [e for e in errors if e not in expected] == []
