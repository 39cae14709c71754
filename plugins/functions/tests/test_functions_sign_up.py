"""Sign-up triggers, through the Authentication module's hooks: a before-trigger may refuse a sign-up (no
account made), an after-trigger runs once the account exists, as the new user."""

from __future__ import annotations

import uuid

import pytest

from .conftest import Api, eventually

pytestmark = pytest.mark.live

SIGN_UPS = """
    from trellis_functions import Reject, after_sign_up, before_sign_up

    @before_sign_up
    def only_company(ctx, user):
        if not user["email"].endswith("@example.com"):
            raise Reject("company addresses only", status=403)

    @after_sign_up
    def welcome(ctx, user):
        ctx.db.as_admin().create("Welcome", {"email": user["email"], "by": ctx.user["_id"]})
"""


def test_sign_up_triggers(start, folder):
    folder.write("sign_ups.py", SIGN_UPS)
    api = Api(start().url)
    api.call("PUT", "/config/authentication", 200, json={"local": {"verification": {"sendEmail": False}}})
    api.schema({"email": "String", "by": "String"}, name="Welcome")
    password = "Correct-Horse-42-battery"
    stranger = f"{uuid.uuid4().hex[:8]}@elsewhere.org"
    refused = api.call(
        "POST", "/authentication/local/new", 403, headers={}, json={"email": stranger, "password": password}
    )
    assert refused.json()["message"] == "company addresses only"
    assert (
        api.call(
            "POST", "/authentication/local", headers={}, json={"email": stranger, "password": password}
        ).status_code
        == 401
    )
    member = f"{uuid.uuid4().hex[:8]}@example.com"
    made = api.call(
        "POST", "/authentication/local/new", 201, headers={}, json={"email": member, "password": password}
    ).json()
    welcomes = eventually(lambda: api.documents("Welcome"))
    assert [(w["email"], w["by"]) for w in welcomes] == [(member, made["user"]["_id"])]
    assert {e["function"] for e in api.log()} == {"only_company", "welcome"}
