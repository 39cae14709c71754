"""The module configuration and what must never leak (passwords, tokens)."""

from __future__ import annotations

import logging

import pytest


def test_defaults(client, admin_headers):
    response = client.get("/config/authentication", headers=admin_headers)
    assert response.status_code == 200
    assert response.get_json() == {
        "active": True,
        "accessTokenMinutes": 60,
        "refreshTokenDays": 7,
        "registrationOpen": True,
        "passwordRules": {
            "minLength": 8,
            "maxLength": 256,
            "requireLetter": False,
            "requireDigit": False,
            "requireUppercase": False,
            "requireSymbol": False,
        },
        "rateLimits": {
            "loginPerIp": "200/minute",
            "loginPerEmail": "20/minute",
            "registerPerIp": "100/minute",
            "sendPerIp": "60/minute",
            "sendPerAddress": "5/15 minutes",
        },
        "hostUrl": None,
        "local": {
            "verification": {"required": False, "sendEmail": True, "redirectUri": None},
            "forgotPasswordRedirectUri": None,
            "signInOnRegister": True,
        },
        "magicLink": {"enabled": False, "redirectUri": None},
        "twoFa": {"enabled": False},
        "phone": {"enabled": False},
        "teams": {"enabled": False, "invites": {"enabled": True}, "allowAddWithoutInvite": False},
        "oauth": {
            "google": {
                "enabled": False,
                "clientId": None,
                "clientSecret": None,
                "redirectUri": None,
                "scopes": None,
                "audiences": [],
                "issuer": None,
                "authorizeUrl": None,
                "tokenUrl": None,
                "userinfoUrl": None,
                "jwksUrl": None,
            },
            "microsoft": {
                "enabled": False,
                "clientId": None,
                "clientSecret": None,
                "redirectUri": None,
                "scopes": None,
                "audiences": [],
                "tenant": "common",
                "issuer": None,
                "authorizeUrl": None,
                "tokenUrl": None,
                "userinfoUrl": None,
                "jwksUrl": None,
            },
            "github": {
                "enabled": False,
                "clientId": None,
                "clientSecret": None,
                "redirectUri": None,
                "scopes": None,
                "authorizeUrl": None,
                "tokenUrl": None,
                "apiUrl": None,
            },
            "oidc": [],
            "timeoutSeconds": 5.0,
        },
    }


def test_lifecycle_settings_are_stored(client, admin_headers):
    changes = {
        "hostUrl": "https://app.example.com",
        "local": {"verification": {"required": True, "redirectUri": "https://app.example.com/verified"}},
        "magicLink": {"enabled": True},
        "rateLimits": {"sendPerAddress": "3 per hour"},
    }
    response = client.put("/config/authentication", json=changes, headers=admin_headers)
    assert response.status_code == 200, response.get_json()
    stored = client.get("/config/authentication", headers=admin_headers).get_json()
    assert stored["hostUrl"] == "https://app.example.com"
    assert stored["local"]["verification"] == {
        "required": True,
        "sendEmail": True,
        "redirectUri": "https://app.example.com/verified",
    }
    assert stored["magicLink"] == {"enabled": True, "redirectUri": None}
    assert stored["rateLimits"]["sendPerAddress"] == "3 per hour"
    assert stored["rateLimits"]["sendPerIp"] == "60/minute"


@pytest.mark.parametrize(
    "change,field",
    [
        ({"accessTokenMinutes": 0}, "accessTokenMinutes"),
        ({"refreshTokenDays": "week"}, "refreshTokenDays"),
        ({"rateLimits": {"loginPerIp": "lots"}}, "rateLimits"),
        ({"rateLimits": {"loginPerIp": "1/minute;5/hour"}}, "rateLimits"),
        ({"passwordRules": {"minLength": 30, "maxLength": 20}}, "passwordRules"),
        ({"passwordRules": {"minimum": 3}}, "passwordRules"),
        ({"tokenLifetime": 3}, "tokenLifetime"),
        ({"hostUrl": "not a url"}, "hostUrl"),
        ({"hostUrl": "ftp://example.com"}, "hostUrl"),
        ({"local": {"verification": {"required": "sometimes"}}}, "local"),
        ({"local": {"verification": {"redirectUri": "javascript:alert(1)"}}}, "local"),
        ({"local": {"forgotPasswordRedirectUri": 5}}, "local"),
        ({"local": {"unknown": True}}, "local"),
        ({"magicLink": {"enabled": "yes please"}}, "magicLink"),
        ({"twoFa": {"enabled": None}}, "twoFa"),
        ({"phone": {"sms": True}}, "phone"),
        ({"rateLimits": {"sendPerIp": "often"}}, "rateLimits"),
        ({"rateLimits": {"sendPerAddress": "5/15 minutes;1/second"}}, "rateLimits"),
    ],
)
def test_invalid_config_is_400(client, admin_headers, change, field):
    response = client.put("/config/authentication", json=change, headers=admin_headers)
    assert response.status_code == 400
    assert field in response.get_json()["errors"]


def test_partial_put_keeps_the_rest(api):
    config = api.configure(passwordRules={"minLength": 12})
    assert config["passwordRules"]["minLength"] == 12 and config["passwordRules"]["maxLength"] == 256
    assert config["rateLimits"]["loginPerEmail"] == "20/minute"


def test_inactive_module_hides_public_routes(api, client, user, admin_headers):
    api.configure(active=False)
    assert api.login(user.email, user.password).status_code == 404
    assert api.register(api.fresh_email()).status_code == 404
    assert client.get("/authentication/users", headers=admin_headers).status_code == 200


def test_secrets_never_reach_the_logs(api, client, admin_headers, caplog):
    caplog.set_level(logging.DEBUG)
    email, password = api.fresh_email(), "very-secret-password-1"
    assert api.register(email, password).status_code == 201
    tokens = api.login(email, password).get_json()
    api.login(email, "another-secret-guess")
    renewed = api.renew(tokens["refreshToken"]).get_json()
    api.renew(tokens["refreshToken"])  # reuse: logged as a warning
    client.post("/authentication/logout", headers=api.bearer(renewed["accessToken"]))
    secrets = [
        password,
        "another-secret-guess",
        tokens["accessToken"],
        tokens["refreshToken"],
        renewed["accessToken"],
        renewed["refreshToken"],
    ]
    assert "reuse" in caplog.text  # something was logged
    for secret in secrets:
        assert secret not in caplog.text


def test_tokens_are_only_in_the_issuing_response(api, client, admin_headers, user):
    me = api.me(user.access_token).get_data(as_text=True)
    listed = client.get("/authentication/users", headers=admin_headers).get_data(as_text=True)
    for text in (me, listed):
        assert user.access_token not in text and user.refresh_token not in text
        assert user.password not in text and "argon2" not in text
