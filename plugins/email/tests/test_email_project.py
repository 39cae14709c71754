"""Templates in project as code: ``modules.email.templates`` exported, planned and applied through
``/admin/project``, checked back through ``/admin/email/templates``."""

from __future__ import annotations

from typing import Any

import pytest

WELCOME = {"subject": "Welcome {{ name }}", "body": "<p>Hi {{name}}</p>"}


def project(templates: dict[str, Any] | None = None, **modules: Any) -> dict[str, Any]:
    """A project naming ``modules.email.templates`` (unless None) and any other sections given."""
    email = {} if templates is None else {"email": {"templates": templates}}
    return {"version": 1, "modules": {**email, **modules}}


@pytest.fixture()
def templates(client, admin_headers):
    """The templates as ``GET /admin/email/templates`` shows them, by name."""

    def read() -> dict[str, dict[str, Any]]:
        response = client.get("/admin/email/templates?limit=1000", headers=admin_headers)
        assert response.status_code == 200, response.get_json()
        return {template["name"]: template for template in response.get_json()["templates"]}

    return read


@pytest.fixture()
def welcome(client, admin_headers) -> dict[str, Any]:
    response = client.post("/admin/email/templates", json={"name": "welcome", **WELCOME}, headers=admin_headers)
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def test_export_shows_each_template_without_ids_timestamps_or_provider_state(
    project_call, client, admin_headers, welcome
):
    exported = client.get("/admin/project", headers=admin_headers).get_json()
    exported_templates = exported["modules"]["email"]["templates"]
    assert exported_templates["welcome"] == {**WELCOME, "variables": ["name"]}
    # Any other: a template the Authentication module keeps for its mails (made when an app starts).
    assert set(exported_templates) - {"welcome"} <= {
        "EmailVerification",
        "ForgotPassword",
        "ChangeEmailVerification",
        "MagicLink",
        "TeamInvite",
    }
    assert project_call("plan", exported)["count"] == 0  # an export applies to its own server as nothing


def test_a_change_plans_its_paths_applies_and_applies_once(project_call, templates, welcome):
    changed = project({"welcome": {**WELCOME, "subject": "Hello {{ name }}"}})
    planned = project_call("plan", changed)
    assert planned == {
        "count": 1,
        "changes": [
            {
                "module": "email",
                "kind": "template",
                "name": "welcome",
                "action": "update",
                "detail": [{"op": "change", "path": "subject", "from": WELCOME["subject"], "to": "Hello {{ name }}"}],
            }
        ],
    }
    assert templates()["welcome"]["subject"] == WELCOME["subject"]  # a plan changes nothing
    assert project_call("apply", changed) == planned
    after = templates()["welcome"]
    assert (after["_id"], after["subject"], after["variables"]) == (welcome["_id"], "Hello {{ name }}", ["name"])
    assert project_call("apply", changed)["count"] == 0


def test_a_new_template_derives_its_variables_as_create_does(project_call, templates):
    wanted = project({"reset": {"subject": "Reset", "body": "<a href='{{ link }}'>{{ name }}</a>"}})
    applied = project_call("apply", wanted)
    assert applied["changes"] == [{"module": "email", "kind": "template", "name": "reset", "action": "create"}]
    assert templates()["reset"]["variables"] == ["link", "name"]
    assert project_call("plan", wanted)["count"] == 0  # variables left out compare equal to the derived ones
    declared = {**wanted["modules"]["email"]["templates"]["reset"], "variables": ["name", "link"]}
    assert (
        project_call("plan", project({"reset": declared}))["count"] == 0
    )  # declared in any order, as create takes them


@pytest.mark.parametrize(
    "thing,path",
    [
        ({**WELCOME, "body": "<p>{{ name </p>"}, "modules.email.templates.welcome.body"),
        ({**WELCOME, "variables": ["name", "unused"]}, "modules.email.templates.welcome.variables"),
        ({**WELCOME, "subject": ""}, "modules.email.templates.welcome.subject"),
        ({"body": "x"}, "modules.email.templates.welcome.subject"),
        ({**WELCOME, "_id": "abc"}, "modules.email.templates.welcome._id"),
        ({**WELCOME, "name": "other"}, "modules.email.templates.welcome.name"),
        ("Welcome", "modules.email.templates.welcome"),
    ],
)
def test_an_invalid_template_is_400_naming_its_path(project_call, templates, thing, path):
    for verb in ("plan", "apply"):
        answer = project_call(verb, project({"welcome": thing}), expect=400)
        assert answer["message"].startswith(f"Invalid project at {path}:"), answer
        assert list(answer["errors"]) == [path]
    assert templates() == {}


def test_prune_deletes_only_within_a_kind_the_project_names(project_call, templates, welcome):
    assert project_call("apply", project(None), prune=True)["count"] == 0  # modules.email is not named
    assert project_call("apply", project(None, email={"config": {}}), prune=True)["count"] == 0  # nor its templates
    assert project_call("apply", project({}))["count"] == 0  # named, but without prune
    assert "welcome" in templates()
    pruned = project_call("apply", project({"other": WELCOME}), prune=True)
    assert pruned["changes"] == [
        {"module": "email", "kind": "template", "name": "other", "action": "create"},
        {"module": "email", "kind": "template", "name": "welcome", "action": "delete"},
    ]
    assert sorted(templates()) == ["other"]


def test_a_later_module_failing_leaves_nothing_applied(project_call, templates, client, admin_headers):
    before = client.get("/config/email", headers=admin_headers).get_json()
    broken = project(
        {"fresh": WELCOME},
        forms={"forms": {"Contact": {"fields": [{"name": "x", "type": "no-such-type"}]}}},
    )
    broken["modules"]["email"]["config"] = {"from": "changed@example.com"}
    answer = project_call("apply", broken, expect=400)
    assert "modules.forms.forms.Contact.fields" in answer["message"]
    assert templates() == {}
    assert client.get("/config/email", headers=admin_headers).get_json() == before
