"""Administrative user routes: list, create, block, unblock, delete (masterkey or admin Bearer)."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from trellis_authentication.models import RotatedToken, Session, User

ADMIN_ROUTES = [
    ("get", "/authentication/users"),
    ("post", "/authentication/users"),
    ("put", "/authentication/users/{id}/block"),
    ("put", "/authentication/users/{id}/unblock"),
    ("delete", "/authentication/users/{id}"),
]


@pytest.mark.parametrize("method,path", ADMIN_ROUTES)
def test_admin_routes_refuse_user_tokens_and_anonymous_callers(client, user, method, path):
    url = path.format(id=user.id)
    body = {"email": "x@example.com", "password": "long-enough-1"}
    anonymous = getattr(client, method)(url, json=body if method == "post" else None)
    assert anonymous.status_code == 401
    as_user = getattr(client, method)(url, json=body if method == "post" else None, headers=user.headers)
    assert as_user.status_code == 403
    assert as_user.get_json()["name"] == "FORBIDDEN"


def test_admin_bearer_token_is_enough(client, admin_token, user):
    response = client.get("/authentication/users", headers={"Authorization": f"Bearer {admin_token}"})
    assert response.status_code == 200
    assert response.get_json()["count"] == 1


def test_create_user_answers_201(client, admin_headers, api):
    api.configure(registrationOpen=False)  # the admin route does not depend on self-registration
    response = client.post(
        "/authentication/users", json={"email": "Made@Example.com", "password": "long-enough-1"}, headers=admin_headers
    )
    assert response.status_code == 201
    user = response.get_json()
    assert user["email"] == "made@example.com" and user["isActive"] is True and "password" not in user
    assert api.login("made@example.com", "long-enough-1").status_code == 200


def test_create_user_conflicts_and_validation(client, admin_headers, user):
    duplicate = client.post(
        "/authentication/users", json={"email": user.email.upper(), "password": "long-enough-1"}, headers=admin_headers
    )
    assert duplicate.status_code == 409
    short = client.post(
        "/authentication/users", json={"email": "s@example.com", "password": "short"}, headers=admin_headers
    )
    assert short.status_code == 400 and "password" in short.get_json()["errors"]
    unknown = client.post(
        "/authentication/users",
        json={"email": "u@example.com", "password": "long-enough-1", "role": "admin"},
        headers=admin_headers,
    )
    assert unknown.status_code == 400 and "role" in unknown.get_json()["errors"]


def test_list_users_paginates_newest_first(client, admin_headers, make_user):
    made = [make_user() for _ in range(3)]
    response = client.get("/authentication/users?limit=2", headers=admin_headers)
    assert response.status_code == 200
    body = response.get_json()
    assert body["count"] == 3
    assert [u["_id"] for u in body["users"]] == [made[2].id, made[1].id]
    rest = client.get("/authentication/users?skip=2&limit=2", headers=admin_headers).get_json()
    assert rest["count"] == 3 and [u["_id"] for u in rest["users"]] == [made[0].id]


def test_list_users_search_and_active_filter(client, admin_headers, make_user):
    alice = make_user(email="alice_smith@example.com")
    make_user(email="bob@example.com")
    make_user(email="alicexsmith@example.org")
    client.put(f"/authentication/users/{alice.id}/block", headers=admin_headers)

    def emails(query):
        response = client.get(f"/authentication/users?{query}", headers=admin_headers)
        assert response.status_code == 200
        body = response.get_json()
        assert body["count"] == len(body["users"])
        return sorted(u["email"] for u in body["users"])

    assert emails("search=ALICE") == ["alice_smith@example.com", "alicexsmith@example.org"]
    assert emails("search=alice_") == ["alice_smith@example.com"]  # "_" is a character, not a wildcard
    assert emails("search=%25") == []
    assert emails("isActive=false") == ["alice_smith@example.com"]
    assert emails("isActive=true&search=alice") == ["alicexsmith@example.org"]
    bob = next(u for u in client.get("/authentication/users?search=bob", headers=admin_headers).get_json()["users"])
    # By ids (what the console shows instead of ids): unknown ids are left out, filters combine.
    assert emails(f"ids={alice.id},{bob['_id']},no-such-id") == ["alice_smith@example.com", "bob@example.com"]
    assert emails(f"ids={alice.id},{bob['_id']}&isActive=true") == ["bob@example.com"]


@pytest.mark.parametrize(
    "query", ["limit=1001", "limit=0", "skip=-1", "isActive=maybe", "limit=abc", "ids=" + ",".join(["x"] * 101)]
)
def test_list_users_rejects_bad_arguments(client, admin_headers, query):
    response = client.get(f"/authentication/users?{query}", headers=admin_headers)
    assert response.status_code == 400
    assert response.get_json()["name"] == "INVALID_ARGUMENTS"


def test_block_takes_effect_at_once(client, admin_headers, api, user, hook_recorder):
    response = client.put(f"/authentication/users/{user.id}/block", headers=admin_headers)
    assert response.status_code == 200
    assert response.get_json()["isActive"] is False and response.get_json()["_id"] == user.id
    assert hook_recorder.blocked == [user.id]
    existing = api.me(user.access_token)
    assert existing.status_code == 403
    assert existing.get_json()["message"] == "This user is blocked"
    assert api.login(user.email, user.password).status_code == 403
    assert api.login(user.email, "wrong-password").status_code == 401  # blocked is only told to the owner
    assert api.renew(user.refresh_token).status_code == 403


def test_unblock_lets_the_user_sign_in_again(client, admin_headers, api, user, hook_recorder):
    client.put(f"/authentication/users/{user.id}/block", headers=admin_headers)
    response = client.put(f"/authentication/users/{user.id}/unblock", headers=admin_headers)
    assert response.status_code == 200 and response.get_json()["isActive"] is True
    assert hook_recorder.blocked == [user.id]  # unblocking drops nothing
    # The block ended the old session; a new sign-in works.
    assert api.me(user.access_token).status_code == 401
    tokens = api.login(user.email, user.password).get_json()
    assert api.me(tokens["accessToken"]).status_code == 200


def test_block_holds_when_a_listener_fails(client, admin_headers, api, user, hook_recorder, caplog):
    hook_recorder.fail_block = True
    response = client.put(f"/authentication/users/{user.id}/block", headers=admin_headers)
    assert response.status_code == 200 and response.get_json()["isActive"] is False
    assert api.me(user.access_token).status_code == 403
    assert "trellis_user_blocked listener failed" in caplog.text


@pytest.mark.parametrize("action", ["block", "unblock"])
def test_block_unknown_user_is_404(client, admin_headers, action):
    response = client.put(f"/authentication/users/nope/{action}", headers=admin_headers)
    assert response.status_code == 404
    assert response.get_json()["name"] == "NOT_FOUND"


def test_delete_user(client, admin_headers, api, user, hook_recorder, db):
    api.renew(user.refresh_token)  # leaves a rotated token behind
    response = client.delete(f"/authentication/users/{user.id}", headers=admin_headers)
    assert response.status_code == 200
    assert response.get_json() == {"_id": user.id, "deleted": True}
    assert hook_recorder.deleted == [user.id]
    assert api.me(user.access_token).status_code == 401
    assert api.login(user.email, user.password).status_code == 401
    for model in (User, Session, RotatedToken):
        assert db.execute(select(func.count()).select_from(model)).scalar_one() == 0
    assert client.delete(f"/authentication/users/{user.id}", headers=admin_headers).status_code == 404


def test_delete_is_all_or_nothing_when_a_module_refuses(client, admin_headers, api, user, hook_recorder):
    hook_recorder.fail_delete = True
    response = client.delete(f"/authentication/users/{user.id}", headers=admin_headers)
    assert response.status_code == 409
    assert api.me(user.access_token).status_code == 200


def test_user_schema_is_published_for_the_database_module(app):
    module = app.extensions["trellis"].module("authentication")
    (schema,) = module.owned_schemas
    assert (schema.name, schema.owner_module, schema.can_modify, schema.extendable) == (
        "User",
        "authentication",
        "ExtensionOnly",
        True,
    )
    assert {"email", "isActive", "isVerified"} <= set(schema.fields)


def test_extension_fields_travel_with_the_user(client, admin_headers, api, user, db):
    stored = db.get(User, user.id)
    stored.extra = {"nickname": "ace", "email": "shadow@example.com"}
    db.commit()
    me = api.me(user.access_token).get_json()
    assert me["nickname"] == "ace" and me["email"] == user.email
    listed = client.get("/authentication/users", headers=admin_headers).get_json()["users"][0]
    assert listed["nickname"] == "ace" and listed["email"] == user.email


def test_purge_sessions_command(app, api, client, make_user, db):
    ended, live = make_user(), make_user()
    api.renew(ended.refresh_token)
    client.post("/authentication/logout", headers=ended.headers)
    result = app.test_cli_runner().invoke(args=["trellis", "authentication", "purge-sessions"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "deleted 1 sessions"
    assert db.execute(select(func.count()).select_from(RotatedToken)).scalar_one() == 0
    assert api.me(live.access_token).status_code == 200
