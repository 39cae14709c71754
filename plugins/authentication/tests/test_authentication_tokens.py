"""Sign-in, the current user, renew (rotation, reuse detection) and logout."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from argon2 import PasswordHasher
from flask_jwt_extended import create_access_token, decode_token
from sqlalchemy import update

from trellis.db import utcnow
from trellis.testing.plugin import statements_run
from trellis_authentication.models import Session


@pytest.fixture()
def account(make_user):
    return make_user()


def test_login_answers_the_token_pair(api, account):
    response = api.login(account.email.upper(), account.password)
    assert response.status_code == 200
    body = response.get_json()
    assert set(body) == {"accessToken", "refreshToken", "userId"}
    assert body["userId"] == account.id
    claims = decode_token(body["accessToken"])
    assert claims["kind"] == "user" and claims["sub"] == account.id and claims["sid"]
    assert claims["exp"] - claims["iat"] == 3600
    assert "." not in body["refreshToken"]  # opaque, not a JWT


def test_access_token_lifetime_follows_the_config(api, account):
    api.configure(accessTokenMinutes=5)
    claims = decode_token(api.login(account.email, account.password).get_json()["accessToken"])
    assert claims["exp"] - claims["iat"] == 300


def test_each_login_is_its_own_session(api, account):
    first = api.login(account.email, account.password).get_json()
    second = api.login(account.email, account.password).get_json()
    assert decode_token(first["accessToken"])["sid"] != decode_token(second["accessToken"])["sid"]
    assert api.me(first["accessToken"]).status_code == 200 and api.me(second["accessToken"]).status_code == 200


def test_wrong_password_and_unknown_email_look_alike(api, account):
    wrong = api.login(account.email, "not-the-password")
    unknown = api.login(api.fresh_email(), "not-the-password")
    assert wrong.status_code == unknown.status_code == 401
    assert wrong.get_json()["message"] == unknown.get_json()["message"] == "Wrong email or password"


def test_unknown_email_costs_one_argon2_verify_like_a_wrong_password(api, account, monkeypatch):
    calls = []
    real_verify = PasswordHasher.verify

    def counting_verify(self, hash_, password):
        calls.append(hash_)
        return real_verify(self, hash_, password)

    # Only counts: both paths must run exactly one real argon2 verify.
    monkeypatch.setattr(PasswordHasher, "verify", counting_verify)
    api.login(account.email, "not-the-password")
    api.login(api.fresh_email(), "not-the-password")
    assert len(calls) == 2 and all(h.startswith("$argon2id$") for h in calls)


@pytest.mark.parametrize(
    "body",
    [
        {"email": "a@example.com"},
        {"password": "x"},
        {"email": "", "password": "x"},
        {"email": "a@example.com", "password": "x", "remember": True},
        {"email": ["a"], "password": "x"},
    ],
)
def test_login_validates_the_body(client, body):
    response = client.post("/authentication/local", json=body)
    assert response.status_code == 400
    assert response.get_json()["name"] == "INVALID_ARGUMENTS"


def test_login_is_rate_limited_per_address(api, make_user):
    api.configure(rateLimits={"loginPerIp": "3/minute"})
    ip = api.fresh_ip()
    one, two = make_user(), make_user()
    assert api.login(one.email, one.password, ip=ip).status_code == 200
    assert api.login(two.email, "wrong-password", ip=ip).status_code == 401
    assert api.login(two.email, two.password, ip=ip).status_code == 200
    response = api.login(one.email, one.password, ip=ip)
    assert response.status_code == 429
    body = response.get_json()
    assert body["name"] == "RATE_LIMITED" and body["status"] == 429 and body["message"]
    assert int(response.headers["Retry-After"]) >= 1
    assert api.login(one.email, one.password).status_code == 200  # another address is not affected


def test_login_is_rate_limited_per_email_across_addresses(api, account):
    api.configure(rateLimits={"loginPerEmail": "2/minute"})
    assert api.login(account.email, "guess-1").status_code == 401
    assert api.login(account.email.upper(), "guess-2").status_code == 401
    assert api.login(account.email, account.password).status_code == 429


def test_current_user(api, account):
    response = api.me(account.access_token)
    assert response.status_code == 200
    user = response.get_json()
    assert user["_id"] == account.id and user["email"] == account.email
    assert set(user) == {
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


def test_current_user_needs_a_token(client):
    response = client.get("/authentication/user")
    assert response.status_code == 401
    assert response.get_json()["name"] == "UNAUTHORIZED"


@pytest.mark.parametrize("header", ["Bearer not-a-jwt", "Basic dXNlcjpwdw==", "Bearer "])
def test_current_user_with_a_bad_token_is_401(client, header):
    assert client.get("/authentication/user", headers={"Authorization": header}).status_code == 401


def test_admin_credentials_are_not_a_user_token(api, client, admin_headers, admin_token):
    assert client.get("/authentication/user", headers=admin_headers).status_code == 403
    response = client.get("/authentication/user", headers=api.bearer(admin_token))
    assert response.status_code == 403
    assert response.get_json()["name"] == "FORBIDDEN"


def test_expired_access_token_is_401(api, account):
    claims = decode_token(account.access_token)
    expired = create_access_token(
        identity=account.id,
        additional_claims={"kind": "user", "sid": claims["sid"]},
        expires_delta=timedelta(seconds=-5),
    )
    response = api.me(expired)
    assert response.status_code == 401
    assert response.get_json()["message"] == "Token expired"


def test_token_naming_another_users_session_is_401(api, make_user):
    one, two = make_user(), make_user()
    forged = create_access_token(
        identity=one.id, additional_claims={"kind": "user", "sid": decode_token(two.access_token)["sid"]}
    )
    assert api.me(forged).status_code == 401
    no_session = create_access_token(identity=one.id, additional_claims={"kind": "user"})
    assert api.me(no_session).status_code == 401


def test_refresh_token_is_not_an_access_token(api, account):
    assert api.me(account.refresh_token).status_code == 401


def test_verifying_a_token_is_one_lookup(app, api, account):
    with statements_run(app.extensions["trellis"].engine) as seen:
        assert api.me(account.access_token).status_code == 200
    statements = [s for s in seen if "auth_" in s]
    assert len(statements) == 1
    assert "auth_sessions.id = " in statements[0] and "auth_users.id = " in statements[0]


# --- renew -------------------------------------------------------------------------------------------


def test_renew_rotates_the_pair(api, account):
    response = api.renew(account.refresh_token)
    assert response.status_code == 200
    body = response.get_json()
    assert set(body) == {"accessToken", "refreshToken", "userId"} and body["userId"] == account.id
    assert body["refreshToken"] != account.refresh_token
    assert decode_token(body["accessToken"])["sid"] == decode_token(account.access_token)["sid"]
    assert api.me(body["accessToken"]).status_code == 200
    assert api.renew(body["refreshToken"]).status_code == 200


def test_renew_takes_the_refresh_token_as_bearer(api, client, account):
    response = client.post("/authentication/renew", headers=api.bearer(account.refresh_token))
    assert response.status_code == 200
    assert response.get_json()["userId"] == account.id


def test_renew_without_a_token_is_401(client):
    assert client.post("/authentication/renew", json={}).status_code == 401
    assert client.post("/authentication/renew").status_code == 401


def test_renew_with_an_unknown_token_is_401(api):
    response = api.renew("made-up-refresh-token")
    assert response.status_code == 401
    assert response.get_json()["message"] == "Invalid refresh token"


def test_renew_rejects_unknown_fields(client, account):
    response = client.post("/authentication/renew", json={"refreshToken": account.refresh_token, "x": 1})
    assert response.status_code == 400


def test_reusing_a_rotated_refresh_token_revokes_the_session(api, account):
    second = api.renew(account.refresh_token).get_json()
    third = api.renew(second["refreshToken"]).get_json()
    assert api.me(third["accessToken"]).status_code == 200
    reuse = api.renew(account.refresh_token)  # the first one, long rotated away: stolen
    assert reuse.status_code == 401
    assert "already used" in reuse.get_json()["message"]
    # Every token of that session is dead now, including the newest pair.
    assert api.me(third["accessToken"]).status_code == 401
    assert api.renew(third["refreshToken"]).status_code == 401
    # Other sessions of the same user are untouched.
    other = api.login(account.email, account.password).get_json()
    assert api.me(other["accessToken"]).status_code == 200


def test_expired_session_cannot_renew_nor_authenticate(api, account, db):
    sid = decode_token(account.access_token)["sid"]
    db.execute(update(Session).where(Session.id == sid).values(expires_at=utcnow() - timedelta(seconds=1)))
    db.commit()
    response = api.renew(account.refresh_token)
    assert response.status_code == 401
    assert response.get_json()["message"] == "Refresh token expired; sign in again"
    assert api.me(account.access_token).status_code == 401


def test_renew_restarts_the_refresh_lifetime(api, account, db):
    api.configure(refreshTokenDays=2)
    renewed = api.renew(account.refresh_token).get_json()
    sid = decode_token(renewed["accessToken"])["sid"]
    session = db.get(Session, sid)
    db.refresh(session)
    left = session.expires_at - session.renewed_at
    assert left == timedelta(days=2)


# --- logout ------------------------------------------------------------------------------------------


def test_logout_ends_the_session_at_once(api, client, make_user):
    account = make_user()
    other = api.login(account.email, account.password).get_json()
    response = client.post("/authentication/logout", headers=account.headers)
    assert response.status_code == 200
    assert response.get_json() == {"message": "Logged out"}
    assert api.me(account.access_token).status_code == 401
    assert api.renew(account.refresh_token).status_code == 401
    assert client.post("/authentication/logout", headers=account.headers).status_code == 401
    assert api.me(other["accessToken"]).status_code == 200


def test_logout_needs_a_user_token(client, admin_headers):
    assert client.post("/authentication/logout").status_code == 401
    assert client.post("/authentication/logout", headers=admin_headers).status_code == 403


def test_a_token_verified_once_is_refused_once_it_expires(api, account):
    """Verified tokens are remembered (``trellis.credentials.decode``), their expiry checked at every use."""
    claims = decode_token(account.access_token)
    short = create_access_token(
        identity=account.id,
        additional_claims={"kind": "user", "sid": claims["sid"]},
        expires_delta=timedelta(seconds=2),
    )
    assert api.me(short).status_code == 200
    assert api.me(short).status_code == 200  # from the remembered verification
    expires = decode_token(short, allow_expired=True)["exp"]
    time.sleep(max(0.0, expires - time.time()) + 0.2)
    response = api.me(short)
    assert response.status_code == 401
    assert response.get_json()["message"] == "Token expired"
