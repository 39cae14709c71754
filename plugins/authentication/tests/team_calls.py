"""Calls of the team routes for the team tests: users made through the real API, teams through the routes."""

from __future__ import annotations

from typing import Any

import pytest

from trellis_authentication.testing import UserAccount, create_user_with_client

BASE = "/authentication/teams"


class Teams:
    def __init__(self, client: Any, admin_headers: dict[str, str]) -> None:
        self.client = client
        self.admin = admin_headers

    def configure(self, **teams: Any) -> None:
        answer = self.client.put("/config/authentication", json={"teams": teams}, headers=self.admin)
        assert answer.status_code == 200, answer.get_json()

    def user(self, email: str | None = None) -> UserAccount:
        return create_user_with_client(self.client, email)

    def call(self, method: str, path: str, who: UserAccount | None, **kwargs: Any) -> Any:
        headers = who.headers if who is not None else {}
        response = self.client.open(BASE + path, method=method, headers=headers, **kwargs)
        response.get_data()
        return response

    def create(self, who: UserAccount, name: str, parent: str | None = None, status: int = 201) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name}
        if parent is not None:
            body["parentTeam"] = parent
        answer = self.call("POST", "", who, json=body)
        assert answer.status_code == status, answer.get_json()
        return answer.get_json()

    def add(self, who: UserAccount, team_id: str, user: UserAccount, role: str = "member", status: int = 201) -> Any:
        answer = self.call("POST", f"/{team_id}/add", who, json={"userId": user.id, "role": role})
        assert answer.status_code == status, answer.get_json()
        return answer.get_json()

    def members(self, who: UserAccount, team_id: str) -> dict[str, str]:
        answer = self.call("GET", f"/{team_id}/members", who)
        assert answer.status_code == 200, answer.get_json()
        return {member["_id"]: member["role"] for member in answer.get_json()["members"]}


@pytest.fixture()
def teams(client, admin_headers) -> Teams:
    """Teams switched on, with direct adding allowed (most tests build their teams with it)."""
    made = Teams(client, admin_headers)
    made.configure(enabled=True, allowAddWithoutInvite=True)
    return made
