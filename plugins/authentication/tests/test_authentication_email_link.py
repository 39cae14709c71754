"""Change of email (with and without verification) and sign-in by magic link."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

from sqlalchemy import update

from trellis import db as trellis_db
from trellis_authentication.models import AuthToken

from .conftest import link_in, path_of

PASSWORD = "long-enough-1"


def account(api):
    email = api.fresh_email()
    assert api.register(email, PASSWORD).status_code == 201
    return email, api.login(email, PASSWORD).get_json()


def change(api, tokens, new_email, password=PASSWORD):
    return api.post(
        "/authentication/local/change-email", {"newEmail": new_email, "password": password}, tokens["accessToken"]
    )


# --- change email ------------------------------------------------------------------------------------


def test_change_email_without_verification_is_immediate(api):
    email, tokens = account(api)
    new_email = api.fresh_email()
    answer = change(api, tokens, new_email.upper())
    assert answer.status_code == 200 and answer.get_json()["verificationRequired"] is False
    me = api.me(tokens["accessToken"]).get_json()
    assert me["email"] == new_email and me["isVerified"] is False
    assert api.login(new_email, PASSWORD).status_code == 200
    assert api.login(email, PASSWORD).status_code == 401


def test_change_email_refusals(api):
    taken, _ = account(api)
    email, tokens = account(api)
    assert change(api, tokens, taken).status_code == 409
    assert change(api, tokens, api.fresh_email(), "wrong-password").status_code == 401
    bad = change(api, tokens, "not-an-email")
    assert bad.status_code == 400 and "newEmail" in bad.get_json()["errors"]
    assert (
        api.post(
            "/authentication/local/change-email", {"newEmail": api.fresh_email(), "password": PASSWORD}
        ).status_code
        == 401
    )
    assert api.me(tokens["accessToken"]).get_json()["email"] == email


def test_change_email_with_verification_waits_for_the_link(api):
    api.configure(local={"verification": {"required": True}})
    email, _ = account(api)
    api.get(path_of(link_in(api.mails(email)[0])))  # verify the first address
    tokens = api.login(email, PASSWORD).get_json()
    new_email = api.fresh_email()
    answer = change(api, tokens, new_email)
    assert answer.status_code == 200 and answer.get_json()["verificationRequired"] is True
    assert api.me(tokens["accessToken"]).get_json()["email"] == email  # not yet
    mail = api.mails(new_email)[0]
    assert mail["templateName"] == "ChangeEmailVerification"
    link = link_in(mail)
    assert "/hook/authentication/verify-change-email/" in link
    assert api.get(path_of(link)).status_code == 200
    me = api.me(tokens["accessToken"]).get_json()
    assert me["email"] == new_email and me["isVerified"] is True
    assert api.get(path_of(link)).status_code == 404
    assert api.get("/hook/authentication/verify-change-email/unknown").status_code == 404


def test_change_email_link_loses_to_a_user_who_took_the_address_meanwhile(api):
    api.configure(local={"verification": {"required": True, "sendEmail": False}})
    email = api.fresh_email()
    api.register(email, PASSWORD)
    user_id = api.client.get("/authentication/users", query_string={"search": email}, headers=api.admin).get_json()[
        "users"
    ][0]["_id"]
    api.client.patch(f"/authentication/users/{user_id}", json={"isVerified": True}, headers=api.admin)
    tokens = api.login(email, PASSWORD).get_json()
    new_email = api.fresh_email()
    change(api, tokens, new_email)
    link = link_in(api.mails(new_email)[0])
    api.register(new_email, PASSWORD)  # someone registers the address first
    assert api.get(path_of(link)).status_code == 409
    assert api.me(tokens["accessToken"]).get_json()["email"] == email


# --- magic link --------------------------------------------------------------------------------------


def request_link(api, email):
    return api.post("/authentication/magic-link", {"email": email})


def test_magic_link_disabled_is_403(api):
    email, _ = account(api)
    assert request_link(api, email).status_code == 403
    assert api.get("/hook/authentication/magic-link/anything").status_code == 403


def test_magic_link_signs_in_once(api):
    api.configure(magicLink={"enabled": True})
    email, _ = account(api)
    answer = request_link(api, email)
    unknown = request_link(api, api.fresh_email())
    assert answer.status_code == unknown.status_code == 200 and answer.get_json() == unknown.get_json()
    mail = [m for m in api.mails(email) if m["templateName"] == "MagicLink"][0]
    link = link_in(mail)
    assert link.startswith("http://localhost/hook/authentication/magic-link/")
    signed_in = api.get(path_of(link))
    assert signed_in.status_code == 200
    tokens = signed_in.get_json()
    me = api.me(tokens["accessToken"]).get_json()
    assert me["email"] == email and me["isVerified"] is True  # the link reached the mailbox
    assert api.get(path_of(link)).status_code == 404


def test_magic_link_expires(api, db):
    api.configure(magicLink={"enabled": True})
    email, _ = account(api)
    request_link(api, email)
    link = link_in([m for m in api.mails(email) if m["templateName"] == "MagicLink"][0])
    db.execute(update(AuthToken).values(expires_at=trellis_db.utcnow() - timedelta(seconds=1)))
    assert api.get(path_of(link)).status_code == 404


def test_magic_link_redirects_with_tokens_in_the_fragment(api):
    api.configure(magicLink={"enabled": True, "redirectUri": "https://app.example.com/signed-in"})
    email, _ = account(api)
    request_link(api, email)
    link = link_in([m for m in api.mails(email) if m["templateName"] == "MagicLink"][0])
    answer = api.get(path_of(link))
    assert answer.status_code == 302
    location = urlsplit(answer.headers["Location"])
    assert (location.scheme, location.netloc, location.path, location.query) == (
        "https",
        "app.example.com",
        "/signed-in",
        "",
    )
    fragment = {key: values[0] for key, values in parse_qs(location.fragment).items()}
    assert api.me(fragment["accessToken"]).status_code == 200


def test_magic_link_of_a_blocked_user_is_403(api):
    api.configure(magicLink={"enabled": True})
    email, tokens = account(api)
    request_link(api, email)
    link = link_in([m for m in api.mails(email) if m["templateName"] == "MagicLink"][0])
    assert api.client.put(f"/authentication/users/{tokens['userId']}/block", headers=api.admin).status_code == 200
    assert api.get(path_of(link)).status_code == 403


def test_magic_link_is_rate_limited_and_needs_the_email_module(api):
    api.configure(magicLink={"enabled": True}, rateLimits={"sendPerAddress": "1/minute"})
    address = api.fresh_email()
    assert [request_link(api, address).status_code for _ in range(2)] == [200, 429]
    api.module("email", active=False)
    answer = request_link(api, api.fresh_email())
    assert answer.status_code == 400 and "email" in answer.get_json()["message"]
