"""Webhooks in project as code: ``modules.webhooks.webhooks`` exported, planned and applied through
``/admin/project``, checked back through ``/admin/webhooks`` and the signatures of pings."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import pytest

from trellis.redact import MASK

URL = "http://127.0.0.1:9/hooks"
EVENTS = ["database.Item.*", "authentication.user.create"]
SECRET = "the-first-secret-0123456789"


def project(webhooks: dict[str, Any] | None = None, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """A project naming ``modules.webhooks.webhooks`` (unless None) and the module's config (if given)."""
    section = ({} if webhooks is None else {"webhooks": webhooks}) | ({} if config is None else {"config": config})
    return {"version": 1, "modules": {"webhooks": section} if section else {}}


def signed_with(secret: str, got: Any) -> bool:
    t, v1 = (item.split("=", 1)[1] for item in got.headers["Trellis-Signature"].split(","))
    return hmac.compare_digest(v1, hmac.new(secret.encode(), f"{t}.".encode() + got.body, hashlib.sha256).hexdigest())


@pytest.fixture()
def webhooks(client, admin_headers):
    """The webhooks as ``GET /admin/webhooks`` shows them, oldest first."""

    def read() -> list[dict[str, Any]]:
        response = client.get("/admin/webhooks?limit=1000", headers=admin_headers)
        assert response.status_code == 200, response.get_json()
        return list(response.get_json()["webhooks"])

    return read


@pytest.fixture()
def ping(client, admin_headers):
    def send(webhook_id: str) -> None:
        response = client.post(f"/admin/webhooks/{webhook_id}/ping", headers=admin_headers)
        assert response.status_code == 200, response.get_json()
        assert response.get_json()["status"] == "delivered", response.get_json()

    return send


def test_export_shows_each_webhook_by_url_without_ids_timestamps_or_its_secret(
    project_call, client, admin_headers, allow_private, make_webhook
):
    make_webhook(URL, EVENTS, secret=SECRET, description="CRM sync")
    make_webhook("http://127.0.0.1:9/other", ["chat.message.create"], active=False)
    response = client.get("/admin/project", headers=admin_headers)
    assert SECRET not in response.get_data(as_text=True)
    exported = response.get_json()
    assert exported["modules"]["webhooks"]["webhooks"] == {
        URL: {"events": EVENTS, "secret": MASK, "active": True, "description": "CRM sync"},
        "http://127.0.0.1:9/other": {
            "events": ["chat.message.create"],
            "secret": MASK,
            "active": False,
            "description": None,
        },
    }
    assert project_call("plan", exported)["count"] == 0  # an export applies to its own server as nothing


def test_a_project_creates_webhooks_with_the_defaults_post_fills_and_applies_once(
    project_call, webhooks, allow_private
):
    wanted = project({URL: {"events": EVENTS, "secret": MASK}, "http://127.0.0.1:9/b": {"events": ["*.*.create"]}})
    applied = project_call("apply", wanted)
    assert applied["changes"] == [
        {"module": "webhooks", "kind": "webhook", "name": "http://127.0.0.1:9/b", "action": "create"},
        {"module": "webhooks", "kind": "webhook", "name": URL, "action": "create"},
    ]
    created = {webhook["url"]: webhook for webhook in webhooks()}
    assert {url: (w["events"], w["active"], w["description"]) for url, w in created.items()} == {
        URL: (EVENTS, True, None),
        "http://127.0.0.1:9/b": (["*.*.create"], True, None),
    }
    assert project_call("apply", wanted)["count"] == 0  # the generated secrets are kept: a masked or missing secret
    given = project({URL: {"events": EVENTS, "secret": SECRET, "active": True, "description": None}})
    assert [change["action"] for change in project_call("apply", given)["changes"]] == ["update"]
    assert project_call("apply", given)["count"] == 0
    assert [webhook["_id"] for webhook in webhooks()] == [webhook["_id"] for webhook in created.values()]


def test_a_changed_event_list_plans_an_update_naming_its_path_and_keeps_the_secret(
    project_call, webhooks, allow_private, receiver, make_webhook, ping
):
    webhook = make_webhook(receiver.url, EVENTS, secret=SECRET)
    changed = project({receiver.url: {"events": ["chat.message.create"], "secret": MASK}})
    planned = project_call("plan", changed)
    assert planned == {
        "count": 1,
        "changes": [
            {
                "module": "webhooks",
                "kind": "webhook",
                "name": receiver.url,
                "action": "update",
                "detail": [{"op": "change", "path": "events", "from": EVENTS, "to": ["chat.message.create"]}],
            }
        ],
    }
    assert webhooks()[0]["events"] == EVENTS  # a plan changes nothing
    assert project_call("apply", changed) == planned
    (after,) = webhooks()
    assert (after["_id"], after["events"]) == (webhook["_id"], ["chat.message.create"])
    assert project_call("apply", changed)["count"] == 0
    ping(webhook["_id"])
    (got,) = receiver.wait_for(1)
    assert signed_with(SECRET, got), "a masked secret keeps the stored one"


def test_a_new_secret_replaces_the_stored_one_masked_in_the_plan_and_the_audit(
    project_call, client, admin_headers, webhooks, allow_private, receiver, make_webhook, ping
):
    webhook = make_webhook(receiver.url, EVENTS, secret=SECRET)
    new = "the-second-secret-9876543210"
    changed = project({receiver.url: {"events": EVENTS, "secret": new}})
    response = client.post("/admin/project/plan", json={"project": changed}, headers=admin_headers)
    assert response.status_code == 200 and new not in response.get_data(as_text=True)
    assert response.get_json()["changes"][0]["detail"] == [{"op": "change", "path": "secret", "from": MASK, "to": MASK}]
    assert project_call("apply", changed)["count"] == 1
    assert project_call("apply", changed)["count"] == 0
    assert project_call("apply", project({receiver.url: {"events": EVENTS, "secret": MASK}}))["count"] == 0
    ping(webhook["_id"])
    (got,) = receiver.wait_for(1)
    assert signed_with(new, got) and not signed_with(SECRET, got)
    audit = client.get("/admin/audit?limit=1000", headers=admin_headers).get_data(as_text=True)
    assert new not in audit and SECRET not in audit


@pytest.mark.parametrize(
    "key,thing,where",
    [
        ("ftp://example.com/hooks", {"events": EVENTS}, "url"),
        ("not a url", {"events": EVENTS}, "url"),
        (URL, {"events": EVENTS, "url": "http://127.0.0.1:9/else"}, "url"),
        (URL, {"events": []}, "events"),
        (URL, {"events": ["no-such-pattern-form"]}, "events"),
        (URL, {"secret": MASK}, "events"),
        (URL, {"events": EVENTS, "secret": "short"}, "secret"),
        (URL, {"events": EVENTS, "_id": "abc"}, "_id"),
        (URL, {"events": EVENTS, "createdAt": "2024-01-01T00:00:00Z"}, "createdAt"),
        (URL, ["database.*.*"], None),
    ],
)
def test_an_invalid_webhook_is_400_naming_its_path(project_call, webhooks, allow_private, key, thing, where):
    path = f"modules.webhooks.webhooks.{key}" + (f".{where}" if where else "")
    for verb in ("plan", "apply"):
        answer = project_call(verb, project({key: thing}), expect=400)
        assert answer["message"].startswith(f"Invalid project at {path}:"), answer
        assert list(answer["errors"]) == [path]
    assert webhooks() == []


def test_a_private_target_is_refused_by_the_service_naming_the_url(project_call, webhooks):
    answer = project_call("plan", project({URL: {"events": EVENTS}}), expect=400)
    assert list(answer["errors"]) == [f"modules.webhooks.webhooks.{URL}.url"]
    assert "127.0.0.1" in answer["errors"][f"modules.webhooks.webhooks.{URL}.url"][0]
    # The same project with the switch in its config: the config is in force for the rest of the apply.
    allowed = project({URL: {"events": EVENTS}}, {"allowPrivateTargets": True})
    assert project_call("apply", allowed)["count"] == 2
    assert [webhook["url"] for webhook in webhooks()] == [URL]


def test_prune_deletes_only_within_a_kind_the_project_names(project_call, webhooks, allow_private, make_webhook):
    make_webhook(URL, EVENTS)
    other = make_webhook("http://127.0.0.1:9/other")
    assert project_call("apply", project(None), prune=True)["count"] == 0  # modules.webhooks is not named
    assert project_call("apply", project(None, {"allowPrivateTargets": True}), prune=True)["count"] == 0
    kept = project({"http://127.0.0.1:9/other": {"events": ["database.*.*"]}})
    assert project_call("apply", kept)["count"] == 0  # named, but without prune
    assert len(webhooks()) == 2
    pruned = project_call("apply", kept, prune=True)
    assert pruned["changes"] == [{"module": "webhooks", "kind": "webhook", "name": URL, "action": "delete"}]
    assert [webhook["_id"] for webhook in webhooks()] == [other["_id"]]


def test_webhooks_of_one_url_are_numbered_by_creation(
    project_call, client, admin_headers, webhooks, allow_private, make_webhook
):
    first = make_webhook(URL, ["database.*.*"])
    second = make_webhook(URL, ["chat.message.create"], description="chat")
    exported = client.get("/admin/project", headers=admin_headers).get_json()
    section = exported["modules"]["webhooks"]["webhooks"]
    assert {key: thing["events"] for key, thing in section.items()} == {
        URL: ["database.*.*"],
        f"{URL} (2)": ["chat.message.create"],
    }
    assert project_call("plan", exported)["count"] == 0

    # A gap is refused: what it created would be keyed back otherwise.
    gap = project({**section, f"{URL} (4)": {"events": ["*.*.create"]}})
    answer = project_call("plan", gap, expect=400)
    assert list(answer["errors"]) == [f"modules.webhooks.webhooks.{URL} (4)"]

    # Creates in number order, beyond (9) too; a second apply plans nothing.
    more = {f"{URL} ({n})": {"events": [f"database.S{n}.create"]} for n in range(3, 12)}
    wanted = project({**section, **more})
    applied = project_call("apply", wanted)
    assert [change["name"] for change in applied["changes"]] == [f"{URL} ({n})" for n in range(3, 12)]
    assert project_call("apply", wanted)["count"] == 0
    assert [webhook["events"] for webhook in webhooks()][2:] == [[f"database.S{n}.create"] for n in range(3, 12)]

    # A prune deletes from the last, so the numbers of those left stay.
    pruned = project_call(
        "apply", project({**section, f"{URL} (2)": {**section[f"{URL} (2)"], "active": False}}), prune=True
    )
    assert [(change["name"], change["action"]) for change in pruned["changes"]] == [
        (f"{URL} (2)", "update"),
        *((f"{URL} ({n})", "delete") for n in range(11, 2, -1)),
    ]
    left = webhooks()
    assert [(webhook["_id"], webhook["active"]) for webhook in left] == [(first["_id"], True), (second["_id"], False)]
