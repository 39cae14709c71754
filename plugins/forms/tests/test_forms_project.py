"""Forms in project as code: ``modules.forms.forms`` exported, planned and applied through ``/admin/project``,
checked back through ``/admin/forms``."""

from __future__ import annotations

from typing import Any

import pytest

SURVEY = {"fields": [{"name": "answer", "type": "text", "required": True}], "enabled": True, "forwardTo": None}


def project(forms: dict[str, Any] | None = None, /, **modules: Any) -> dict[str, Any]:
    """A project naming ``modules.forms.forms`` (unless None) and any other sections given."""
    section = {} if forms is None else {"forms": {"forms": forms}}
    return {"version": 1, "modules": {**section, **modules}}


@pytest.fixture()
def forms(client, admin_headers):
    """The forms as ``GET /admin/forms`` shows them, by name."""

    def read() -> dict[str, dict[str, Any]]:
        response = client.get("/admin/forms?limit=1000", headers=admin_headers)
        assert response.status_code == 200, response.get_json()
        return {form["name"]: form for form in response.get_json()["forms"]}

    return read


@pytest.fixture()
def survey(client, admin_headers) -> dict[str, Any]:
    response = client.post("/admin/forms", json={"name": "Survey", **SURVEY}, headers=admin_headers)
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def test_export_shows_each_form_without_ids_or_timestamps(project_call, client, admin_headers, survey):
    exported = client.get("/admin/project", headers=admin_headers).get_json()
    assert exported["modules"]["forms"]["forms"] == {"Survey": SURVEY}
    assert project_call("plan", exported)["count"] == 0  # an export applies to its own server as nothing


def test_a_change_plans_its_paths_applies_and_applies_once(project_call, forms, survey):
    changed = project({"Survey": {**SURVEY, "enabled": False, "forwardTo": "team@example.com"}})
    planned = project_call("plan", changed)
    assert planned == {
        "count": 1,
        "changes": [
            {
                "module": "forms",
                "kind": "form",
                "name": "Survey",
                "action": "update",
                "detail": [
                    {"op": "change", "path": "enabled", "from": True, "to": False},
                    {"op": "change", "path": "forwardTo", "from": None, "to": "team@example.com"},
                ],
            }
        ],
    }
    assert forms()["Survey"]["enabled"] is True  # a plan changes nothing
    assert project_call("apply", changed) == planned
    after = forms()["Survey"]
    assert (after["_id"], after["enabled"], after["forwardTo"]) == (survey["_id"], False, "team@example.com")
    assert project_call("apply", changed)["count"] == 0


def test_defaults_are_filled_as_create_fills_them(project_call, forms):
    wanted = project({"Poll": {"fields": [{"name": "answer", "type": "text"}], "forwardTo": "Team@Example.COM"}})
    applied = project_call("apply", wanted)
    assert applied["changes"] == [{"module": "forms", "kind": "form", "name": "Poll", "action": "create"}]
    poll = forms()["Poll"]
    assert poll["fields"] == [{"name": "answer", "type": "text", "required": False}]
    assert (poll["enabled"], poll["forwardTo"]) == (True, "Team@example.com")
    assert project_call("plan", wanted)["count"] == 0  # left-out defaults and the address as written compare equal


@pytest.mark.parametrize(
    "thing,path",
    [
        ({"fields": [{"name": "x", "type": "no-such-type"}]}, "modules.forms.forms.Poll.fields.0.type"),
        ({"fields": [{"name": "x", "type": "text"}] * 2}, "modules.forms.forms.Poll.fields"),
        ({"fields": []}, "modules.forms.forms.Poll.fields"),
        ({"fields": [{"name": "_gotcha", "type": "text"}]}, "modules.forms.forms.Poll.fields"),  # the honeypot
        ({**SURVEY, "forwardTo": "not an address"}, "modules.forms.forms.Poll.forwardTo"),
        ({**SURVEY, "createdAt": "2024-01-01T00:00:00Z"}, "modules.forms.forms.Poll.createdAt"),
        ({**SURVEY, "name": "Other"}, "modules.forms.forms.Poll.name"),
        ({"enabled": True}, "modules.forms.forms.Poll.fields"),
        ([], "modules.forms.forms.Poll"),
    ],
)
def test_an_invalid_form_is_400_naming_its_path(project_call, forms, thing, path):
    for verb in ("plan", "apply"):
        answer = project_call(verb, project({"Poll": thing}), expect=400)
        assert answer["message"].startswith(f"Invalid project at {path}:"), answer
        assert list(answer["errors"]) == [path]
    assert forms() == {}


def test_prune_deletes_only_within_a_kind_the_project_names(project_call, forms, survey, client):
    assert client.post(f"/forms/submit/{survey['_id']}", json={"answer": "yes"}).status_code == 201
    assert project_call("apply", project(None), prune=True)["count"] == 0  # modules.forms is not named
    assert project_call("apply", project(None, forms={"config": {}}), prune=True)["count"] == 0  # nor its forms
    assert project_call("apply", project({}))["count"] == 0  # named, but without prune
    assert "Survey" in forms()
    pruned = project_call("apply", project({"Poll": SURVEY}), prune=True)
    assert pruned["changes"] == [
        {"module": "forms", "kind": "form", "name": "Poll", "action": "create"},
        {"module": "forms", "kind": "form", "name": "Survey", "action": "delete"},
    ]
    assert sorted(forms()) == ["Poll"]


def test_a_refused_form_leaves_the_config_and_the_other_forms_unapplied(project_call, forms, client, admin_headers):
    before = client.get("/config/forms", headers=admin_headers).get_json()
    bad = {"fields": [{"name": "x", "type": "no-such-type"}]}
    section = {"config": {"rateLimit": "5/minute"}, "forms": {"Poll": SURVEY, "Zzz": bad}}
    answer = project_call("apply", project(None, forms=section), expect=400)
    assert answer["message"].startswith("Invalid project at modules.forms.forms.Zzz.fields.0.type:"), answer
    assert forms() == {}
    assert client.get("/config/forms", headers=admin_headers).get_json() == before


def test_the_project_config_is_in_force_when_its_forms_are_checked(project_call, forms):
    """The honeypot field the project configures (config applies before every part) is refused as a field."""
    trap = {"fields": [{"name": "website", "type": "text"}]}
    section = {"config": {"honeypotField": "website"}, "forms": {"Trap": trap}}
    answer = project_call("plan", project(None, forms=section), expect=400)
    assert answer["message"].startswith("Invalid project at modules.forms.forms.Trap.fields:"), answer
