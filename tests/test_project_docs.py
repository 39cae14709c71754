"""docs/operations.md, "Promoting a project": the plan it prints is what the CLI prints for that change."""

from __future__ import annotations

import json
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "operations.md"

STAGING = {  # what the staging server holds before the change
    "Task": {"fields": {"title": "String", "done": "Boolean", "legacyCode": "String"}},
}
PROJECT = {  # the reviewed project in git
    "version": 1,
    "modules": {
        "database": {
            "schemas": {
                "Task": {
                    "fields": {
                        "title": {"type": "String", "required": True, "maxLength": 200},
                        "done": "Boolean",
                        "priority": {"type": "Number", "default": 3},
                    },
                    "modelOptions": {"conduit": {"cms": {"crudOperations": {"delete": False}}}},
                },
                "Project": {"fields": {"name": {"type": "String", "required": True}}},
            }
        },
        "email": {
            "config": {"from": "Tasks <tasks@example.com>"},
            "templates": {
                "TaskAssigned": {"subject": "{{task}} is yours", "body": "Hello {{name}}, {{task}} is yours."}
            },
        },
    },
}


def documented_plan() -> str:
    text = DOC.read_text()
    found = re.search(r"<!-- plan of the example -->\n```text\n(.*?)```", text, re.S)
    assert found, "the example plan is missing from docs/operations.md"
    return found.group(1)


def test_the_documented_plan_is_what_the_cli_prints(app, client, admin_headers, tmp_path):
    for name, schema in STAGING.items():
        response = client.post("/admin/database/schemas", json={"name": name, **schema}, headers=admin_headers)
        assert response.status_code == 201, response.get_json()
    source = tmp_path / "project.json"
    source.write_text(json.dumps(PROJECT))
    result = app.test_cli_runner().invoke(args=["trellis", "project", "plan", str(source)])
    assert result.exit_code == 0, result.output
    assert result.output == documented_plan()
