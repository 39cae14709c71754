"""The recipes of docs/functions.md, file by file, against a real server: the docs cannot drift."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trellis_authentication.testing import create_user_over_http

from .conftest import Api, eventually

pytestmark = pytest.mark.live

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "functions.md"
SHOWN_FILE = re.compile(r"<!-- file: (?P<name>\S+) -->\n```python\n(?P<text>.*?)```\n", re.S)
ACCESS = {"conduit": {"authorization": {"enabled": True}}}


def recipes() -> dict[str, str]:
    return {match["name"]: match["text"] for match in SHOWN_FILE.finditer(GUIDE.read_text())}


def test_the_guide_shows_five_recipes():
    assert sorted(recipes()) == ["cleanup.py", "done_stays_done.py", "invoices.py", "order_mail.py", "slugs.py"]


@pytest.fixture()
def api(start, folder):
    for name, text in recipes().items():
        folder.write(name, text)
    server = start()
    found = Api(server.url)
    files = found.call("GET", "/admin/functions", 200).json()["files"]
    assert all(f["loaded"] for f in files) and len(files) == 5, files
    return found


def test_a_derived_field(api):
    api.schema({"title": "String", "slug": "String"}, name="Article")
    made = api.call("POST", "/database/Article", 201, json={"title": "Hello Big World"}).json()
    assert made["slug"] == "hello-big-world"
    changed = api.call("PATCH", f"/database/Article/{made['_id']}", 200, json={"title": "Bye"}).json()
    assert changed["slug"] == "bye"


def test_a_rule_between_old_and_new(api):
    api.schema({"title": "String", "done": "Boolean"}, name="Task")
    task = api.call("POST", "/database/Task", 201, json={"title": "t", "done": True}).json()
    refused = api.call("PATCH", f"/database/Task/{task['_id']}", 409, json={"done": False}).json()
    assert refused["errors"] == {"done": ["Cannot be reopened"]}
    api.call("PATCH", f"/database/Task/{task['_id']}", 200, json={"title": "still done"})


def test_a_mail_after_a_create(api):
    api.schema({"email": "String", "item": "String"}, name="Order")
    api.call("POST", "/database/Order", 201, json={"email": "ada@example.com", "item": "a lamp"})

    def mailed():
        messages = api.call("GET", "/admin/email/outbox", 200).json()["messages"]
        return [m for m in messages if m["to"] == "ada@example.com"]

    (message,) = eventually(mailed)
    assert message["subject"] == "Thank you for your order" and "a lamp" in message["body"]


def test_a_callable_that_adds_up_under_the_callers_access(api):
    api.schema({"amount": "Number", "status": "String"}, name="Invoice", modelOptions=ACCESS)
    alice, bob = create_user_over_http(api.url), create_user_over_http(api.url)
    for amount, status in ((10, "paid"), (5, "open")):
        api.call("POST", "/database/Invoice", 201, headers=alice.headers, json={"amount": amount, "status": status})
    api.call("POST", "/database/Invoice", 201, headers=bob.headers, json={"amount": 100, "status": "paid"})
    total = api.call("POST", "/functions/invoice_total", 200, headers=alice.headers, json={}).json()
    paid = api.call("POST", "/functions/invoice_total", 200, headers=alice.headers, json={"status": "paid"}).json()
    assert (total, paid) == ({"result": 15}, {"result": 10})


def test_a_nightly_cleanup(api):
    api.schema({"name": "String", "expiresAt": "Date"}, name="Visit")
    api.call("POST", "/database/Visit", 201, json={"name": "old", "expiresAt": "2020-01-01T00:00:00Z"})
    api.call("POST", "/database/Visit", 201, json={"name": "new", "expiresAt": "2999-01-01T00:00:00Z"})
    api.call("POST", "/admin/functions/schedules/remove_expired/run", 202)
    entry = eventually(lambda: api.log(function="remove_expired"))[0]
    assert entry["status"] == "ok" and entry["message"] == "removed 1 expired visits"
    assert [v["name"] for v in api.documents("Visit")] == ["new"]
