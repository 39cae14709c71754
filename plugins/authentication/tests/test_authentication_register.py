"""POST /authentication/local/new and the password rules (README, "Routes")."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from trellis_authentication.models import User

USER_KEYS = {
    "_id",
    "email",
    "isActive",
    "isVerified",
    "phoneNumber",
    "twoFaEnabled",
    "providers",
    "createdAt",
    "updatedAt",
}


def test_register_answers_201_with_the_user(api):
    response = api.register("  New.Person@Example.COM", "long-enough-1")
    assert response.status_code == 201
    user = response.get_json()["user"]
    assert set(user) == USER_KEYS
    assert user["email"] == "new.person@example.com"
    assert user["isActive"] is True and user["isVerified"] is False
    assert user["createdAt"].endswith("Z") and user["createdAt"] == user["updatedAt"]
    assert "long-enough-1" not in response.get_data(as_text=True)


def test_password_is_stored_as_argon2(api, db):
    email = api.fresh_email()
    api.register(email, "long-enough-1")
    stored = db.execute(select(User.password_hash).where(User.email == email)).scalar_one()
    assert stored.startswith("$argon2id$") and "long-enough-1" not in stored


def test_duplicate_email_is_409_whatever_the_case(api):
    email = api.fresh_email()
    assert api.register(email).status_code == 201
    response = api.register(email.upper())
    assert response.status_code == 409
    assert response.get_json()["name"] == "CONFLICT"
    assert response.get_json()["errors"] == {"email": ["Already registered."]}


def test_closed_registration_is_403(api):
    api.configure(registrationOpen=False)
    response = api.register(api.fresh_email())
    assert response.status_code == 403
    assert response.get_json() == {
        "name": "FORBIDDEN",
        "status": 403,
        "message": "Registration is closed",
        "requestId": response.headers["X-Request-ID"],
    }


@pytest.mark.parametrize(
    "body,field",
    [
        ({"password": "long-enough-1"}, "email"),
        ({"email": "a@example.com"}, "password"),
        ({"email": "not-an-email", "password": "long-enough-1"}, "email"),
        ({"email": "a@example.com", "password": ""}, "password"),
        ({"email": "a@example.com", "password": 12345678}, "password"),
        ({"email": "a@example.com", "password": "long-enough-1", "isActive": False}, "isActive"),
    ],
)
def test_invalid_bodies_are_400(client, body, field):
    response = client.post("/authentication/local/new", json=body)
    assert response.status_code == 400
    assert response.get_json()["name"] == "INVALID_ARGUMENTS"
    assert field in response.get_json()["errors"]


def test_non_json_body_is_415(client):
    response = client.post("/authentication/local/new", data="email=a@example.com", content_type="text/plain")
    assert response.status_code == 415
    assert response.get_json()["name"] == "UNSUPPORTED_MEDIA_TYPE"


def test_default_rule_is_eight_characters(api):
    response = api.register(api.fresh_email(), "short12")
    assert response.status_code == 400
    assert response.get_json()["errors"] == {"password": ["Must be at least 8 characters long."]}
    assert api.register(api.fresh_email(), "eight888").status_code == 201


def test_configured_password_rules(api):
    api.configure(
        passwordRules={
            "minLength": 10,
            "maxLength": 20,
            "requireDigit": True,
            "requireUppercase": True,
            "requireSymbol": True,
            "requireLetter": True,
        }
    )
    response = api.register(api.fresh_email(), "abcdefghij")
    assert response.status_code == 400
    assert response.get_json()["errors"]["password"] == [
        "Must contain an upper-case letter.",
        "Must contain a digit.",
        "Must contain a symbol.",
    ]
    too_long = api.register(api.fresh_email(), "Abcdefgh1!" * 3)
    assert too_long.get_json()["errors"]["password"] == ["Must be at most 20 characters long."]
    assert api.register(api.fresh_email(), "Abcdefgh1!").status_code == 201


def test_registration_is_rate_limited_per_address(api):
    api.configure(rateLimits={"registerPerIp": "2/minute"})
    ip = api.fresh_ip()
    assert api.register(api.fresh_email(), ip=ip).status_code == 201
    assert api.register(api.fresh_email(), ip=ip).status_code == 201
    response = api.register(api.fresh_email(), ip=ip)
    assert response.status_code == 429
    assert response.get_json()["name"] == "RATE_LIMITED"
    assert int(response.headers["Retry-After"]) >= 1
    assert api.register(api.fresh_email(), ip=api.fresh_ip()).status_code == 201
