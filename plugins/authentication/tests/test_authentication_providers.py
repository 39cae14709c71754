"""Sign-in with external providers against local fakes (tests/fake_providers.py): the browser-style web
flow, the native flow, linking, and every way a provider or a token can be wrong."""

from __future__ import annotations

import base64
import hashlib
import logging
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from sqlalchemy import func, select

from trellis import db as trellis_db
from trellis_authentication import providers
from trellis_authentication.config import RESERVED_NAMES
from trellis_authentication.models import AuthToken, Identity, User

from .conftest import code_of_step, path_of
from .fake_providers import CLIENT_ID, CLIENT_SECRET, Account, FakeGithub, FakeOidc

PASSWORD = "long-enough-1"
CALLBACK = "http://localhost/hook/authentication"


@pytest.fixture(autouse=True)
def _fresh_provider_caches():
    # Fakes of earlier tests may have had this port: their discovery documents and keys must not be reused.
    providers.clear_caches()
    yield
    providers.clear_caches()


@pytest.fixture()
def oidc():
    fake = FakeOidc()
    yield fake
    fake.stop()


@pytest.fixture()
def github():
    fake = FakeGithub()
    yield fake
    fake.stop()


def google_settings(fake: FakeOidc, **extra: Any) -> dict[str, Any]:
    return {
        "enabled": True,
        "clientId": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "issuer": fake.issuer,
        "authorizeUrl": f"{fake.url}/authorize",
        "tokenUrl": f"{fake.url}/token",
        "userinfoUrl": f"{fake.url}/userinfo",
        "jwksUrl": f"{fake.url}/jwks",
        **extra,
    }


def use_google(api, fake: FakeOidc, **extra: Any) -> None:
    api.configure(oauth={"google": google_settings(fake, **extra)})


def use_oidc(api, fake: FakeOidc, name: str = "acme", **extra: Any) -> None:
    api.configure(
        oauth={
            "oidc": [
                {"name": name, "issuer": fake.issuer, "clientId": CLIENT_ID, "clientSecret": CLIENT_SECRET, **extra}
            ]
        }
    )


def use_github(api, fake: FakeGithub, **extra: Any) -> None:
    api.configure(
        oauth={
            "github": {
                "enabled": True,
                "clientId": CLIENT_ID,
                "clientSecret": CLIENT_SECRET,
                "authorizeUrl": f"{fake.url}/login/oauth/authorize",
                "tokenUrl": f"{fake.url}/login/oauth/access_token",
                "apiUrl": fake.api_url,
                **extra,
            }
        }
    )


def person(email: str | None = None, verified: bool = True, subject: str | None = None) -> Account:
    return Account(subject=subject or str(time.monotonic_ns()), email=email, email_verified=verified)


def go_to_provider(client, provider: str) -> str:
    """``init`` then the provider's sign-in page; returns the URL the provider sends the browser back to."""
    start = client.get(f"/authentication/init/{provider}")
    assert start.status_code == 302, start.get_json()
    at_provider = requests.get(start.headers["Location"], allow_redirects=False, timeout=10)
    assert at_provider.status_code == 302, at_provider.text
    return at_provider.headers["Location"]


def web_sign_in(client, provider: str):
    return client.get(path_of(go_to_provider(client, provider)))


def users_with(email: str) -> int:
    return trellis_db.session.execute(select(func.count()).select_from(User).where(User.email == email)).scalar_one()


def identities() -> int:
    return trellis_db.session.execute(select(func.count()).select_from(Identity)).scalar_one()


def admin_user(client, admin_headers, email: str) -> dict[str, Any]:
    found = client.get("/authentication/users", query_string={"search": email}, headers=admin_headers).get_json()
    assert found["count"] == 1, found
    return found["users"][0]


# --- the web flow ------------------------------------------------------------------------------------


def test_google_web_flow_creates_a_verified_user_then_finds_it(api, client, admin_headers, oidc):
    use_google(api, oidc)
    email = api.fresh_email()
    oidc.account = person(email)
    start = client.get("/authentication/init/google")
    assert start.status_code == 302
    location = urlsplit(start.headers["Location"])
    query = {key: values[0] for key, values in parse_qs(location.query).items()}
    assert f"{location.scheme}://{location.netloc}{location.path}" == f"{oidc.url}/authorize"
    assert query["client_id"] == CLIENT_ID and query["response_type"] == "code"
    assert query["redirect_uri"] == f"{CALLBACK}/google"
    assert query["code_challenge_method"] == "S256" and len(query["code_challenge"]) == 43
    assert set(query["scope"].split()) == {"openid", "email", "profile"}
    assert len(query["state"]) >= 43 and len(query["nonce"]) >= 32
    # Stored server-side: only the state's hash, beside the nonce and the PKCE verifier.
    row = trellis_db.session.execute(select(AuthToken).where(AuthToken.kind == "oauth-state")).scalars().all()[-1]
    assert query["state"] not in str(row.token_hash) and row.data["nonce"] == query["nonce"]
    challenge = base64.urlsafe_b64encode(hashlib.sha256(row.data["verifier"].encode()).digest()).rstrip(b"=").decode()
    assert challenge == query["code_challenge"]

    back = requests.get(start.headers["Location"], allow_redirects=False, timeout=10).headers["Location"]
    answer = client.get(path_of(back))
    assert answer.status_code == 200, answer.get_json()
    tokens = answer.get_json()
    assert set(tokens) == {"accessToken", "refreshToken", "userId"}
    assert oidc.calls("/token")[0]["code_verifier"] == row.data["verifier"]  # PKCE checked by the fake too
    me = api.me(tokens["accessToken"]).get_json()
    assert (me["email"], me["isVerified"], me["providers"]) == (email, True, ["google"])
    assert admin_user(client, admin_headers, email)["providers"] == ["google"]

    again = web_sign_in(client, "google")
    assert again.status_code == 200 and again.get_json()["userId"] == tokens["userId"]
    assert users_with(email) == 1 and identities() == 1
    assert api.renew(again.get_json()["refreshToken"]).status_code == 200


def test_generic_oidc_provider_from_discovery_with_cached_documents(api, client, oidc):
    use_oidc(api, oidc, scopes=["openid", "email"])
    email = api.fresh_email()
    oidc.account = person(email, verified=False)
    first = web_sign_in(client, "acme")
    assert first.status_code == 200, first.get_json()
    me = api.me(first.get_json()["accessToken"]).get_json()
    assert (me["email"], me["isVerified"], me["providers"]) == (email, False, ["acme"])
    authorize = oidc.calls("/authorize")[0]
    assert (authorize["redirect_uri"], authorize["scope"]) == (f"{CALLBACK}/acme", "openid email")
    assert web_sign_in(client, "acme").get_json()["userId"] == first.get_json()["userId"]
    # One discovery document and one JWKS for both sign-ins (cached in this process).
    assert len(oidc.calls("/.well-known/openid-configuration")) == 1 and len(oidc.calls("/jwks")) == 1


def test_email_from_userinfo_when_the_id_token_has_none(api, client, oidc):
    use_google(api, oidc)
    email = api.fresh_email()
    oidc.account = person(email)
    oidc.claims = {"email": None, "email_verified": None}  # left out of the ID token
    answer = web_sign_in(client, "google")
    assert answer.status_code == 200, answer.get_json()
    assert api.me(answer.get_json()["accessToken"]).get_json()["email"] == email
    assert len(oidc.calls("/userinfo")) == 1


def test_redirect_uri_gets_the_tokens_in_the_fragment(api, client, oidc):
    use_google(api, oidc, redirectUri="https://app.example.com/signed-in")
    oidc.account = person(api.fresh_email())
    answer = web_sign_in(client, "google")
    assert answer.status_code == 302
    target = urlsplit(answer.headers["Location"])
    assert (target.netloc, target.path, target.query) == ("app.example.com", "/signed-in", "")
    fragment = parse_qs(target.fragment)
    assert api.me(fragment["accessToken"][0]).status_code == 200 and fragment["refreshToken"]


# --- linking -----------------------------------------------------------------------------------------


def test_verified_email_links_to_a_verified_account_which_keeps_its_password(
    api, client, admin_headers, oidc, make_user
):
    account = make_user(api.fresh_email(), PASSWORD)
    client.patch(f"/authentication/users/{account.id}", json={"isVerified": True}, headers=admin_headers)
    use_google(api, oidc)
    oidc.account = person(account.email.upper())  # providers may not lower-case addresses
    answer = web_sign_in(client, "google")
    assert answer.status_code == 200 and answer.get_json()["userId"] == account.id
    assert api.login(account.email, PASSWORD).status_code == 200
    assert api.me(account.access_token).status_code == 200
    assert admin_user(client, admin_headers, account.email)["providers"] == ["google"]


def test_linking_an_unverified_account_removes_the_squatters_password(api, client, oidc):
    # Someone registered the address without proving it; its owner then signs in with Google.
    email = api.fresh_email()
    assert api.register(email, PASSWORD).status_code == 201
    squatter = api.login(email, PASSWORD).get_json()
    use_google(api, oidc)
    oidc.account = person(email)
    answer = web_sign_in(client, "google")
    assert answer.status_code == 200 and answer.get_json()["userId"] == squatter["userId"]
    assert api.login(email, PASSWORD).status_code == 401
    assert api.me(squatter["accessToken"]).status_code == 401  # the squatter's session ended
    assert api.me(answer.get_json()["accessToken"]).get_json()["isVerified"] is True


def test_unverified_provider_email_never_links(api, client, oidc, make_user):
    account = make_user(api.fresh_email(), PASSWORD)
    use_google(api, oidc)
    oidc.account = person(account.email, verified=False)
    answer = web_sign_in(client, "google")
    assert answer.status_code == 409 and answer.get_json()["name"] == "CONFLICT"
    assert identities() == 0 and users_with(account.email) == 1
    assert api.login(account.email, PASSWORD).status_code == 200


def test_one_user_links_several_providers(api, client, admin_headers, oidc, github):
    other = FakeOidc()
    try:
        api.configure(
            oauth={
                "google": google_settings(oidc),
                "oidc": [
                    {"name": "acme", "issuer": other.issuer, "clientId": CLIENT_ID, "clientSecret": CLIENT_SECRET}
                ],
            }
        )
        use_github(api, github)
        email = api.fresh_email()
        oidc.account, other.account = person(email), person(email)
        github.account = person(email, subject="4242")
        ids = {web_sign_in(client, name).get_json()["userId"] for name in ("google", "acme", "github")}
        assert len(ids) == 1
        assert admin_user(client, admin_headers, email)["providers"] == ["acme", "github", "google"]
        assert identities() == 3
        client.delete(f"/authentication/users/{ids.pop()}", headers=admin_headers)
        assert identities() == 0  # the identities go with the user
    finally:
        other.stop()


def test_new_user_without_email(api, client, oidc):
    use_google(api, oidc)
    oidc.account = person(None)
    answer = web_sign_in(client, "google")
    assert answer.status_code == 200
    me = api.me(answer.get_json()["accessToken"]).get_json()
    assert (me["email"], me["isVerified"], me["providers"]) == (None, False, ["google"])


def test_closed_registration_refuses_new_users_not_linked_ones(api, client, oidc):
    use_google(api, oidc)
    known = person(api.fresh_email())
    oidc.account = known
    assert web_sign_in(client, "google").status_code == 200
    api.configure(registrationOpen=False)
    assert web_sign_in(client, "google").status_code == 200
    oidc.account = person(api.fresh_email())
    refused = web_sign_in(client, "google")
    assert refused.status_code == 403 and users_with(oidc.account.email) == 0


def test_two_factor_user_gets_the_challenge(api, client, oidc):
    import pyotp

    use_google(api, oidc)
    api.configure(twoFa={"enabled": True})
    oidc.account = person(api.fresh_email())
    tokens = web_sign_in(client, "google").get_json()
    secret = api.post("/authentication/twoFa/enable", {"method": "authenticator"}, tokens["accessToken"]).get_json()[
        "secret"
    ]
    verify = {"code": code_of_step(pyotp.TOTP(secret), -1)}  # the current code stays for the sign-in
    assert api.post("/authentication/twoFa/verify", verify, tokens["accessToken"]).status_code == 200
    challenge = web_sign_in(client, "google")
    assert challenge.status_code == 202 and challenge.get_json()["twoFaRequired"] is True
    done = api.post(
        "/authentication/twoFa/authorize",
        {"twoFaToken": challenge.get_json()["twoFaToken"], "code": code_of_step(pyotp.TOTP(secret))},
    )
    assert done.status_code == 200 and done.get_json()["userId"] == tokens["userId"]


# --- blocked users -----------------------------------------------------------------------------------


def test_blocked_user_is_refused_on_every_path(api, client, admin_headers, oidc, make_user):
    use_google(api, oidc)
    oidc.account = person(api.fresh_email())
    user_id = web_sign_in(client, "google").get_json()["userId"]
    client.put(f"/authentication/users/{user_id}/block", headers=admin_headers)
    web = web_sign_in(client, "google")
    native = api.post("/authentication/google", {"id_token": oidc.id_token(oidc.account)})
    assert (web.status_code, native.status_code) == (403, 403)
    assert web.get_json()["name"] == "FORBIDDEN"
    # A blocked account is not linked by email either.
    blocked = make_user(api.fresh_email(), PASSWORD)
    client.put(f"/authentication/users/{blocked.id}/block", headers=admin_headers)
    oidc.account = person(blocked.email)
    assert web_sign_in(client, "google").status_code == 403
    assert identities() == 1


# --- refusals of the web flow ------------------------------------------------------------------------


def _forged(fake: FakeOidc, how: str) -> None:
    now = int(time.time())
    if how == "tampered signature":
        fake.sign_with_stranger = True
    elif how == "wrong audience":
        fake.claims = {"aud": "somebody-elses-client", "azp": None}
    elif how == "expired":
        fake.claims = {"iat": now - 7200, "exp": now - 3600}
    elif how == "wrong nonce":
        fake.claims = {"nonce": "not-the-nonce-we-sent"}
    elif how == "wrong issuer":
        fake.claims = {"iss": "https://evil.example.com"}
    elif how == "no subject":
        fake.claims = {"sub": None}


@pytest.mark.parametrize(
    "how,reason",
    [
        ("tampered signature", "signature"),
        ("wrong audience", "aud"),
        ("expired", "expired"),
        ("wrong nonce", "nonce"),
        ("wrong issuer", "iss"),
        ("no subject", "sub"),
    ],
)
def test_id_tokens_that_do_not_verify_are_400(api, client, oidc, caplog, how, reason):
    use_google(api, oidc)
    oidc.account = person(api.fresh_email())
    _forged(oidc, how)
    caplog.set_level(logging.WARNING)
    answer = web_sign_in(client, "google")
    assert answer.status_code == 400, answer.get_json()
    body = answer.get_json()
    assert body["name"] == "INVALID_ARGUMENTS" and reason in body["message"]
    assert users_with(oidc.account.email) == 0 and identities() == 0
    assert answer.headers["X-Request-ID"] in caplog.text and reason in caplog.text


def _break(fake: FakeOidc, api, how: str) -> None:
    if how == "token endpoint 500":
        fake.status["/token"] = 500
    elif how == "token endpoint 400":
        fake.status["/token"] = 400
    elif how == "token endpoint not JSON":
        fake.garbage.add("/token")
    elif how == "JWKS not JSON":
        fake.garbage.add("/jwks")
    elif how == "JWKS 503":
        fake.status["/jwks"] = 503
    elif how == "too slow":
        api.configure(oauth={"timeoutSeconds": 0.5})
        fake.delay["/token"] = 1.5
    elif how == "down":
        fake.stop()


@pytest.mark.parametrize(
    "how,reason",
    [
        ("token endpoint 500", "HTTP 500"),
        ("token endpoint 400", "refused"),
        ("token endpoint not JSON", "not a JSON object"),
        ("JWKS not JSON", "not JSON"),
        ("JWKS 503", "HTTP 503"),
        ("too slow", "within 0.5 s"),
        ("down", "cannot reach"),
    ],
)
def test_provider_failures_are_400_and_create_nobody(api, client, oidc, caplog, how, reason):
    use_google(api, oidc)
    oidc.account = person(api.fresh_email())
    back = go_to_provider(client, "google")
    _break(oidc, api, how)
    caplog.set_level(logging.WARNING)
    answer = client.get(path_of(back))
    assert answer.status_code == 400, answer.get_json()
    assert reason in answer.get_json()["message"]
    assert users_with(oidc.account.email) == 0 and identities() == 0
    assert answer.get_json()["requestId"] in caplog.text


def test_discovery_failure_at_init_is_400(api, client, oidc):
    use_oidc(api, oidc)
    oidc.status["/.well-known/openid-configuration"] = 502
    answer = client.get("/authentication/init/acme")
    assert answer.status_code == 400 and "HTTP 502" in answer.get_json()["message"]


def test_discovery_document_of_another_issuer_is_refused(api, client, oidc):
    use_oidc(api, oidc)
    oidc.issuer = "https://impostor.example.com"
    answer = client.get("/authentication/init/acme")
    assert answer.status_code == 400 and "another issuer" in answer.get_json()["message"]


def test_state_works_once(api, client, oidc):
    use_google(api, oidc)
    oidc.account = person(api.fresh_email())
    back = path_of(go_to_provider(client, "google"))
    assert client.get(back).status_code == 200
    replay = client.get(back)
    assert replay.status_code == 400 and replay.get_json()["errors"] == {"state": ["Invalid."]}


@pytest.mark.parametrize(
    "query",
    ["code=abc&state=made-up", "code=abc", "state=", "code=abc&state=" + "x" * 600],
)
def test_unknown_or_missing_state_is_400(api, client, oidc, query):
    use_google(api, oidc)
    answer = client.get(f"/hook/authentication/google?{query}")
    assert answer.status_code == 400 and answer.get_json()["name"] == "INVALID_ARGUMENTS"
    assert oidc.calls("/token") == []


def test_state_of_another_provider_is_refused(api, client, oidc):
    api.configure(
        oauth={
            "google": google_settings(oidc),
            "oidc": [{"name": "acme", "issuer": oidc.issuer, "clientId": CLIENT_ID, "clientSecret": CLIENT_SECRET}],
        }
    )
    oidc.account = person(api.fresh_email())
    back = urlsplit(go_to_provider(client, "google"))
    assert client.get(f"/hook/authentication/acme?{back.query}").status_code == 400
    assert client.get(f"{back.path}?{back.query}").status_code == 400  # a state shown to the wrong hook is burnt
    assert oidc.calls("/token") == []


def test_user_refusing_at_the_provider_is_400(api, client, oidc):
    use_google(api, oidc)
    oidc.account = None  # the fake answers error=access_denied
    answer = client.get(path_of(go_to_provider(client, "google")))
    assert answer.status_code == 400 and "access_denied" in answer.get_json()["message"]


def test_extra_parameters_of_the_provider_are_ignored(api, client, oidc):
    use_google(api, oidc)
    oidc.account = person(api.fresh_email())
    back = path_of(go_to_provider(client, "google"))
    assert client.get(back + "&authuser=0&prompt=consent&hd=example.com").status_code == 200


# --- the native flow ---------------------------------------------------------------------------------


def test_native_id_token_sign_in(api, oidc):
    use_google(api, oidc)
    account = person(api.fresh_email())
    answer = api.post("/authentication/google", {"id_token": oidc.id_token(account)})
    assert answer.status_code == 200, answer.get_json()
    me = api.me(answer.get_json()["accessToken"]).get_json()
    assert (me["email"], me["providers"]) == (account.email, ["google"])
    same = api.post("/authentication/google", {"id_token": oidc.id_token(account, nonce="n-1"), "nonce": "n-1"})
    assert same.get_json()["userId"] == answer.get_json()["userId"]


@pytest.mark.parametrize(
    "overrides,body_extra,reason",
    [
        ({"aud": "another-app"}, {}, "aud"),
        ({"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200}, {}, "expired"),
        ({"nonce": "theirs"}, {"nonce": "mine"}, "nonce"),
        ({}, {"nonce": "mine"}, "nonce"),  # a nonce the app asked for must be in the token
        ({"iss": "https://accounts.google.com.evil"}, {}, "iss"),
    ],
)
def test_native_tokens_that_do_not_verify(api, oidc, overrides, body_extra, reason):
    use_google(api, oidc)
    account = person(api.fresh_email())
    answer = api.post("/authentication/google", {"id_token": oidc.id_token(account, **overrides), **body_extra})
    assert answer.status_code == 400 and reason in answer.get_json()["message"], answer.get_json()
    assert users_with(account.email) == 0


def test_native_garbage_and_missing_tokens(api, oidc):
    use_google(api, oidc)
    for body, field in [
        ({"id_token": "not.a.jwt"}, None),
        ({"id_token": "x"}, None),
        ({}, "id_token"),
        ({"access_token": "abc"}, "id_token"),
        ({"id_token": "a", "extra": 1}, "extra"),
    ]:
        answer = api.post("/authentication/google", body)
        assert answer.status_code == 400, (body, answer.get_json())
        if field:
            assert field in answer.get_json()["errors"]


def test_native_token_of_another_app_of_ours_with_audiences(api, oidc):
    use_google(api, oidc, audiences=["android-client"])
    account = person(api.fresh_email())
    android = oidc.id_token(account, aud=["android-client", CLIENT_ID], azp="android-client")
    assert api.post("/authentication/google", {"id_token": android}).status_code == 200
    stranger = oidc.id_token(account, aud=["android-client", CLIENT_ID], azp="stranger")
    assert api.post("/authentication/google", {"id_token": stranger}).status_code == 400


def test_unsigned_and_symmetric_tokens_are_refused(api, oidc):
    from joserfc import jwt
    from joserfc.jwk import OctKey

    use_google(api, oidc)
    now = int(time.time())
    claims = {"iss": oidc.issuer, "sub": "1", "aud": CLIENT_ID, "iat": now, "exp": now + 600}
    hs256 = jwt.encode({"alg": "HS256"}, claims, OctKey.import_key(CLIENT_SECRET.encode() * 2))
    header = base64.urlsafe_b64encode(b'{"alg":"none"}').rstrip(b"=").decode()
    payload = base64.urlsafe_b64encode(str(claims).replace("'", '"').encode()).rstrip(b"=").decode()
    for token in (hs256, f"{header}.{payload}."):
        answer = api.post("/authentication/google", {"id_token": token})
        assert answer.status_code == 400, answer.get_json()


def test_key_rotation_refetches_the_jwks_once(api, oidc):
    use_google(api, oidc)
    account = person(api.fresh_email())
    assert api.post("/authentication/google", {"id_token": oidc.id_token(account)}).status_code == 200
    oidc.rotate_key()
    answer = api.post("/authentication/google", {"id_token": oidc.id_token(account)})
    assert answer.status_code == 200, answer.get_json()
    assert len(oidc.calls("/jwks")) == 2
    # Another unknown key id right after: refused without asking the provider again.
    oidc.rotate_key()
    refused = api.post("/authentication/google", {"id_token": oidc.id_token(account)})
    assert refused.status_code == 400 and "unknown key" in refused.get_json()["message"]
    assert len(oidc.calls("/jwks")) == 2


def test_unknown_disabled_and_reserved_providers(api, client, oidc):
    assert api.post("/authentication/google", {"id_token": "x"}).status_code == 404  # not enabled
    assert client.get("/authentication/init/nosuch").status_code == 404
    assert client.get("/hook/authentication/nosuch?code=a&state=b").status_code == 404
    use_google(api, oidc)
    api.configure(oauth={"google": {"enabled": False}})
    assert client.get("/authentication/init/google").status_code == 404


def test_static_routes_win_over_provider_names(app, api, client):
    assert client.post("/authentication/user", json={}).status_code == 405  # GET-only route, not a provider
    assert client.post("/authentication/renew", json={"refreshToken": "x"}).status_code == 401
    assert client.post("/authentication/local", json={"email": "a@b.c", "password": "p"}).status_code == 401
    # Every static first segment under /authentication/ is a reserved provider name.
    segments = set()
    for rule in app.url_map.iter_rules():
        for prefix in ("/authentication/", "/hook/authentication/"):
            if rule.rule.startswith(prefix):
                first = rule.rule[len(prefix) :].split("/")[0]
                if not first.startswith("<"):
                    segments.add(first.lower())
    assert segments <= RESERVED_NAMES


# --- GitHub ------------------------------------------------------------------------------------------


def test_github_web_flow(api, client, github):
    use_github(api, github)
    email = api.fresh_email()
    github.account = person(email, subject="1001")
    answer = web_sign_in(client, "github")
    assert answer.status_code == 200, answer.get_json()
    me = api.me(answer.get_json()["accessToken"]).get_json()
    assert (me["email"], me["isVerified"], me["providers"]) == (email, True, ["github"])
    authorize = github.calls("/login/oauth/authorize")[0]
    assert authorize["code_challenge_method"] == "S256" and set(authorize["scope"].split()) == {
        "read:user",
        "user:email",
    }


def test_github_picks_the_verified_address(api, client, github):
    use_github(api, github)
    verified = api.fresh_email()
    github.account = person(api.fresh_email(), subject="1002")
    github.emails = [
        {"email": "unverified-primary@example.com", "primary": True, "verified": False},
        {"email": verified, "primary": False, "verified": True},
    ]
    me = api.me(web_sign_in(client, "github").get_json()["accessToken"]).get_json()
    assert (me["email"], me["isVerified"]) == (verified, True)


def test_github_unverified_address_makes_an_unverified_user(api, client, github):
    use_github(api, github)
    github.account = person(api.fresh_email(), verified=False, subject="1003")
    me = api.me(web_sign_in(client, "github").get_json()["accessToken"]).get_json()
    assert (me["email"], me["isVerified"]) == (github.account.email, False)


@pytest.mark.parametrize(
    "path,how", [("/api/user", "status"), ("/api/user/emails", "garbage"), ("/login/oauth/access_token", "status")]
)
def test_github_failures_are_400(api, client, github, path, how):
    use_github(api, github)
    github.account = person(api.fresh_email(), subject="1004")
    back = go_to_provider(client, "github")
    if how == "status":
        github.status[path] = 502
    else:
        github.garbage.add(path)
    answer = client.get(path_of(back))
    assert answer.status_code == 400 and answer.get_json()["name"] == "INVALID_ARGUMENTS"
    assert users_with(github.account.email) == 0


def test_github_bad_code_is_400(api, client, github):
    use_github(api, github)
    github.account = person(api.fresh_email(), subject="1005")
    back = urlsplit(go_to_provider(client, "github"))
    state = parse_qs(back.query)["state"][0]
    answer = client.get(f"{back.path}?code=forged&state={state}")
    assert answer.status_code == 400 and "bad_verification_code" in answer.get_json()["message"]


def test_github_native_access_token(api, github):
    use_github(api, github)
    account = person(api.fresh_email(), subject="2001")
    answer = api.post("/authentication/github", {"access_token": github.token_for(account)})
    assert answer.status_code == 200, answer.get_json()
    assert api.me(answer.get_json()["accessToken"]).get_json()["providers"] == ["github"]
    # A token GitHub issued to another app must not sign anybody in here.
    stolen = api.post("/authentication/github", {"access_token": github.token_for(account, client_id="other-app")})
    assert stolen.status_code == 400 and "not valid for this app" in stolen.get_json()["message"]
    assert api.post("/authentication/github", {"id_token": "x"}).status_code == 400


def test_microsoft_multi_tenant_issuer_and_unproven_email(api, oidc):
    oidc.issuer = f"{oidc.url}/tenant-7/v2.0"  # what the user's directory puts in its tokens
    api.configure(
        oauth={
            "microsoft": {
                "enabled": True,
                "clientId": CLIENT_ID,
                "clientSecret": CLIENT_SECRET,
                "issuer": f"{oidc.url}/{{tenantid}}/v2.0",
                "authorizeUrl": f"{oidc.url}/authorize",
                "tokenUrl": f"{oidc.url}/token",
                "jwksUrl": f"{oidc.url}/jwks",
            }
        }
    )
    account = person(api.fresh_email())
    # Microsoft's email claim is not verified: no email_verified claim, so no linking and isVerified false.
    token = oidc.id_token(account, tid="tenant-7", email_verified=None)
    answer = api.post("/authentication/microsoft", {"id_token": token})
    assert answer.status_code == 200, answer.get_json()
    assert api.me(answer.get_json()["accessToken"]).get_json()["isVerified"] is False
    other_tenant = oidc.id_token(account, tid="tenant-8")
    assert api.post("/authentication/microsoft", {"id_token": other_tenant}).status_code == 400


# --- config and secrets ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "oauth,field",
    [
        ({"google": {"enabled": True}}, "clientId"),
        ({"github": {"apiUrl": "file:///etc/passwd"}}, "apiUrl"),
        ({"oidc": [{"name": "local", "issuer": "https://id.example.com", "clientId": "c"}]}, "name"),
        ({"oidc": [{"name": "google", "issuer": "https://id.example.com", "clientId": "c"}]}, "name"),
        ({"oidc": [{"name": "Bad Name", "issuer": "https://id.example.com", "clientId": "c"}]}, "name"),
        ({"oidc": [{"name": "acme", "issuer": "not a url", "clientId": "c"}]}, "issuer"),
        ({"oidc": [{"name": "acme", "issuer": "https://id.example.com"}]}, "clientId"),
        (
            {
                "oidc": [
                    {"name": "a", "issuer": "https://a.example.com", "clientId": "c"},
                    {"name": "a", "issuer": "https://b.example.com", "clientId": "c"},
                ]
            },
            "oidc",
        ),
        ({"timeoutSeconds": 0}, "timeoutSeconds"),
        ({"microsoft": {"tenant": "../../evil"}}, "tenant"),
    ],
)
def test_invalid_provider_config_is_400(client, admin_headers, oauth, field):
    response = client.put("/config/authentication", json={"oauth": oauth}, headers=admin_headers)
    assert response.status_code == 400
    assert field in str(response.get_json()["errors"])


def test_client_secret_is_marked_secret():
    from trellis_authentication.config import AuthenticationConfig

    oauth = AuthenticationConfig().fields["oauth"].schema
    for name in ("google", "github", "microsoft"):
        assert oauth.fields[name].schema.fields["clientSecret"].metadata["secret"] is True
    assert oauth.fields["oidc"].inner.schema.fields["clientSecret"].metadata["secret"] is True


def test_provider_secrets_and_codes_never_reach_the_logs(api, client, oidc, caplog):
    caplog.set_level(logging.DEBUG)
    use_google(api, oidc)
    oidc.account = person(api.fresh_email())
    back = go_to_provider(client, "google")
    oidc.status["/token"] = 500
    client.get(path_of(back))
    oidc.status.clear()
    tokens = web_sign_in(client, "google").get_json()
    code = parse_qs(urlsplit(back).query)["code"][0]
    assert "refused" in caplog.text
    for secret in (CLIENT_SECRET, code, tokens["accessToken"], tokens["refreshToken"]):
        assert secret not in caplog.text
