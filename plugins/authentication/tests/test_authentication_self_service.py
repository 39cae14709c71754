"""Self-service (README, "Routes", "Tokens and sessions"): sign-up that signs in, a user's sessions
listed and ended by their owner, and deleting one's own account with the modules' user-deleted hooks."""

from __future__ import annotations

import pyotp
from sqlalchemy import func, select

from trellis_authentication.models import AuthToken, Session, User

from .conftest import code_of_step

SESSION_KEYS = {"_id", "createdAt", "lastUsedAt", "ip", "userAgent", "current"}


# --- sign-up signs in ----------------------------------------------------------------------------------


def test_register_signs_in_by_default(api):
    email = api.fresh_email()
    answer = api.register(email)
    assert answer.status_code == 201
    body = answer.get_json()
    assert set(body) == {"user", "accessToken", "refreshToken", "userId"}
    assert body["userId"] == body["user"]["_id"]
    assert api.me(body["accessToken"]).get_json()["email"] == email
    assert api.renew(body["refreshToken"]).status_code == 200


def test_register_without_sign_in_when_switched_off_or_verification_required(api):
    api.configure(local={"signInOnRegister": False})
    assert set(api.register(api.fresh_email()).get_json()) == {"user"}
    api.configure(local={"signInOnRegister": True, "verification": {"required": True}})
    assert set(api.register(api.fresh_email()).get_json()) == {"user"}


# --- sessions ------------------------------------------------------------------------------------------


def sign_in(api, email, password, agent):
    answer = api.client.post(
        "/authentication/local",
        json={"email": email, "password": password},
        headers={"User-Agent": agent},
        environ_base={"REMOTE_ADDR": "203.0.113.9" if "phone" in agent else api.fresh_ip()},
    )
    assert answer.status_code == 200, answer.get_json()
    return answer.get_json()


def test_sessions_are_listed_with_the_current_one_marked(api, user):
    laptop = sign_in(api, user.email, user.password, "Laptop browser")
    phone = sign_in(api, user.email, user.password, "phone app/1.0")
    answer = api.get("/authentication/sessions", token=laptop["accessToken"])
    assert answer.status_code == 200
    body = answer.get_json()
    assert body["count"] == 3 and len(body["sessions"]) == 3
    assert all(set(s) == SESSION_KEYS for s in body["sessions"])
    current = [s for s in body["sessions"] if s["current"]]
    assert [s["userAgent"] for s in current] == ["Laptop browser"]
    by_agent = {s["userAgent"]: s for s in body["sessions"]}
    assert by_agent["phone app/1.0"]["ip"] == "203.0.113.9"
    assert by_agent["phone app/1.0"]["createdAt"].endswith("Z")

    # A renew moves the session to the front: lastUsedAt is its last sign-in or renew.
    renewed = api.renew(phone["refreshToken"]).get_json()
    sessions = api.get("/authentication/sessions", token=renewed["accessToken"]).get_json()["sessions"]
    assert sessions[0]["current"] is True and sessions[0]["lastUsedAt"] > sessions[0]["createdAt"]

    # Paged like every list; another user's sessions are not listed.
    page = api.get("/authentication/sessions?limit=1&skip=1", token=laptop["accessToken"]).get_json()
    assert page["count"] == 3 and len(page["sessions"]) == 1
    other = api.register(api.fresh_email()).get_json()
    assert api.get("/authentication/sessions", token=other["accessToken"]).get_json()["count"] == 1


def test_ending_a_session_stops_its_tokens_at_once(api, user):
    laptop = sign_in(api, user.email, user.password, "Laptop browser")
    phone = sign_in(api, user.email, user.password, "phone app/1.0")
    listed = api.get("/authentication/sessions", token=laptop["accessToken"]).get_json()["sessions"]
    phone_id = next(s["_id"] for s in listed if s["userAgent"] == "phone app/1.0")

    ended = api.call("DELETE", f"/authentication/sessions/{phone_id}", headers=api.bearer(laptop["accessToken"]))
    assert ended.status_code == 200
    assert ended.get_json() == {"_id": phone_id, "deleted": True}
    assert api.me(phone["accessToken"]).status_code == 401
    assert api.renew(phone["refreshToken"]).status_code == 401
    assert api.me(laptop["accessToken"]).status_code == 200
    remaining = api.get("/authentication/sessions", token=laptop["accessToken"]).get_json()
    assert phone_id not in {s["_id"] for s in remaining["sessions"]} and remaining["count"] == 2

    # Ended already, unknown, or another user's: the same 404, and nothing changes.
    again = api.call("DELETE", f"/authentication/sessions/{phone_id}", headers=api.bearer(laptop["accessToken"]))
    assert again.status_code == 404 and again.get_json()["name"] == "NOT_FOUND"
    stranger = api.register(api.fresh_email()).get_json()
    mine = next(s["_id"] for s in remaining["sessions"] if s["current"])
    theirs = api.call("DELETE", f"/authentication/sessions/{mine}", headers=api.bearer(stranger["accessToken"]))
    assert theirs.status_code == 404
    assert api.me(laptop["accessToken"]).status_code == 200


def test_sessions_need_a_user_token(api, admin_headers):
    assert api.get("/authentication/sessions").status_code == 401
    assert api.call("GET", "/authentication/sessions", headers=admin_headers).status_code in (401, 403)


# --- delete my account -----------------------------------------------------------------------------------


def test_delete_my_account_with_the_password(api, user, hook_recorder, db):
    other = sign_in(api, user.email, user.password, "second device")
    wrong = api.call("DELETE", "/authentication/user", json={"password": "not it"}, headers=user.headers)
    assert wrong.status_code == 401
    missing = api.call("DELETE", "/authentication/user", json={}, headers=user.headers)
    assert missing.status_code == 400 and missing.get_json()["errors"] == {"password": ["Required."]}
    assert hook_recorder.deleted == [] and api.me(user.access_token).status_code == 200

    answer = api.call("DELETE", "/authentication/user", json={"password": user.password}, headers=user.headers)
    assert answer.status_code == 200, answer.get_json()
    assert hook_recorder.deleted == [user.id]
    for token in (user.access_token, other["accessToken"]):
        assert api.me(token).status_code == 401
    assert api.login(user.email, user.password).status_code == 401
    assert db.execute(select(func.count()).select_from(User).where(User.id == user.id)).scalar_one() == 0
    assert db.execute(select(func.count()).select_from(Session).where(Session.user_id == user.id)).scalar_one() == 0


def test_delete_my_account_is_all_or_nothing_when_a_module_refuses(api, user, hook_recorder):
    hook_recorder.fail_delete = True
    answer = api.call("DELETE", "/authentication/user", json={"password": user.password}, headers=user.headers)
    assert answer.status_code == 409
    assert api.me(user.access_token).status_code == 200


def test_a_password_less_account_is_deleted_with_a_fresh_two_factor_code(api, user, db, hook_recorder):
    api.configure(twoFa={"enabled": True})
    secret = api.post("/authentication/twoFa/enable", {"method": "authenticator"}, token=user.access_token)
    totp = pyotp.TOTP(secret.get_json()["secret"])
    recovery = api.post("/authentication/twoFa/verify", {"code": code_of_step(totp)}, token=user.access_token)
    assert recovery.status_code == 200
    stored = db.get(User, user.id)
    stored.password_hash = None  # as for a user who signs in by phone or a provider
    db.commit()  # into the test's transaction: the next request's end would roll it back

    asked = api.call("DELETE", "/authentication/user", json={"password": user.password}, headers=user.headers)
    assert asked.status_code == 400 and asked.get_json()["errors"] == {"code": ["Required."]}
    wrong = api.call("DELETE", "/authentication/user", json={"code": "000000"}, headers=user.headers)
    assert wrong.status_code == 401 and hook_recorder.deleted == []
    code = recovery.get_json()["recoveryCodes"][0]
    answer = api.call("DELETE", "/authentication/user", json={"code": code}, headers=user.headers)
    assert answer.status_code == 200, answer.get_json()
    assert hook_recorder.deleted == [user.id]
    assert db.execute(select(func.count()).select_from(AuthToken).where(AuthToken.user_id == user.id)).scalar_one() == 0


def test_a_password_less_account_without_two_factor_is_told_what_to_do(api, user, db, hook_recorder):
    db.get(User, user.id).password_hash = None
    db.commit()
    answer = api.call("DELETE", "/authentication/user", json={"code": "123456"}, headers=user.headers)
    assert answer.status_code == 400
    assert "neither a password nor two-factor" in answer.get_json()["message"]
    assert hook_recorder.deleted == []
