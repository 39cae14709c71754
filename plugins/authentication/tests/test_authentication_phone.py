"""Phone sign-in with SMS codes, and the administrator's PATCH of a user."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from trellis import db as trellis_db
from trellis_authentication.models import AuthToken, User

from .conftest import fresh_phone


@pytest.fixture()
def phone_on(api):
    api.configure(phone={"enabled": True})
    return api


def start(api, number):
    return api.post("/authentication/phone", {"phoneNumber": number})


def verify(api, token, code):
    return api.post("/authentication/phone/verify", {"token": token, "code": code})


def wrong(code: str) -> str:
    return "000000" if code != "000000" else "111111"


def test_phone_sign_in_is_off_by_default(api):
    assert start(api, fresh_phone()).status_code == 403


def test_first_sign_in_creates_the_user_and_the_next_finds_it(phone_on):
    api = phone_on
    number = fresh_phone()
    started = start(api, number.replace("+1", "+1 ").replace("555", "555-"))  # separators are fine
    assert started.status_code == 200
    code = api.sms_code(number)
    assert len(code) == 6
    signed_in = verify(api, started.get_json()["token"], code)
    assert signed_in.status_code == 200
    tokens = signed_in.get_json()
    me = api.me(tokens["accessToken"]).get_json()
    assert me["phoneNumber"] == number and me["email"] is None
    again = start(api, number)
    second = verify(api, again.get_json()["token"], api.sms_code(number))
    assert second.status_code == 200 and second.get_json()["userId"] == tokens["userId"]
    assert verify(api, again.get_json()["token"], api.sms_code(number)).status_code == 401  # used


def test_bad_numbers_are_400(phone_on):
    for number in ("12345", "+1 800 FLOWERS", "+999123", "", 5):
        answer = start(phone_on, number)
        assert answer.status_code == 400 and "phoneNumber" in answer.get_json()["errors"], number


def test_five_wrong_codes_then_the_token_is_dead(phone_on, db):
    api = phone_on
    number = fresh_phone()
    token = start(api, number).get_json()["token"]
    code = api.sms_code(number)
    statuses = [verify(api, token, wrong(code)).status_code for _ in range(5)]
    assert statuses == [401] * 5
    assert verify(api, token, code).status_code == 401  # even the right code: the token is used up
    assert db.execute(select(User.id).where(User.phone_number == number)).first() is None  # no user made


def test_expired_code_is_refused(phone_on, db):
    api = phone_on
    number = fresh_phone()
    token = start(api, number).get_json()["token"]
    db.execute(update(AuthToken).values(expires_at=trellis_db.utcnow() - timedelta(seconds=1)))
    assert verify(api, token, api.sms_code(number)).status_code == 401


def test_a_blocked_phone_user_is_403(phone_on):
    api = phone_on
    number = fresh_phone()
    tokens = verify(api, start(api, number).get_json()["token"], api.sms_code(number)).get_json()
    assert api.client.put(f"/authentication/users/{tokens['userId']}/block", headers=api.admin).status_code == 200
    assert verify(api, start(api, number).get_json()["token"], api.sms_code(number)).status_code == 403


def test_phone_sign_in_is_rate_limited_and_needs_the_sms_module(phone_on):
    api = phone_on
    api.configure(rateLimits={"sendPerAddress": "2/minute"})
    number = fresh_phone()
    assert [start(api, number).status_code for _ in range(3)] == [200, 200, 429]
    assert len(api.texts(number)) == 2
    api.module("sms", active=False)
    answer = start(api, fresh_phone())
    assert answer.status_code == 400 and "sms" in answer.get_json()["message"]


def test_sms_provider_failure_is_a_provider_error(phone_on, client, admin_headers, free_port_url):
    api = phone_on
    twilio = {"accountSid": "AC" + "0" * 32, "authToken": "x", "phoneNumber": "+15005550006", "baseUrl": free_port_url}
    assert (
        client.put(
            "/admin/sms/config", json={"provider": "twilio", "twilio": twilio}, headers=admin_headers
        ).status_code
        == 200
    )
    answer = start(api, fresh_phone())
    assert answer.status_code == 500 and answer.get_json()["name"] == "PROVIDER_ERROR"


@pytest.fixture()
def free_port_url() -> str:
    """An address where nothing listens: the provider cannot be reached."""
    from trellis.testing.plugin import free_port

    return f"http://127.0.0.1:{free_port()}"


# --- administrator -----------------------------------------------------------------------------------


def test_admin_patch_sets_email_verified_and_phone(api, user):
    number = fresh_phone()
    new_email = api.fresh_email()
    answer = api.client.patch(
        f"/authentication/users/{user.id}",
        headers=api.admin,
        json={"email": new_email.upper(), "isVerified": True, "phoneNumber": number},
    )
    assert answer.status_code == 200, answer.get_json()
    body = answer.get_json()
    assert (body["email"], body["isVerified"], body["phoneNumber"]) == (new_email, True, number)
    removed = api.client.patch(f"/authentication/users/{user.id}", headers=api.admin, json={"phoneNumber": None})
    assert removed.get_json()["phoneNumber"] is None
    both = api.client.patch(f"/authentication/users/{user.id}", headers=api.admin, json={"email": None})
    assert both.status_code == 400


def test_admin_patch_refusals(api, user, make_user):
    other = make_user()
    patch = api.client.patch
    assert patch(f"/authentication/users/{user.id}", headers=api.admin, json={"email": other.email}).status_code == 409
    assert patch("/authentication/users/nobody", headers=api.admin, json={"isVerified": True}).status_code == 404
    bad = patch(f"/authentication/users/{user.id}", headers=api.admin, json={"phoneNumber": "nope"})
    assert bad.status_code == 400 and "phoneNumber" in bad.get_json()["errors"]
    assert patch(f"/authentication/users/{user.id}", headers=api.admin, json={"password": "x"}).status_code == 400
    assert patch(f"/authentication/users/{user.id}", json={"isVerified": True}).status_code == 401
    assert patch(f"/authentication/users/{user.id}", headers=user.headers, json={"isVerified": True}).status_code == 403
    number = fresh_phone()
    assert (
        patch(f"/authentication/users/{other.id}", headers=api.admin, json={"phoneNumber": number}).status_code == 200
    )
    taken = patch(f"/authentication/users/{user.id}", headers=api.admin, json={"phoneNumber": number})
    assert taken.status_code == 409 and "phoneNumber" in taken.get_json()["errors"]
