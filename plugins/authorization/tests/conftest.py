"""Helpers for the Authorization module's tests: the Database module's own test helpers (schemas and
documents through the real routes), users made through the real API, teams switched on through the config
route, and thin calls to this module's routes."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from trellis_authentication.testing import UserAccount


def _database_test_helpers() -> Any:
    """``plugins/database/tests/conftest.py`` as a module (its ``DatabaseApi``), loaded under its own name."""
    path = Path(__file__).resolve().parents[2] / "database" / "tests" / "conftest.py"
    spec = importlib.util.spec_from_file_location("trellis_database_test_helpers", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DatabaseApi = _database_test_helpers().DatabaseApi
TASK_PERMISSIONS = {
    "read": ["reader", "editor", "owner", "project->read"],
    "edit": ["editor", "owner"],
    "delete": ["owner"],
    "share": ["owner"],
}


class AccessApi(DatabaseApi):
    """The Database module's helpers plus sharing, teams and this module's routes."""

    def opted_in(
        self, name: str, fields: dict[str, Any], backed: dict[str, str] | None = None, expect: int = 201
    ) -> dict[str, Any]:
        """A schema under access control; ``backed``: its field-backed relations (``authorization.fields``)."""
        options = {"conduit": {"authorization": {"enabled": True, **({"fields": backed} if backed else {})}}}
        return self.create_schema(name, fields, expect=expect, modelOptions=options)

    def projects_and_tasks(self) -> None:
        """The third recipe's schemas: a Task reads through its project (``project->read``) and is edited by
        its assignee (the field-backed relation ``assignee → editor``)."""
        self.opted_in("Project", {"name": "String"})
        relation = {"type": "Relation", "model": "User"}
        fields = {"title": "String", "project": {"type": "Relation", "model": "Project"}, "assignee": relation}
        self.opted_in("Task", fields, backed={"assignee": "editor"})
        self.call("PATCH", "/admin/authorization/resources/Task", json={"permissions": TASK_PERMISSIONS})

    def call(self, method: str, path: str, who: UserAccount | None = None, expect: int = 200, **kwargs: Any) -> Any:
        """A request as ``who`` (None: administrator credentials), checked against ``expect``."""
        headers = self.admin if who is None else who.headers
        response = self.client.open(path, method=method, headers=headers, **kwargs)
        assert response.status_code == expect, (method, path, response.status_code, response.get_json())
        return response.get_json()

    def share(self, who: UserAccount, resource: str, subject: str, relation: str, expect: int = 201) -> Any:
        schema, doc_id = resource.split(":", 1)
        body = {"subject": subject, "relation": relation}
        return self.call("POST", f"/database/{schema}/{doc_id}/grants", who, expect, json=body)

    def grant(self, subject: str, relation: str, resource: str, expect: int = 201) -> Any:
        body = {"subject": subject, "relation": relation, "resource": resource}
        return self.call("POST", "/admin/authorization/relations", None, expect, json=body)

    def check(self, who: UserAccount, action: str, resource: str, scope: str | None = None) -> bool:
        query = {"action": action, "resource": resource, **({"scope": scope} if scope else {})}
        return self.call("GET", "/authorization/check", who, query_string=query)["allowed"]

    def can(self, subject: str, action: str, resource: str) -> bool:
        query = {"subject": subject, "action": action, "resource": resource}
        return self.call("GET", "/admin/authorization/permissions/can", query_string=query)["allowed"]

    def evaluate(self, subject: str, action: str, resource: str) -> dict[str, Any]:
        query = {"subject": subject, "action": action, "resource": resource}
        return self.call("GET", "/admin/authorization/permissions/evaluate", query_string=query)

    # teams (the Authentication module's routes)

    def enable_teams(self) -> None:
        body = {"teams": {"enabled": True, "allowAddWithoutInvite": True}}
        self.call("PUT", "/config/authentication", json=body)

    def team(self, owner: UserAccount, name: str, parent: str | None = None) -> str:
        body = {"name": name, **({"parentTeam": parent} if parent else {})}
        return self.call("POST", "/authentication/teams", owner, 201, json=body)["_id"]

    def join(self, owner: UserAccount, team_id: str, member: UserAccount) -> None:
        body = {"userId": member.id, "role": "member"}
        self.call("POST", f"/authentication/teams/{team_id}/add", owner, 201, json=body)


@pytest.fixture()
def access(client, admin_headers) -> AccessApi:
    return AccessApi(client, admin_headers)
