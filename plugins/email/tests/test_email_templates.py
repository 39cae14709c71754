"""Templates CRUD at /admin/email/templates: unique names, derived variables, validation, credentials."""

import pytest

WELCOME = {"name": "welcome", "subject": "Welcome {{ name }}", "body": "<p>Hi {{name}}, your code is {{code}}</p>"}


def create(client, headers, **overrides):
    return client.post("/admin/email/templates", json={**WELCOME, **overrides}, headers=headers)


def test_create_derives_variables_from_subject_and_body(client, admin_headers):
    response = create(client, admin_headers)
    assert response.status_code == 201
    template = response.get_json()
    assert template["variables"] == ["code", "name"]
    assert {k: template[k] for k in ("name", "subject", "body")} == WELCOME
    assert template["externalId"] is None
    assert template["_id"] and template["createdAt"].endswith("Z")


def test_declared_variables_must_match_the_placeholders(client, admin_headers):
    assert create(client, admin_headers, variables=["name", "code"]).status_code == 201
    response = create(client, admin_headers, name="other", variables=["name", "unused"])
    assert response.status_code == 400
    reasons = response.get_json()["errors"]["variables"]
    assert reasons == ["Not used by the template: unused.", "Used by the template but not listed: code."]


def test_duplicate_name_is_409(client, admin_headers):
    assert create(client, admin_headers).status_code == 201
    response = create(client, admin_headers, subject="Another")
    assert response.status_code == 409
    assert response.get_json()["name"] == "CONFLICT"


@pytest.mark.parametrize(
    "overrides,field",
    [
        ({"body": "<p>{{ name </p>"}, "body"),
        ({"subject": "{% if %}"}, "subject"),
        ({"body": "{{ name | no_such_filter }}"}, "body"),
        ({"name": ""}, "name"),
        ({"subject": ""}, "subject"),
        ({"extra": 1}, "extra"),
    ],
)
def test_invalid_templates_are_400(client, admin_headers, overrides, field):
    response = create(client, admin_headers, **overrides)
    assert response.status_code == 400
    assert field in response.get_json()["errors"]


def test_missing_fields_are_400(client, admin_headers):
    response = client.post("/admin/email/templates", json={"name": "x"}, headers=admin_headers)
    assert response.status_code == 400
    assert set(response.get_json()["errors"]) == {"subject", "body"}


def test_list_get_update_delete(client, admin_headers):
    ids = [create(client, admin_headers, name=name).get_json()["_id"] for name in ("b-second", "a-first", "c-third")]
    listed = client.get("/admin/email/templates?limit=2", headers=admin_headers).get_json()
    assert listed["count"] == 3
    assert [t["name"] for t in listed["templates"]] == ["a-first", "b-second"]
    page2 = client.get("/admin/email/templates?skip=2", headers=admin_headers).get_json()
    assert [t["name"] for t in page2["templates"]] == ["c-third"]
    found = client.get("/admin/email/templates?search=SEC", headers=admin_headers).get_json()
    assert (found["count"], found["templates"][0]["_id"]) == (1, ids[0])

    assert client.get(f"/admin/email/templates/{ids[0]}", headers=admin_headers).get_json()["name"] == "b-second"

    response = client.put(
        f"/admin/email/templates/{ids[0]}", json={"body": "<b>{{ total }}</b>"}, headers=admin_headers
    )
    assert response.status_code == 200
    assert response.get_json()["variables"] == ["name", "total"]  # the subject still uses name
    assert response.get_json()["subject"] == WELCOME["subject"]

    response = client.put(f"/admin/email/templates/{ids[0]}", json={"name": "a-first"}, headers=admin_headers)
    assert response.status_code == 409
    response = client.put(f"/admin/email/templates/{ids[0]}", json={"name": "renamed"}, headers=admin_headers)
    assert response.get_json()["name"] == "renamed"
    assert client.put(f"/admin/email/templates/{ids[0]}", json={"bogus": 1}, headers=admin_headers).status_code == 400

    response = client.delete(f"/admin/email/templates/{ids[0]}", headers=admin_headers)
    assert response.status_code == 200
    assert response.get_json() == {"_id": ids[0], "deleted": True}
    assert client.get(f"/admin/email/templates/{ids[0]}", headers=admin_headers).status_code == 404
    assert client.delete(f"/admin/email/templates/{ids[0]}", headers=admin_headers).status_code == 404
    assert client.put(f"/admin/email/templates/{ids[0]}", json={"name": "x"}, headers=admin_headers).status_code == 404


def test_list_limits_are_checked(client, admin_headers):
    assert client.get("/admin/email/templates?limit=1001", headers=admin_headers).status_code == 400
    assert client.get("/admin/email/templates?skip=-1", headers=admin_headers).status_code == 400


@pytest.mark.parametrize(
    "method,path",
    [
        ("get", "/admin/email/templates"),
        ("post", "/admin/email/templates"),
        ("get", "/admin/email/templates/x"),
        ("put", "/admin/email/templates/x"),
        ("delete", "/admin/email/templates/x"),
        ("post", "/admin/email/templates/x/upload"),
        ("post", "/admin/email/sync"),
        ("get", "/admin/email/outbox"),
        ("post", "/email/send"),
    ],
)
def test_every_route_needs_admin_credentials(client, method, path):
    response = getattr(client, method)(path, json={})
    assert response.status_code == 401
    assert response.get_json()["name"] == "UNAUTHORIZED"


def test_a_user_token_is_not_enough(app, request, client):
    """Needs the Authentication module for real user tokens (runs in the all-modules suite)."""
    if app.extensions["trellis"].module("authentication") is None:
        pytest.skip("needs the authentication module")
    headers = request.getfixturevalue("user_headers")
    for method, path in (("get", "/admin/email/templates"), ("post", "/email/send"), ("get", "/admin/email/config")):
        response = getattr(client, method)(path, json={}, headers=headers)
        assert response.status_code == 403, path
        assert response.get_json()["name"] == "FORBIDDEN"
