"""Local stand-ins for sign-in providers, served on 127.0.0.1 (``trellis.testing.fake_servers``).

``FakeOidc``: an OpenID Connect provider (discovery, JWKS with RSA keys generated here, authorize, token,
userinfo) that checks what a real one checks: client id and secret, redirect URI, PKCE S256, single-use
codes. ``FakeGithub``: GitHub's shape (authorize, token endpoint, ``/user``, ``/user/emails`` and the
token check ``POST /applications/{client_id}/token``) under ``/api``.

Knobs for the failure tests: ``claims`` (overrides for the next ID tokens, e.g. a wrong ``aud``),
``sign_with_stranger`` (a key the JWKS does not publish, under the published key id), ``status``,
``garbage`` and ``delay`` per path. ``requests`` records every call.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from werkzeug.wrappers import Request, Response

from trellis.testing.fake_servers import Served

CLIENT_ID = "trellis-test-client"
CLIENT_SECRET = "fake-provider-client-secret"


def _s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def _json(data: Any, status: int = 200) -> Response:
    import json

    return Response(json.dumps(data), status=status, content_type="application/json")


@dataclass
class Account:
    """The person who signs in at the fake provider next."""

    subject: str
    email: str | None
    email_verified: bool = True


@dataclass
class _Common:
    client_id: str = CLIENT_ID
    client_secret: str = CLIENT_SECRET
    status: dict[str, int] = field(default_factory=dict)  # path → forced HTTP status
    garbage: set[str] = field(default_factory=set)  # paths that answer with something that is not JSON
    delay: dict[str, float] = field(default_factory=dict)  # path → seconds to wait before answering
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    account: Account | None = None

    def _fault(self, request: Request) -> Response | None:
        path = request.path
        self.requests.append((path, {**request.args.to_dict(), **request.form.to_dict()}))
        if path in self.delay:
            time.sleep(self.delay[path])
        if path in self.status:
            return _json({"error": "server_error"}, self.status[path])
        if path in self.garbage:
            return Response("<html>Bad gateway</html>", content_type="text/html")
        return None

    def calls(self, path: str) -> list[dict[str, str]]:
        return [params for called, params in self.requests if called == path]


class FakeOidc(_Common):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.key = RSAKey.generate_key(2048, parameters={"kid": "key-1", "use": "sig", "alg": "RS256"})
        self.claims: dict[str, Any] = {}
        self.sign_with_stranger = False
        self._codes: dict[str, dict[str, Any]] = {}
        self._access: dict[str, Account] = {}
        self._served = Served(self)
        self.url = self._served.url
        self.issuer = self.url

    def stop(self) -> None:
        self._served.stop()

    def rotate_key(self) -> None:
        """A new signing key with a new key id; the JWKS publishes only the new one from now on."""
        number = int(self.key.kid.rsplit("-", 1)[1]) + 1
        self.key = RSAKey.generate_key(2048, parameters={"kid": f"key-{number}", "use": "sig", "alg": "RS256"})

    def id_token(self, account: Account, nonce: str | None = None, **overrides: Any) -> str:
        """An ID token as this provider signs them (what a native app would get from the provider's SDK)."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": account.subject,
            "aud": self.client_id,
            "iat": now,
            "exp": now + 600,
            "azp": self.client_id,
        }
        if account.email is not None:
            claims.update(email=account.email, email_verified=account.email_verified)
        if nonce is not None:
            claims["nonce"] = nonce
        claims.update(self.claims)
        claims.update(overrides)
        claims = {k: v for k, v in claims.items() if v is not None}
        key = self.key
        if self.sign_with_stranger:
            key = RSAKey.generate_key(2048, parameters={"kid": self.key.kid, "use": "sig", "alg": "RS256"})
        return jwt.encode({"alg": "RS256", "kid": key.kid}, claims, key)

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        response = self._fault(request) or self._route(request)
        return response(environ, start_response)

    def _route(self, request: Request) -> Response:
        path = request.path
        if path == "/.well-known/openid-configuration":
            return _json(
                {
                    "issuer": self.issuer,
                    "authorization_endpoint": f"{self.url}/authorize",
                    "token_endpoint": f"{self.url}/token",
                    "userinfo_endpoint": f"{self.url}/userinfo",
                    "jwks_uri": f"{self.url}/jwks",
                    "response_types_supported": ["code"],
                    "subject_types_supported": ["public"],
                    "id_token_signing_alg_values_supported": ["RS256"],
                    "code_challenge_methods_supported": ["S256"],
                }
            )
        if path == "/jwks":
            return _json(KeySet([self.key]).as_dict(private=False))
        if path == "/authorize":
            return self._authorize(request)
        if path == "/token" and request.method == "POST":
            return self._token(request)
        if path == "/userinfo":
            account = self._access.get(request.headers.get("Authorization", "").removeprefix("Bearer "))
            if account is None:
                return _json({"error": "invalid_token"}, 401)
            return _json({"sub": account.subject, "email": account.email, "email_verified": account.email_verified})
        return _json({"error": "not_found"}, 404)

    def _authorize(self, request: Request) -> Response:
        args = request.args
        if args.get("client_id") != self.client_id or args.get("response_type") != "code":
            return _json({"error": "unauthorized_client"}, 400)
        if args.get("code_challenge_method") != "S256" or not args.get("code_challenge"):
            return _json({"error": "invalid_request", "error_description": "PKCE S256 required"}, 400)
        if self.account is None:
            refused = urlencode({"error": "access_denied", "state": args["state"]})
            return Response("", status=302, headers={"Location": f"{args['redirect_uri']}?{refused}"})
        code = secrets.token_urlsafe(16)
        self._codes[code] = {
            "account": self.account,
            "nonce": args.get("nonce"),
            "challenge": args["code_challenge"],
            "redirect_uri": args["redirect_uri"],
        }
        location = f"{args['redirect_uri']}?{urlencode({'code': code, 'state': args['state'], 'scope': args.get('scope', '')})}"
        return Response("", status=302, headers={"Location": location})

    def _token(self, request: Request) -> Response:
        form = request.form
        if (form.get("client_id"), form.get("client_secret")) != (self.client_id, self.client_secret):
            return _json({"error": "invalid_client"}, 401)
        grant = self._codes.pop(form.get("code", ""), None)  # a code works once
        if grant is None or form.get("grant_type") != "authorization_code":
            return _json({"error": "invalid_grant"}, 400)
        if form.get("redirect_uri") != grant["redirect_uri"]:
            return _json({"error": "invalid_grant", "error_description": "redirect_uri mismatch"}, 400)
        if _s256(form.get("code_verifier", "")) != grant["challenge"]:
            return _json({"error": "invalid_grant", "error_description": "PKCE verifier mismatch"}, 400)
        access_token = secrets.token_urlsafe(16)
        self._access[access_token] = grant["account"]
        return _json(
            {
                "access_token": access_token,
                "token_type": "Bearer",
                "expires_in": 3600,
                "id_token": self.id_token(grant["account"], grant["nonce"]),
            }
        )


class FakeGithub(_Common):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.emails: list[dict[str, Any]] | None = None  # None: the account's email, primary and verified
        self._codes: dict[str, dict[str, Any]] = {}
        self._tokens: dict[str, tuple[str, Account]] = {}  # access token → (client id, account)
        self._served = Served(self)
        self.url = self._served.url
        self.api_url = f"{self.url}/api"

    def stop(self) -> None:
        self._served.stop()

    def token_for(self, account: Account, client_id: str | None = None) -> str:
        """An access token as GitHub hands them to an app (``client_id``: another app's)."""
        token = "gho_" + secrets.token_urlsafe(20)
        self._tokens[token] = (client_id or self.client_id, account)
        return token

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        response = self._fault(request) or self._route(request)
        return response(environ, start_response)

    def _account(self, request: Request) -> Account | None:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        found = self._tokens.get(token)
        return found[1] if found else None

    def _route(self, request: Request) -> Response:
        path = request.path
        if path == "/login/oauth/authorize":
            args = request.args
            if args.get("client_id") != self.client_id or self.account is None:
                return _json({"error": "unauthorized_client"}, 400)
            code = secrets.token_urlsafe(10)
            self._codes[code] = {
                "account": self.account,
                "redirect_uri": args.get("redirect_uri"),
                "challenge": args.get("code_challenge"),
            }
            return Response(
                "",
                status=302,
                headers={"Location": f"{args['redirect_uri']}?{urlencode({'code': code, 'state': args['state']})}"},
            )
        if path == "/login/oauth/access_token" and request.method == "POST":
            form = request.form
            grant = self._codes.pop(form.get("code", ""), None)
            # GitHub answers 200 with an error field for a bad code.
            if (form.get("client_id"), form.get("client_secret")) != (self.client_id, self.client_secret):
                return _json({"error": "incorrect_client_credentials"})
            if grant is None:
                return _json({"error": "bad_verification_code"})
            if grant["challenge"] and _s256(form.get("code_verifier", "")) != grant["challenge"]:
                return _json({"error": "bad_verification_code", "error_description": "PKCE"})
            if "application/json" not in request.headers.get("Accept", ""):
                return Response(
                    "access_token=unexpected&token_type=bearer", content_type="application/x-www-form-urlencoded"
                )
            return _json(
                {
                    "access_token": self.token_for(grant["account"]),
                    "token_type": "bearer",
                    "scope": "read:user,user:email",
                }
            )
        if path == "/api/user":
            account = self._account(request)
            if account is None:
                return _json({"message": "Bad credentials"}, 401)
            return _json({"id": int(account.subject), "login": f"user{account.subject}", "email": None})
        if path == "/api/user/emails":
            account = self._account(request)
            if account is None:
                return _json({"message": "Bad credentials"}, 401)
            if self.emails is not None:
                return _json(self.emails)
            return _json(
                [{"email": account.email, "primary": True, "verified": account.email_verified, "visibility": "private"}]
                if account.email
                else []
            )
        if path == f"/api/applications/{self.client_id}/token" and request.method == "POST":
            if request.authorization is None or (request.authorization.username, request.authorization.password) != (
                self.client_id,
                self.client_secret,
            ):
                return _json({"message": "Requires authentication"}, 401)
            found = self._tokens.get((request.get_json(silent=True) or {}).get("access_token", ""))
            if found is None or found[0] != self.client_id:
                return _json({"message": "Not Found"}, 404)
            return _json({"id": 1, "app": {"client_id": self.client_id}})
        return _json({"message": "Not Found"}, 404)
