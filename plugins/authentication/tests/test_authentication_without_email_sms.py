"""The module without the Email and SMS modules (it `uses` them, it does not require them): it starts, users
sign up and in with passwords and run teams, and every route that would send mail or an SMS answers 400
naming the missing module, with nothing written."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select

from trellis import create_app
from trellis_authentication import module as authentication
from trellis_authentication.models import User
from trellis_authentication.team_models import TeamInvite

from .conftest import bearer, fresh_email, fresh_ip, fresh_phone


@pytest.fixture()
def alone(app_config: dict[str, Any], app: Any, db: Any, admin_headers: dict[str, str]) -> Any:
    """A test client of an app with the Authentication module only (sharing the test's transaction)."""
    made = create_app(app_config, modules=[authentication])
    assert made.extensions["trellis"].module("email") is None and made.extensions["trellis"].module("sms") is None
    client = made.test_client()
    answer = client.put(
        "/config/authentication",
        json={"phone": {"enabled": True}, "teams": {"enabled": True}, "magicLink": {"enabled": True}},
        headers=admin_headers,
    )
    assert answer.status_code == 200, answer.get_json()
    return client


def post(client: Any, path: str, body: dict[str, Any], token: str | None = None) -> Any:
    headers = bearer(token) if token else {}
    return client.post(path, json=body, headers=headers, environ_base={"REMOTE_ADDR": fresh_ip()})


def refused_for(answer: Any, module: str) -> None:
    assert answer.status_code == 400, answer.get_json()
    assert answer.get_json()["errors"] == {"module": [f"{module} is not active"]}


def test_passwords_and_teams_work_and_mail_routes_name_the_missing_module(alone: Any, admin_headers: Any, db: Any):
    email = fresh_email()
    # Verification mail is on by default: registering says what it needs, and makes no user.
    refused_for(post(alone, "/authentication/local/new", {"email": email, "password": "long-enough-1"}), "email")
    assert db.execute(select(func.count()).select_from(User).where(User.email == email)).scalar() == 0

    changed = alone.put(
        "/config/authentication", json={"local": {"verification": {"sendEmail": False}}}, headers=admin_headers
    )
    assert changed.status_code == 200, changed.get_json()
    assert post(alone, "/authentication/local/new", {"email": email, "password": "long-enough-1"}).status_code == 201
    signed_in = post(alone, "/authentication/local", {"email": email, "password": "long-enough-1"})
    assert signed_in.status_code == 200, signed_in.get_json()
    token = signed_in.get_json()["accessToken"]

    refused_for(post(alone, "/authentication/forgot-password", {"email": email}), "email")
    refused_for(post(alone, "/authentication/magic-link", {"email": email}), "email")

    team = post(alone, "/authentication/teams", {"name": "Night shift"}, token)
    assert team.status_code == 201, team.get_json()
    invited = post(alone, f"/authentication/teams/{team.get_json()['_id']}/invite", {"email": fresh_email()}, token)
    refused_for(invited, "email")
    assert db.execute(select(func.count()).select_from(TeamInvite)).scalar() == 0


def test_phone_sign_in_names_the_missing_sms_module(alone: Any, db: Any):
    phone = fresh_phone()
    refused_for(post(alone, "/authentication/phone", {"phoneNumber": phone}), "sms")
    assert db.execute(select(func.count()).select_from(User).where(User.phone_number == phone)).scalar() == 0
    # The number is still checked as a number (the field lives in the core, not in the SMS module).
    answer = post(alone, "/authentication/phone", {"phoneNumber": "+1 800 FLOWERS"})
    assert answer.status_code == 400 and "phoneNumber" in answer.get_json()["errors"]


def test_its_routes_are_documented_without_them(alone: Any):
    paths = alone.get("/openapi.json").get_json()["paths"]
    assert "/authentication/teams/{teamId}/invite" in paths
    assert "/admin/email/config" not in paths and "/sms/send" not in paths
