"""POST /login and the masterkey / Bearer rules on administrative routes."""

from datetime import timedelta

import pytest
from flask_jwt_extended import create_access_token

from trellis.admins import create_admin, reset_password
from trellis.testing.plugin import TEST_ADMIN


def login(client, username=TEST_ADMIN[0], password=TEST_ADMIN[1], headers=None):
    return client.post("/login", json={"username": username, "password": password}, headers=headers)


def test_login_returns_a_token(client, admin_headers):
    response = login(client, headers=admin_headers)
    assert response.status_code == 200
    assert set(response.get_json()) == {"token"}


def test_login_needs_the_master_key(client):
    response = login(client)
    assert response.status_code == 401
    assert response.get_json()["name"] == "UNAUTHORIZED"
    assert login(client, headers={"masterkey": "wrong"}).status_code == 401


@pytest.mark.parametrize("username,password", [(TEST_ADMIN[0], "wrong-password"), ("nobody", "whatever1")])
def test_login_rejects_bad_credentials_alike(client, admin_headers, username, password):
    response = login(client, username, password, headers=admin_headers)
    assert response.status_code == 401
    assert response.get_json()["message"] == "Wrong username or password"


def test_login_validates_the_body(client, admin_headers):
    response = client.post("/login", json={"username": "admin"}, headers=admin_headers)
    assert response.status_code == 400
    assert response.get_json()["errors"] == {"password": ["Missing data for required field."]}
    response = client.post(
        "/login", json={**dict(zip(("username", "password"), TEST_ADMIN)), "extra": 1}, headers=admin_headers
    )
    assert response.status_code == 400
    assert "extra" in response.get_json()["errors"]


def test_admin_route_without_credentials_is_401(client):
    response = client.get("/config/greeter")
    assert response.status_code == 401
    assert response.get_json()["name"] == "UNAUTHORIZED"


def test_masterkey_alone_is_enough(greeter_client, admin_headers):
    assert greeter_client.get("/config/greeter", headers=admin_headers).status_code == 200


def test_admin_bearer_alone_is_enough(greeter_client, admin_token):
    response = greeter_client.get("/config/greeter", headers={"Authorization": f"Bearer {admin_token}"})
    assert response.status_code == 200


def test_both_credentials_together(greeter_client, admin_headers, admin_token):
    headers = {**admin_headers, "Authorization": f"Bearer {admin_token}"}
    assert greeter_client.get("/config/greeter", headers=headers).status_code == 200


@pytest.mark.parametrize(
    "headers",
    [
        {"masterkey": "not-the-key"},
        {"Authorization": "Bearer not-a-jwt"},
        {"Authorization": "Basic YWRtaW46YWRtaW4="},
        {"Authorization": "Bearer "},
    ],
)
def test_invalid_credentials_are_401(greeter_client, headers):
    response = greeter_client.get("/config/greeter", headers=headers)
    assert response.status_code == 401


def test_any_credential_sent_must_be_valid(greeter_client, admin_headers):
    headers = {**admin_headers, "Authorization": "Bearer garbage"}
    assert greeter_client.get("/config/greeter", headers=headers).status_code == 401
    assert (
        greeter_client.get("/config/greeter", headers={"masterkey": "bad", "Authorization": "Bearer x"}).status_code
        == 401
    )


def test_token_signed_with_another_key_is_401(greeter_client, app):
    import jwt

    forged = jwt.encode(
        {"sub": "x", "kind": "admin", "ver": 1, "type": "access"},
        "another-key-of-the-proper-length-32bytes",
        algorithm="HS256",
    )
    assert greeter_client.get("/config/greeter", headers={"Authorization": f"Bearer {forged}"}).status_code == 401


def test_expired_admin_token_is_401(greeter_client, greeter_app, client, admin_headers):
    from trellis import db
    from trellis.models import Admin

    with greeter_app.app_context():
        admin = db.session.query(Admin).filter_by(username=TEST_ADMIN[0]).one()
        token = create_access_token(
            identity=admin.id,
            additional_claims={"kind": "admin", "ver": admin.token_version},
            expires_delta=timedelta(seconds=-5),
        )
    response = greeter_client.get("/config/greeter", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401
    assert response.get_json()["message"] == "Token expired"


def test_user_token_on_admin_route_is_403(greeter_client, greeter_app, make_user_token):
    token = make_user_token(greeter_app)
    response = greeter_client.get("/config/greeter", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 403
    assert response.get_json()["name"] == "FORBIDDEN"


def test_user_token_without_an_authentication_module_is_401(client, app, make_user_token):
    token = make_user_token(app)
    # The session app may include real modules; build one with no user-token verifier at all.
    from trellis import create_app

    bare = create_app(app.config.copy() | {"MODULES": None}, modules=[])
    response = bare.test_client().get("/config/anything", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401


def test_user_routes_take_user_tokens_not_admin_credentials(
    greeter_client, greeter_app, admin_headers, make_user_token
):
    token = make_user_token(greeter_app, "user-7")
    assert greeter_client.get("/greeter/me", headers={"Authorization": f"Bearer {token}"}).get_json() == {
        "user": "user-7"
    }
    assert greeter_client.get("/greeter/me").status_code == 401
    assert greeter_client.get("/greeter/me", headers=admin_headers).status_code == 403
    blocked = make_user_token(greeter_app, "blocked")
    assert greeter_client.get("/greeter/me", headers={"Authorization": f"Bearer {blocked}"}).status_code == 403


def test_password_reset_revokes_old_admin_tokens(client, admin_headers, app):
    create_admin("second", "second-password")
    token = login(client, "second", "second-password", headers=admin_headers).get_json()["token"]
    assert client.get("/config/nothing", headers={"Authorization": f"Bearer {token}"}).status_code == 404
    reset_password("second", "new-password-2")
    assert client.get("/config/nothing", headers={"Authorization": f"Bearer {token}"}).status_code == 401
    assert login(client, "second", "second-password", headers=admin_headers).status_code == 401
    assert login(client, "second", "new-password-2", headers=admin_headers).status_code == 200


def test_admin_passwords_are_stored_as_argon2(db):
    from trellis.models import Admin

    admin = create_admin("hashcheck", "a-long-password")
    stored = db.get(Admin, admin.id).password_hash
    assert stored.startswith("$argon2id$") and "a-long-password" not in stored
