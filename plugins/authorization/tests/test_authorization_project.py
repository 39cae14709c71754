"""Resource definitions in project as code: ``modules.authorization.resources`` exported, planned and
applied through ``/admin/project``, checked back through ``/admin/authorization/resources``."""

from __future__ import annotations

from typing import Any

import pytest

RELATIONS = {"owner": ["User", "Team"], "editor": ["User", "Team", "*"], "reader": ["User", "Team", "*"]}
PERMISSIONS = {
    "read": ["reader", "editor", "owner"],
    "edit": ["editor", "owner"],
    "delete": ["owner"],
    "share": ["owner"],
}
DEFAULT = {"relations": RELATIONS, "permissions": PERMISSIONS}
# Readers no longer read; a new permission, comment.
CHANGED = {"relations": RELATIONS, "permissions": {**PERMISSIONS, "read": ["editor", "owner"], "comment": ["reader"]}}
NO_OWNER = {"read": ["reader"], "edit": [], "delete": [], "share": []}
OPTED_IN = {"conduit": {"authorization": {"enabled": True}}}


def project(resources: dict[str, Any] | None = None, /, **modules: Any) -> dict[str, Any]:
    """A project naming ``modules.authorization.resources`` (unless None) and any other sections given."""
    section = {} if resources is None else {"authorization": {"resources": resources}}
    return {"version": 1, "modules": {**section, **modules}}


@pytest.fixture()
def send(access):
    def post(verb: str, body: dict[str, Any], prune: bool = False, expect: int = 200) -> dict[str, Any]:
        return access.call("POST", f"/admin/project/{verb}", expect=expect, json={"project": body, "prune": prune})

    return post


@pytest.fixture()
def note(access) -> None:
    access.opted_in("Note", {"text": "String"})
    access.create_schema("Open", {"text": "String"})  # not under access control


def resource(access, name: str) -> dict[str, Any]:
    found = access.call("GET", f"/admin/authorization/resources/{name}")
    return {key: found[key] for key in ("relations", "permissions")}


def test_export_shows_the_definition_of_each_schema_under_access_control(access, send, note):
    exported = access.call("GET", "/admin/project")
    assert exported["modules"]["authorization"]["resources"] == {"Note": DEFAULT}
    assert send("plan", exported)["count"] == 0  # an export applies to its own server as nothing


def test_a_change_plans_its_paths_applies_audited_and_applies_once(access, send, note):
    planned = send("plan", project({"Note": CHANGED}))
    assert planned == {
        "count": 1,
        "changes": [
            {
                "module": "authorization",
                "kind": "resource",
                "name": "Note",
                "action": "update",
                "detail": [
                    {"op": "add", "path": "permissions.comment", "to": ["reader"]},
                    {
                        "op": "change",
                        "path": "permissions.read",
                        "from": PERMISSIONS["read"],
                        "to": ["editor", "owner"],
                    },
                ],
            }
        ],
    }
    assert resource(access, "Note") == DEFAULT  # a plan changes nothing
    assert send("apply", project({"Note": CHANGED})) == planned
    assert resource(access, "Note") == CHANGED
    assert send("apply", project({"Note": CHANGED}))["count"] == 0
    # the audit entry PATCH /admin/authorization/resources/Note records
    entries = access.call("GET", "/admin/audit", query_string={"module": "authorization"})["entries"]
    assert [(e["action"], e["target"], e["changes"]) for e in entries] == [("resource.update", "Note", CHANGED)]


def test_a_key_left_out_is_the_default_definitions(access, send, note):
    access.call("PATCH", "/admin/authorization/resources/Note", json={"relations": {**RELATIONS, "viewer": ["User"]}})
    applied = send("apply", project({"Note": {"permissions": PERMISSIONS}}))
    assert applied["changes"][0]["detail"] == [{"op": "remove", "path": "relations.viewer", "from": ["User"]}]
    assert resource(access, "Note") == DEFAULT
    assert send("plan", project({"Note": {}}))["count"] == 0


@pytest.mark.parametrize(
    "name,thing,path",
    [
        ("Note", {"permissions": {**PERMISSIONS, "read": ["nobody"]}}, "Note.permissions.read"),
        ("Note", {"permissions": {"read": ["reader"]}}, "Note.permissions.delete"),  # the Database module asks for it
        ("Note", {"relations": {"reader": ["User"]}, "permissions": NO_OWNER}, "Note.relations.owner"),
        ("Note", {"relations": {**RELATIONS, "reader": ["Robot"]}}, "Note.relations.reader"),
        ("Note", {"permissions": {**PERMISSIONS, "read": "reader"}}, "Note.permissions.read"),
        ("Note", {"permissions": {**PERMISSIONS, "read": ["reader", 7]}}, "Note.permissions.read.1"),
        ("Note", {"relations": {**RELATIONS, "r" * 40: ["User"]}}, "Note.relations." + "r" * 40),
        ("Note", {**DEFAULT, "name": "Note"}, "Note.name"),
        ("Note", ["reader"], "Note"),
        ("Open", DEFAULT, "Open"),  # a schema not under access control has no resource
        ("Nowhere", DEFAULT, "Nowhere"),
    ],
)
def test_an_invalid_resource_is_400_naming_its_path(access, send, note, name, thing, path):
    for verb in ("plan", "apply"):
        answer = send(verb, project({name: thing}), expect=400)
        where = f"modules.authorization.resources.{path}"
        assert answer["message"].startswith(f"Invalid project at {where}:"), answer
        assert list(answer["errors"]) == [where]
    assert resource(access, "Note") == DEFAULT


def test_prune_deletes_no_resource(access, send, note):
    """A resource follows its schema: a project that names none of them, pruned, leaves every one."""
    access.opted_in("Memo", {"text": "String"})
    assert send("apply", project({}), prune=True)["count"] == 0
    assert send("apply", project({"Note": CHANGED}), prune=True)["count"] == 1
    assert sorted(access.call("GET", "/admin/project")["modules"]["authorization"]["resources"]) == ["Memo", "Note"]


def test_a_failure_in_a_later_module_undoes_the_definition(access, send, note):
    broken = project({"Note": CHANGED}, forms={"forms": {"Contact": {"fields": []}}})
    answer = send("apply", broken, expect=400)
    assert answer["message"].startswith("Invalid project at modules.forms.forms.Contact.fields"), answer
    assert resource(access, "Note") == DEFAULT


def test_an_invalid_resource_leaves_a_new_email_template_uncreated(access, send, note):
    template = {"subject": "Hello", "body": "<p>Hi</p>"}
    broken = project({"Open": DEFAULT}, email={"templates": {"hello": template}})
    before = access.call("GET", "/admin/email/templates", query_string={"limit": 1000})["templates"]
    send("apply", broken, expect=400)
    # Other modules keep templates of their own (mails they send): the same ones, and no "hello".
    assert access.call("GET", "/admin/email/templates", query_string={"limit": 1000})["templates"] == before
    assert "hello" not in {template["name"] for template in before}


def test_a_schema_opted_in_and_its_definition_apply_together(access, send):
    """The Database module's part runs first, in the same transaction: the resource exists when it is planned."""
    memo = {"fields": {"text": {"type": "String"}}, "modelOptions": OPTED_IN}
    both = project({"Memo": CHANGED}, database={"schemas": {"Memo": memo}})
    planned = send("plan", both)
    assert [(c["module"], c["name"], c["action"]) for c in planned["changes"]] == [
        ("database", "Memo", "create"),
        ("authorization", "Memo", "update"),
    ]
    access.call("GET", "/admin/authorization/resources/Memo", expect=404)  # a plan keeps nothing
    assert send("apply", both)["count"] == 2
    assert resource(access, "Memo") == CHANGED
    assert send("apply", both)["count"] == 0


def test_a_refused_definition_leaves_the_schema_of_the_same_project_uncreated(access, send):
    memo = {"fields": {"text": {"type": "String"}}, "modelOptions": OPTED_IN}
    broken = project({"Memo": {"permissions": {"read": ["nobody"]}}}, database={"schemas": {"Memo": memo}})
    answer = send("apply", broken, expect=400)
    assert answer["message"].startswith("Invalid project at modules.authorization.resources.Memo.permissions"), answer
    access.call("GET", "/admin/database/schemas/Memo", expect=404)
