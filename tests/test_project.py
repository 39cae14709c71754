"""Project as code in the core: module configuration with secrets, all-or-nothing applies, the files and
the CLI (``flask trellis project``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from trellis.project import files


def post(client: Any, admin: dict[str, str], route: str, project: Any, expect: int, prune: bool = False) -> Any:
    response = client.post(f"/admin/project/{route}", json={"project": project, "prune": prune}, headers=admin)
    assert response.status_code == expect, response.get_json()
    return response.get_json()


def email(config: dict[str, Any]) -> dict[str, Any]:
    return {"version": 1, "modules": {"email": {"config": config}}}


def test_config_exports_masked_and_a_masked_secret_keeps_the_targets_value(client, admin_headers):
    put = {"provider": "smtp", "smtp": {"host": "mail.example.com", "password": "s3cret-value"}}
    assert client.put("/config/email", json=put, headers=admin_headers).status_code == 200
    exported = client.get("/admin/project", headers=admin_headers).get_json()
    config = exported["modules"]["email"]["config"]
    assert config["smtp"]["password"] == "********" and config["smtp"]["host"] == "mail.example.com"
    assert "s3cret-value" not in json.dumps(exported)
    assert set(exported["modules"]) >= {"database", "email", "authentication", "storage"}
    assert post(client, admin_headers, "plan", exported, 200)["count"] == 0
    config["smtp"]["port"] = 2525
    planned = post(client, admin_headers, "apply", email(config), 200)
    assert planned["changes"] == [
        {
            "module": "email",
            "kind": "config",
            "name": "email",
            "action": "update",
            "detail": [{"op": "change", "path": "smtp.port", "from": 587, "to": 2525}],
        }
    ]
    stored = client.get("/config/email", headers=admin_headers).get_json()
    assert stored["smtp"]["port"] == 2525
    from trellis import module_config

    assert module_config.get("email")["smtp"]["password"] == "s3cret-value"  # kept, never exported
    config["smtp"]["password"] = "new-secret"
    detail = post(client, admin_headers, "plan", email(config), 200)["changes"][0]["detail"]
    assert detail == [{"op": "change", "path": "smtp.password", "from": "********", "to": "********"}]
    assert post(client, admin_headers, "apply", email(config), 200)["count"] == 1
    assert post(client, admin_headers, "apply", email(config), 200)["count"] == 0


def test_an_invalid_config_is_400_naming_the_path(client, admin_headers):
    for wanted, path in [
        (email({"smtp": {"port": "many"}}), "modules.email.config.smtp.port"),
        (email({"colour": "blue"}), "modules.email.config.colour"),
        (email([]), "modules.email.config"),
        ({"version": 1, "modules": [], "x": 1}, "x"),
        ({"version": 1, "modules": []}, "modules"),
        ([], "project"),
    ]:
        refused = post(client, admin_headers, "apply", wanted, 400)
        assert path in refused["errors"] and path in refused["message"], refused


def test_a_failure_anywhere_leaves_nothing_applied(client, admin_headers):
    before = client.get("/admin/project", headers=admin_headers).get_data(as_text=True)
    wanted = {
        "version": 1,
        "modules": {
            "email": {"config": {"from": "team@example.com"}},
            "database": {
                "schemas": {
                    "Good": {"fields": {"a": "String"}},
                    "Bad": {"fields": {"p": {"type": "Relation", "model": "Gone"}}},
                }
            },
        },
    }
    post(client, admin_headers, "apply", wanted, 400)
    assert client.get("/admin/project", headers=admin_headers).get_data(as_text=True) == before
    del wanted["modules"]["database"]["schemas"]["Bad"]
    assert post(client, admin_headers, "apply", wanted, 200)["count"] == 2
    audit = client.get("/admin/audit?action=project.apply", headers=admin_headers).get_json()
    entry = next(e for e in audit["entries"] if e["action"] == "project.apply")
    assert [c["name"] for c in entry["changes"]["changes"]] == ["email", "Good"]


def test_the_folder_form_round_trips_and_drops_files_of_things_gone(tmp_path):
    project = {
        "version": 1,
        "modules": {
            "database": {"schemas": {"Task": {"fields": {}}, "A/B c": {"fields": {}}}, "customEndpoints": {}},
            "email": {"config": {"from": "x@example.com"}, "templates": {"Welcome": {"subject": "Hi"}}},
        },
    }
    folder = tmp_path / "project"
    written = files.write(project, folder)
    assert folder / "database" / "schemas" / "A%2FB%20c.json" in written
    assert (folder / "email" / "config.json").read_text() == '{\n  "from": "x@example.com"\n}\n'
    assert files.read(folder) == project  # the empty kind too: its folder keeps a .keep file
    del project["modules"]["database"]["schemas"]["Task"]
    files.write(project, folder)
    assert not (folder / "database" / "schemas" / "Task.json").exists()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(files.ProjectInvalid):
        files.write(project, tmp_path / "other")
    (folder / "email" / "config.json").write_text("{oops")
    with pytest.raises(files.ProjectInvalid, match="line 1"):
        files.read(folder)


def run(app: Any, *args: str, input: str | None = None) -> Any:
    return app.test_cli_runner().invoke(args=["trellis", "project", *args], input=input)


def test_cli_export_plan_apply_round_trip(app, client, admin_headers, tmp_path):
    folder = tmp_path / "project"
    result = run(app, "export", str(folder))
    assert result.exit_code == 0, result.output
    schema_file = folder / "database" / "schemas" / "Task.json"
    schema_file.parent.mkdir(parents=True, exist_ok=True)
    schema_file.write_text(json.dumps({"fields": {"title": {"type": "String", "required": True}}}))
    config = json.loads((folder / "email" / "config.json").read_text())
    (folder / "email" / "config.json").write_text(json.dumps({**config, "from": "ops@example.com"}))
    result = run(app, "plan", str(folder))
    assert result.exit_code == 0, result.output
    assert '~ email config email\n    ~ from: "no-reply@localhost" → "ops@example.com"' in result.output
    assert (
        "+ database schema Task\n" in result.output and "Plan: 1 to create, 1 to update, 0 to delete." in result.output
    )
    assert client.get("/admin/database/schemas/Task", headers=admin_headers).status_code == 404
    result = run(app, "apply", str(folder))  # no terminal to ask, no --yes: nothing happens
    assert result.exit_code != 0 and "--yes" in result.output
    assert client.get("/admin/database/schemas/Task", headers=admin_headers).status_code == 404
    result = run(app, "apply", str(folder), "--yes")
    assert result.exit_code == 0 and "Applied 2 changes." in result.output, result.output
    assert client.get("/admin/database/schemas/Task", headers=admin_headers).status_code == 200
    result = run(app, "apply", str(folder), "--yes")
    assert "No changes" in result.output and "Applied" not in result.output
    single = tmp_path / "project.json"
    assert run(app, "export", str(single)).exit_code == 0
    assert "Task" in files.read(single)["modules"]["database"]["schemas"]
    assert "No changes" in run(app, "plan", str(single)).output
    schema_file.write_text("[]")
    result = run(app, "plan", str(folder))
    assert result.exit_code != 0 and "modules.database.schemas.Task" in result.output
