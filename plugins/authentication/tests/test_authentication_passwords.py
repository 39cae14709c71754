"""Forgotten password (mail, reset, sessions ended) and change password (other sessions ended)."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

from sqlalchemy import update

from trellis import db as trellis_db
from trellis_authentication.models import AuthToken

from .conftest import link_in, path_of

PASSWORD = "long-enough-1"


def account(api, **config):
    """A registered, signed-in user: (email, tokens)."""
    if config:
        api.configure(**config)
    email = api.fresh_email()
    assert api.register(email, PASSWORD).status_code == 201
    return email, api.login(email, PASSWORD).get_json()


def reset_token(api, email: str) -> str:
    answer = api.post("/authentication/forgot-password", {"email": email})
    assert answer.status_code == 200
    mails = [m for m in api.mails(email) if m["templateName"] == "ForgotPassword"]
    assert len(mails) == 1
    return parse_qs(urlsplit(link_in(mails[0])).query)["reset_token"][0]


def reset(api, token: str, password: str):
    return api.post("/authentication/reset-password", {"passwordResetToken": token, "password": password})


def test_forgot_password_answers_the_same_for_unknown_addresses_and_mails_known_ones(api):
    email, _ = account(api)
    known = api.post("/authentication/forgot-password", {"email": email.upper()})
    unknown_address = api.fresh_email()
    unknown = api.post("/authentication/forgot-password", {"email": unknown_address})
    assert known.status_code == unknown.status_code == 200
    assert known.get_json() == unknown.get_json() and "message" in known.get_json()
    mail = [m for m in api.mails(email) if m["templateName"] == "ForgotPassword"][0]
    assert link_in(mail).startswith("http://localhost/authentication/reset?reset_token=")
    assert api.mails(unknown_address) == []


def test_forgot_password_link_uses_the_configured_page(api):
    email, _ = account(api, local={"forgotPasswordRedirectUri": "https://app.example.com/reset?lang=en"})
    api.post("/authentication/forgot-password", {"email": email})
    link = link_in(api.mails(email)[0])
    assert link.startswith("https://app.example.com/reset?lang=en&reset_token=")


def test_reset_sets_the_password_and_ends_every_session(api):
    email, tokens = account(api)
    token = reset_token(api, email)
    answer = reset(api, token, "a-brand-new-password")
    assert answer.status_code == 200 and "message" in answer.get_json()
    assert api.me(tokens["accessToken"]).status_code == 401
    assert api.renew(tokens["refreshToken"]).status_code == 401
    assert api.login(email, PASSWORD).status_code == 401
    assert api.login(email, "a-brand-new-password").status_code == 200
    used = reset(api, token, "yet-another-password")
    assert used.status_code == 400 and used.get_json()["name"] == "INVALID_ARGUMENTS"
    assert api.login(email, "a-brand-new-password").status_code == 200


def test_a_failed_reset_changes_nothing(api):
    api.configure(passwordRules={"minLength": 12})
    email = api.fresh_email()
    assert api.register(email, "twelve-chars-ok").status_code == 201
    tokens = api.login(email, "twelve-chars-ok").get_json()
    token = reset_token(api, email)
    short = reset(api, token, "short")
    assert short.status_code == 400 and "password" in short.get_json()["errors"]
    assert api.login(email, "twelve-chars-ok").status_code == 200  # the old password still works
    assert api.me(tokens["accessToken"]).status_code == 200  # and the sessions still run
    assert reset(api, token, "long-enough-now").status_code == 200  # the token was not used up


def test_unknown_or_expired_reset_token_is_400(api, db):
    assert reset(api, "made-up", "a-brand-new-password").status_code == 400
    email, _ = account(api)
    token = reset_token(api, email)
    db.execute(update(AuthToken).values(expires_at=trellis_db.utcnow() - timedelta(seconds=1)))
    assert reset(api, token, "a-brand-new-password").status_code == 400
    assert api.login(email, PASSWORD).status_code == 200


def test_reset_needs_both_fields(api):
    answer = api.post("/authentication/reset-password", {"passwordResetToken": "x"})
    assert answer.status_code == 400 and "password" in answer.get_json()["errors"]


def test_reset_and_change_drop_live_connections(api, hook_recorder):
    email, tokens = account(api)
    assert reset(api, reset_token(api, email), "a-brand-new-password").status_code == 200
    user_id = tokens["userId"]
    assert hook_recorder.blocked == [user_id]
    tokens = api.login(email, "a-brand-new-password").get_json()
    change = api.post(
        "/authentication/local/change-password",
        {"oldPassword": "a-brand-new-password", "newPassword": "third-password"},
        tokens["accessToken"],
    )
    assert change.status_code == 200
    assert hook_recorder.blocked == [user_id, user_id]


def test_change_password_keeps_this_session_and_ends_the_others(api):
    email, this = account(api)
    other = api.login(email, PASSWORD).get_json()
    answer = api.post(
        "/authentication/local/change-password",
        {"oldPassword": PASSWORD, "newPassword": "a-brand-new-password"},
        this["accessToken"],
    )
    assert answer.status_code == 200
    assert api.me(this["accessToken"]).status_code == 200
    assert api.renew(this["refreshToken"]).status_code == 200
    assert api.me(other["accessToken"]).status_code == 401
    assert api.renew(other["refreshToken"]).status_code == 401
    assert api.login(email, PASSWORD).status_code == 401
    assert api.login(email, "a-brand-new-password").status_code == 200


def test_change_password_refusals(api):
    api.configure(passwordRules={"requireDigit": True})
    email, tokens = account(api)
    wrong = api.post(
        "/authentication/local/change-password",
        {"oldPassword": "not-it-1", "newPassword": "a-new-password-2"},
        tokens["accessToken"],
    )
    assert wrong.status_code == 401
    weak = api.post(
        "/authentication/local/change-password",
        {"oldPassword": PASSWORD, "newPassword": "no-digits-here"},
        tokens["accessToken"],
    )
    assert weak.status_code == 400 and "newPassword" in weak.get_json()["errors"]
    anonymous = api.post("/authentication/local/change-password", {"oldPassword": PASSWORD, "newPassword": "x-2"})
    assert anonymous.status_code == 401
    assert api.login(email, PASSWORD).status_code == 200


def test_forgot_password_is_rate_limited_per_address(api):
    # One bucket per address for every mail: the verification mail of the registration counts too.
    email, _ = account(api, rateLimits={"sendPerAddress": "3/minute"})
    statuses = [api.post("/authentication/forgot-password", {"email": email}).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    unknown = api.fresh_email()
    statuses = [api.post("/authentication/forgot-password", {"email": unknown}).status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]


def test_forgot_password_with_email_inactive_is_400(api):
    email, _ = account(api)
    api.module("email", active=False)
    answer = api.post("/authentication/forgot-password", {"email": email})
    assert answer.status_code == 400 and "email" in answer.get_json()["message"]


def test_hashes_of_older_parameters_still_verify_and_are_rehashed_at_sign_in(api, db):
    from argon2 import PasswordHasher, profiles
    from sqlalchemy import select

    from trellis_authentication.models import User

    email, _ = account(api)
    # A hash as made before the OWASP profile (RFC 9106 low-memory: m=64 MiB, t=3, p=4).
    old_hash = PasswordHasher.from_parameters(profiles.RFC_9106_LOW_MEMORY).hash(PASSWORD)
    db.execute(update(User).where(User.email == email).values(password_hash=old_hash))
    assert api.login(email, PASSWORD).status_code == 200
    stored = db.execute(select(User.password_hash).where(User.email == email)).scalar_one()
    assert stored != old_hash and "m=65536,t=3,p=4" not in stored
    assert api.login(email, PASSWORD).status_code == 200


def links_of(api, email: str, template: str) -> list[str]:
    return [link_in(m) for m in api.mails(email) if m["templateName"] == template]


def outstanding_links(api, email: str, access_token: str) -> dict[str, str]:
    """A second reset link, a magic link and a change-email link, all issued and unused."""
    api.configure(magicLink={"enabled": True}, local={"verification": {"required": True}})
    assert api.post("/authentication/forgot-password", {"email": email}).status_code == 200
    assert api.post("/authentication/magic-link", {"email": email}).status_code == 200
    new_email = api.fresh_email()
    changed = api.post(
        "/authentication/local/change-email", {"newEmail": new_email, "password": PASSWORD}, access_token
    )
    assert changed.status_code == 200 and changed.get_json()["verificationRequired"] is True
    api.configure(local={"verification": {"required": False}})  # the unverified user may sign in again
    return {
        "reset": parse_qs(urlsplit(links_of(api, email, "ForgotPassword")[0]).query)["reset_token"][0],
        "magic": path_of(links_of(api, email, "MagicLink")[0]),
        "change-email": path_of(links_of(api, new_email, "ChangeEmailVerification")[0]),
    }


def assert_all_ended(api, links: dict[str, str]) -> None:
    reused = reset(api, links["reset"], "set-by-an-old-link")
    assert reused.status_code == 400 and "passwordResetToken" in reused.get_json()["errors"]
    assert api.get(links["magic"]).status_code == 404
    assert api.get(links["change-email"]).status_code == 404


def test_a_reset_ends_every_other_reset_magic_and_change_email_link(api):
    email, tokens = account(api)
    first = reset_token(api, email)  # link A; outstanding_links asks for link B
    links = outstanding_links(api, email, tokens["accessToken"])
    assert links["reset"] != first
    assert reset(api, first, "a-brand-new-password").status_code == 200
    assert_all_ended(api, links)
    assert api.login(email, "a-brand-new-password").status_code == 200
    assert api.login(email, "set-by-an-old-link").status_code == 401


def test_a_password_change_ends_the_reset_magic_and_change_email_links_issued_before(api):
    email, tokens = account(api)
    links = outstanding_links(api, email, tokens["accessToken"])
    changed = api.post(
        "/authentication/local/change-password",
        {"oldPassword": PASSWORD, "newPassword": "a-brand-new-password"},
        tokens["accessToken"],
    )
    assert changed.status_code == 200
    assert_all_ended(api, links)
    assert api.login(email, "a-brand-new-password").status_code == 200
    assert api.login(email, "set-by-an-old-link").status_code == 401


def test_links_issued_after_a_new_password_work(api):
    email, tokens = account(api)
    assert reset(api, reset_token(api, email), "a-brand-new-password").status_code == 200
    api.configure(magicLink={"enabled": True})
    assert api.post("/authentication/magic-link", {"email": email}).status_code == 200
    signed_in = api.get(path_of(links_of(api, email, "MagicLink")[0]))
    assert signed_in.status_code == 200 and "accessToken" in signed_in.get_json()
