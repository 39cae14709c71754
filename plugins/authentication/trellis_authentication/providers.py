"""Sign-in providers: Google, GitHub, Microsoft and generic OpenID Connect providers from the module config,
and every call made to them.

OAuth 2.0 goes through Authlib's client (authorization URL with PKCE S256, code exchange); ID tokens are
verified with joserfc, the JOSE library Authlib's own OpenID Connect client uses, and Authlib's
``CodeIDToken`` claim rules (plus an explicit audience check). Nothing here parses or signs a JWT by hand.

Discovery documents and JWKS are cached per process for an hour. A token signed with a key id the cached
JWKS lacks (the provider rotated its keys) fetches the JWKS again, at most once a minute per provider, so
tokens with made-up key ids cannot make us hammer the provider.

Every failure of a provider (unreachable, slower than ``oauth.timeoutSeconds``, a 4xx/5xx answer,
malformed JSON) and every token that does not verify is a :class:`ProviderError`; its message names what
went wrong and never carries a secret, code or token.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

import requests
from authlib.common.errors import AuthlibBaseError
from authlib.common.security import generate_token
from authlib.integrations.requests_client import OAuth2Session
from authlib.oidc.core import CodeIDToken
from joserfc import jwt
from joserfc.errors import ExpiredTokenError, InvalidClaimError, InvalidKeyIdError, JoseError, MissingClaimError
from joserfc.jwk import KeySet

from trellis.errors import not_found

from .config import PRESETS

OIDC, GITHUB = "oidc", "github"
# Asymmetric signatures only: an ID token signed with the client secret (HS256) or unsigned is refused.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
CACHE_SECONDS = 3600.0
REFETCH_INTERVAL = 60.0
LEEWAY_SECONDS = 60  # clock skew allowed on exp, iat, nbf
USER_AGENT = "trellis-authentication/0.1"

_GOOGLE = {
    "issuer": "https://accounts.google.com",
    "authorizeUrl": "https://accounts.google.com/o/oauth2/v2/auth",
    "tokenUrl": "https://oauth2.googleapis.com/token",
    "userinfoUrl": "https://openidconnect.googleapis.com/v1/userinfo",
    "jwksUrl": "https://www.googleapis.com/oauth2/v3/certs",
}
_MICROSOFT = {
    # Multi-tenant apps get tokens from each user's own directory: "{tenantid}" is the token's tid.
    "issuer": "https://login.microsoftonline.com/{tenantid}/v2.0",
    "authorizeUrl": "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/authorize",
    "tokenUrl": "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token",
    "userinfoUrl": "https://graph.microsoft.com/oidc/userinfo",
    "jwksUrl": "https://login.microsoftonline.com/{tenant}/discovery/v2.0/keys",
}
_GITHUB = {
    "authorizeUrl": "https://github.com/login/oauth/authorize",
    "tokenUrl": "https://github.com/login/oauth/access_token",
    "apiUrl": "https://api.github.com",
}
DEFAULT_SCOPES = {OIDC: ("openid", "email", "profile"), GITHUB: ("read:user", "user:email")}


class ProviderError(Exception):
    """A provider failed or its answer did not verify; the message is safe to show and to log."""


_ERROR_CODE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def error_code(value: Any) -> str:
    """A provider's OAuth error code (``access_denied`` …) fit to quote, or "unknown error"."""
    return value if isinstance(value, str) and _ERROR_CODE.match(value) else "unknown error"


@dataclass(frozen=True)
class Provider:
    name: str
    kind: str  # OIDC or GITHUB
    client_id: str
    client_secret: str | None
    scopes: tuple[str, ...]
    redirect_uri: str | None  # the app's page that receives the tokens (None: JSON answers)
    timeout: float
    audiences: tuple[str, ...] = ()  # client ids an ID token may be issued to (client_id first)
    issuer: str | None = None  # may hold "{tenantid}" (Microsoft)
    discovery: bool = False  # endpoints come from the issuer's discovery document
    authorize_url: str | None = None
    token_url: str | None = None
    userinfo_url: str | None = None
    jwks_url: str | None = None
    api_url: str | None = None  # GitHub's REST API


@dataclass(frozen=True)
class Profile:
    """Who the provider says signed in."""

    subject: str
    email: str | None
    email_verified: bool


# --- the registry ------------------------------------------------------------------------------------


def configured(settings: dict[str, Any], name: str) -> Provider:
    """The enabled provider ``name`` of the ``oauth`` config (404 when there is none)."""
    preset = settings.get(name) if name in PRESETS else None
    if preset is not None:
        if preset["enabled"]:
            return _preset(name, preset, settings["timeoutSeconds"])
    else:
        for entry in settings["oidc"]:
            if entry["name"] == name and entry["enabled"]:
                return Provider(
                    name=name,
                    kind=OIDC,
                    client_id=entry["clientId"],
                    client_secret=entry["clientSecret"],
                    scopes=tuple(entry["scopes"] or DEFAULT_SCOPES[OIDC]),
                    redirect_uri=entry["redirectUri"],
                    timeout=settings["timeoutSeconds"],
                    audiences=(entry["clientId"], *entry["audiences"]),
                    issuer=entry["issuer"].rstrip("/"),
                    discovery=True,
                )
    raise not_found(f"No sign-in provider named {name!r} is enabled")


def _preset(name: str, entry: dict[str, Any], timeout: float) -> Provider:
    kind = GITHUB if name == "github" else OIDC
    defaults = {"google": _GOOGLE, "microsoft": _MICROSOFT, "github": _GITHUB}[name]

    def endpoint(key: str) -> str | None:
        value = entry.get(key) or defaults.get(key)
        return value.replace("{tenant}", entry["tenant"]) if value and name == "microsoft" else value

    return Provider(
        name=name,
        kind=kind,
        client_id=entry["clientId"],
        client_secret=entry["clientSecret"],
        scopes=tuple(entry["scopes"] or DEFAULT_SCOPES[kind]),
        redirect_uri=entry["redirectUri"],
        timeout=timeout,
        audiences=(entry["clientId"], *entry.get("audiences", ())),
        issuer=endpoint("issuer"),
        authorize_url=endpoint("authorizeUrl"),
        token_url=endpoint("tokenUrl"),
        userinfo_url=endpoint("userinfoUrl"),
        jwks_url=endpoint("jwksUrl"),
        api_url=(endpoint("apiUrl") or "").rstrip("/") or None,
    )


class _Cache:
    """Documents fetched from providers, per URL, for ``CACHE_SECONDS`` (this process only)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, Any]] = {}
        self._forced: dict[str, float] = {}

    def get(self, url: str) -> Any | None:
        with self._lock:
            entry = self._entries.get(url)
        return entry[1] if entry and time.monotonic() - entry[0] < CACHE_SECONDS else None

    def put(self, url: str, value: Any) -> None:
        with self._lock:
            self._entries[url] = (time.monotonic(), value)

    def may_refetch(self, url: str) -> bool:
        """True at most once per ``REFETCH_INTERVAL`` for ``url`` (a refetch outside the usual expiry)."""
        now = time.monotonic()
        with self._lock:
            if now - self._forced.get(url, -REFETCH_INTERVAL) < REFETCH_INTERVAL:
                return False
            self._forced[url] = now
            return True

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._forced.clear()


_documents = _Cache()


def clear_caches() -> None:
    """Forget discovery documents and JWKS (tests that restart a fake provider on a new key)."""
    _documents.clear()


def resolve(provider: Provider) -> Provider:
    """The provider with its endpoints filled in from the issuer's discovery document when it has one."""
    if not provider.discovery:
        return provider
    assert provider.issuer is not None
    url = f"{provider.issuer}/.well-known/openid-configuration"
    document = _documents.get(url)
    if document is None:
        document = _json(provider, _call(provider, "discovery document", "GET", url), "discovery document")
        if document.get("issuer", "").rstrip("/") != provider.issuer:
            raise ProviderError(f"{provider.name}: the discovery document names another issuer")
        for key in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
            if not isinstance(document.get(key), str):
                raise ProviderError(f"{provider.name}: the discovery document has no {key}")
        _documents.put(url, document)
    userinfo = document.get("userinfo_endpoint")
    return replace(
        provider,
        authorize_url=document["authorization_endpoint"],
        token_url=document["token_endpoint"],
        jwks_url=document["jwks_uri"],
        userinfo_url=userinfo if isinstance(userinfo, str) else None,
    )


# --- HTTP --------------------------------------------------------------------------------------------


def _call(
    provider: Provider, what: str, method: str, url: str, refused: str | None = None, **kwargs: Any
) -> requests.Response:
    """One request to the provider; transport errors and 4xx/5xx answers become a ProviderError
    (``refused``: the message for a 404 or 422, when those mean "not valid" rather than a failure)."""
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json", **kwargs.pop("headers", {})}
    try:
        response = requests.request(
            method, url, headers=headers, timeout=provider.timeout, allow_redirects=False, **kwargs
        )
    except requests.Timeout:
        raise ProviderError(f"{provider.name}: the {what} did not answer within {provider.timeout:g} s") from None
    except requests.RequestException as exc:
        raise ProviderError(f"{provider.name}: cannot reach the {what} ({exc.__class__.__name__})") from None
    if refused and response.status_code in (404, 422):
        raise ProviderError(f"{provider.name}: {refused}")
    if response.status_code >= 300:
        raise ProviderError(f"{provider.name}: the {what} answered HTTP {response.status_code}")
    return response


def _json(provider: Provider, response: requests.Response, what: str) -> Any:
    try:
        data = response.json()
    except ValueError:
        raise ProviderError(f"{provider.name}: the {what} is not JSON") from None
    if not isinstance(data, (dict, list)):
        raise ProviderError(f"{provider.name}: the {what} is not a JSON object")
    return data


def _session(provider: Provider, callback: str) -> OAuth2Session:
    session = OAuth2Session(
        provider.client_id,
        provider.client_secret,
        # Without a secret the app is a public client: PKCE alone protects the code.
        token_endpoint_auth_method="client_secret_post" if provider.client_secret else "none",
        scope=" ".join(provider.scopes),
        redirect_uri=callback,
        code_challenge_method="S256",
    )
    session.headers["User-Agent"] = USER_AGENT
    return session


# --- the web flow ------------------------------------------------------------------------------------


def new_secrets() -> dict[str, str]:
    """A nonce and a PKCE code verifier (RFC 7636: 43 to 128 characters) for one sign-in."""
    return {"nonce": generate_token(32), "verifier": generate_token(64)}


def authorization_url(provider: Provider, callback: str, state: str, nonce: str, verifier: str) -> str:
    """Where to send the browser: the provider's sign-in page, back to ``callback`` with a code."""
    assert provider.authorize_url is not None
    extra = {"nonce": nonce} if provider.kind == OIDC else {"allow_signup": "true"}
    with _session(provider, callback) as session:
        url, _state = session.create_authorization_url(
            provider.authorize_url, state=state, code_verifier=verifier, **extra
        )
    return url


def profile_from_code(provider: Provider, code: str, callback: str, nonce: str, verifier: str) -> Profile:
    """Exchange the code (with the PKCE verifier) and read who signed in."""
    token = _exchange(provider, code, callback, verifier)
    access_token = token.get("access_token")
    if provider.kind == GITHUB:
        if not isinstance(access_token, str) or not access_token:
            raise ProviderError(f"{provider.name}: the token answer has no access_token")
        return _github_profile(provider, access_token)
    id_token = token.get("id_token")
    if not isinstance(id_token, str):
        raise ProviderError(f"{provider.name}: the token answer has no id_token (is the openid scope set?)")
    claims = verify_id_token(provider, id_token, nonce=nonce, access_token=access_token)
    if not claims.get("email") and provider.userinfo_url and isinstance(access_token, str):
        claims = {**_userinfo(provider, access_token, claims["sub"]), **claims}
    return _oidc_profile(claims)


def _exchange(provider: Provider, code: str, callback: str, verifier: str) -> dict[str, Any]:
    session = _session(provider, callback)
    try:
        token = session.fetch_token(
            provider.token_url,
            grant_type="authorization_code",
            code=code,
            code_verifier=verifier,
            timeout=provider.timeout,
            allow_redirects=False,
        )
    except requests.Timeout:
        raise ProviderError(
            f"{provider.name}: the token endpoint did not answer within {provider.timeout:g} s"
        ) from None
    except requests.HTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "an error"
        raise ProviderError(f"{provider.name}: the token endpoint answered HTTP {status}") from None
    except requests.RequestException as exc:
        raise ProviderError(f"{provider.name}: cannot reach the token endpoint ({exc.__class__.__name__})") from None
    except AuthlibBaseError as exc:  # the provider's own {"error": …}: a bad, used or expired code
        raise ProviderError(f"{provider.name}: the code exchange was refused ({error_code(exc.error)})") from None
    except ValueError:
        raise ProviderError(f"{provider.name}: the token endpoint's answer is not a JSON object") from None
    finally:
        session.close()
    return dict(token)


def _userinfo(provider: Provider, access_token: str, subject: str) -> dict[str, Any]:
    assert provider.userinfo_url is not None
    response = _call(
        provider, "userinfo endpoint", "GET", provider.userinfo_url, headers={"Authorization": f"Bearer {access_token}"}
    )
    info = _json(provider, response, "userinfo answer")
    # OpenID Connect Core 5.3.2: a userinfo answer about somebody else must not be used.
    if not isinstance(info, dict) or info.get("sub") != subject:
        raise ProviderError(f"{provider.name}: the userinfo answer is about another subject")
    return {key: info[key] for key in ("email", "email_verified") if key in info}


# --- ID tokens ---------------------------------------------------------------------------------------


def _key_set(provider: Provider, refresh: bool = False) -> KeySet:
    assert provider.jwks_url is not None
    url = provider.jwks_url
    keys = None if refresh else _documents.get(url)
    if keys is None:
        document = _json(provider, _call(provider, "JWKS", "GET", url), "JWKS")
        try:
            keys = KeySet.import_key_set(document)
        except (JoseError, ValueError, TypeError, KeyError):
            raise ProviderError(f"{provider.name}: the JWKS holds no usable key") from None
        _documents.put(url, keys)
    return keys


def verify_id_token(
    provider: Provider, id_token: str, nonce: str | None = None, access_token: str | None = None
) -> dict[str, Any]:
    """The claims of an ID token whose signature (provider's JWKS), issuer, audience, expiry and nonce
    are right; a ProviderError naming the first check that failed otherwise."""
    keys = _key_set(provider)
    try:
        try:
            token = jwt.decode(id_token, keys, algorithms=ALGORITHMS)
        except InvalidKeyIdError:
            # Signed with a key we have not seen: the provider may have rotated its keys.
            assert provider.jwks_url is not None
            if not _documents.may_refetch(provider.jwks_url):
                raise
            token = jwt.decode(id_token, _key_set(provider, refresh=True), algorithms=ALGORITHMS)
    except InvalidKeyIdError:
        raise ProviderError(f"{provider.name}: the ID token is signed with an unknown key") from None
    except (JoseError, ValueError, TypeError, KeyError):
        raise ProviderError(f"{provider.name}: the ID token's signature does not verify") from None
    claims = dict(token.claims)
    issuer = provider.issuer or ""
    if "{tenantid}" in issuer:
        issuer = issuer.replace("{tenantid}", str(claims.get("tid", "")))
    options = {
        "iss": {"essential": True, "values": [issuer]},
        "aud": {"essential": True, "values": list(provider.audiences)},
        "sub": {"essential": True},
    }
    # ``azp`` is checked here rather than by Authlib: Google's ID tokens for an Android app carry the web
    # client id as ``aud`` and the Android one as ``azp``, which Authlib's rule (azp == client_id) refuses.
    params: dict[str, Any] = {"nonce": nonce, "access_token": access_token}
    try:
        CodeIDToken(claims, token.header, options, params).validate(leeway=LEEWAY_SECONDS)
        if (
            isinstance(claims.get("aud"), list)
            and len(claims["aud"]) > 1
            and claims.get("azp") not in provider.audiences
        ):
            raise InvalidClaimError("azp")
    except ExpiredTokenError:
        raise ProviderError(f"{provider.name}: the ID token has expired") from None
    except (InvalidClaimError, MissingClaimError) as exc:
        raise ProviderError(f"{provider.name}: the ID token's {exc.claim} claim is wrong or missing") from None
    except (JoseError, ValueError, TypeError):
        raise ProviderError(f"{provider.name}: the ID token's claims do not verify") from None
    return claims


def _oidc_profile(claims: dict[str, Any]) -> Profile:
    email = claims.get("email")
    email = email.strip().lower() if isinstance(email, str) and "@" in email and len(email) <= 254 else None
    # Some providers send "true" as text. Without the claim (Microsoft) the address is not proven.
    verified = claims.get("email_verified") in (True, "true")
    return Profile(subject=str(claims["sub"]), email=email, email_verified=bool(email and verified))


def profile_from_id_token(provider: Provider, id_token: str, nonce: str | None) -> Profile:
    """The native flow: an ID token the app got from the provider's SDK."""
    return _oidc_profile(verify_id_token(provider, id_token, nonce=nonce))


# --- GitHub ------------------------------------------------------------------------------------------


def _github(provider: Provider, path: str, access_token: str) -> Any:
    response = _call(
        provider,
        f"API ({path})",
        "GET",
        f"{provider.api_url}{path}",
        headers={
            "Authorization": f"Bearer {access_token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
        },
    )
    return _json(provider, response, f"API answer ({path})")


def _github_profile(provider: Provider, access_token: str) -> Profile:
    user = _github(provider, "/user", access_token)
    subject = user.get("id") if isinstance(user, dict) else None
    if not isinstance(subject, int) or isinstance(subject, bool):
        raise ProviderError(f"{provider.name}: the user answer has no numeric id")
    emails = _github(provider, "/user/emails", access_token)
    if not isinstance(emails, list):
        raise ProviderError(f"{provider.name}: the emails answer is not a list")
    entries = [e for e in emails if isinstance(e, dict) and isinstance(e.get("email"), str)]
    chosen = next((e for e in entries if e.get("primary") and e.get("verified") is True), None)
    chosen = chosen or next((e for e in entries if e.get("verified") is True), None)
    chosen = chosen or next((e for e in entries if e.get("primary")), None)
    email = chosen["email"].strip().lower() if chosen and len(chosen["email"]) <= 254 else None
    return Profile(
        subject=str(subject), email=email, email_verified=bool(email and chosen and chosen.get("verified") is True)
    )


def profile_from_github_token(provider: Provider, access_token: str) -> Profile:
    """The native flow for GitHub: an access token the app got. GitHub checks that it was issued to our
    OAuth app (a token of another app must not sign anybody in here), then we read the user."""
    if not provider.client_secret:
        raise ProviderError(f"{provider.name}: set clientSecret to accept access tokens")
    _call(
        provider,
        "token check",
        "POST",
        f"{provider.api_url}/applications/{provider.client_id}/token",
        refused="the access token is not valid for this app",
        json={"access_token": access_token},
        auth=(provider.client_id, provider.client_secret),
        headers={"Accept": "application/vnd.github+json"},
    )
    return _github_profile(provider, access_token)
