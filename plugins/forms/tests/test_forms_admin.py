"""Admin routes of the Forms module: forms CRUD and submissions list/get/delete."""

import pytest


def submit(client, form_id, body):
    return client.post(f"/forms/submit/{form_id}", json=body)


def test_create_form_fills_defaults(client, admin_headers):
    body = {
        "name": "Contact",
        "fields": [{"name": "email", "type": "email", "required": True}, {"name": "msg", "type": "textarea"}],
        "forwardTo": "Owner@Example.com",
    }
    response = client.post("/admin/forms", json=body, headers=admin_headers)
    assert response.status_code == 201
    form = response.get_json()
    assert form["fields"] == [
        {"name": "email", "type": "email", "required": True},
        {"name": "msg", "type": "textarea", "required": False},
    ]
    assert (form["enabled"], form["forwardTo"]) == (True, "Owner@example.com")
    assert form["_id"] and form["createdAt"].endswith("Z")


def test_duplicate_form_name_is_409(client, admin_headers, make_form):
    make_form()
    response = client.post(
        "/admin/forms", json={"name": "Contact", "fields": [{"name": "a", "type": "text"}]}, headers=admin_headers
    )
    assert response.status_code == 409
    assert response.get_json()["name"] == "CONFLICT"


@pytest.mark.parametrize(
    "body,field",
    [
        ({"fields": [{"name": "a", "type": "text"}]}, "name"),
        ({"name": "F"}, "fields"),
        ({"name": "F", "fields": []}, "fields"),
        ({"name": "F", "fields": [{"name": "a", "type": "date"}]}, "fields"),
        ({"name": "F", "fields": [{"name": "a b", "type": "text"}]}, "fields"),
        ({"name": "F", "fields": [{"name": "a", "type": "text", "label": "A"}]}, "fields"),
        ({"name": "F", "fields": [{"name": "a", "type": "text"}, {"name": "a", "type": "email"}]}, "fields"),
        ({"name": "F", "fields": [{"name": "a", "type": "text"}], "forwardTo": "nobody"}, "forwardTo"),
        ({"name": "F\nX", "fields": [{"name": "a", "type": "text"}]}, "name"),
        ({"name": "F", "fields": [{"name": "_gotcha", "type": "text"}]}, "fields"),
        ({"name": "F", "fields": [{"name": "a", "type": "text"}], "colour": "red"}, "colour"),
    ],
)
def test_invalid_form_definitions_are_400(client, admin_headers, body, field):
    response = client.post("/admin/forms", json=body, headers=admin_headers)
    assert response.status_code == 400, response.get_json()
    assert field in response.get_json()["errors"]


def test_list_get_update_delete(client, admin_headers, make_form):
    forms = [make_form(name=name) for name in ("Beta", "Alpha", "Gamma")]
    listed = client.get("/admin/forms?limit=2", headers=admin_headers).get_json()
    assert listed["count"] == 3 and [f["name"] for f in listed["forms"]] == ["Alpha", "Beta"]
    assert [f["name"] for f in client.get("/admin/forms?skip=2", headers=admin_headers).get_json()["forms"]] == [
        "Gamma"
    ]
    assert client.get("/admin/forms?search=amm", headers=admin_headers).get_json()["count"] == 1
    beta = forms[0]
    assert client.get(f"/admin/forms/{beta['_id']}", headers=admin_headers).get_json() == beta

    response = client.put(
        f"/admin/forms/{beta['_id']}", json={"enabled": False, "forwardTo": "a@example.com"}, headers=admin_headers
    )
    assert response.status_code == 200
    assert (response.get_json()["enabled"], response.get_json()["forwardTo"]) == (False, "a@example.com")
    assert response.get_json()["fields"] == beta["fields"]
    response = client.put(
        f"/admin/forms/{beta['_id']}",
        json={"forwardTo": None, "fields": [{"name": "x", "type": "number"}]},
        headers=admin_headers,
    )
    assert response.get_json()["forwardTo"] is None
    assert response.get_json()["fields"] == [{"name": "x", "type": "number", "required": False}]
    assert client.put(f"/admin/forms/{beta['_id']}", json={"name": "Alpha"}, headers=admin_headers).status_code == 409
    assert client.put(f"/admin/forms/{beta['_id']}", json={}, headers=admin_headers).status_code == 400
    assert client.put(f"/admin/forms/{beta['_id']}", json={"nope": 1}, headers=admin_headers).status_code == 400
    assert client.put("/admin/forms/missing", json={"enabled": True}, headers=admin_headers).status_code == 404

    response = client.delete(f"/admin/forms/{beta['_id']}", headers=admin_headers)
    assert response.get_json() == {"_id": beta["_id"], "deleted": True}
    assert client.get(f"/admin/forms/{beta['_id']}", headers=admin_headers).status_code == 404
    assert client.delete(f"/admin/forms/{beta['_id']}", headers=admin_headers).status_code == 404


def test_submissions_list_get_delete(client, admin_headers, contact, valid_submission):
    ids = [
        submit(client, contact["_id"], {**valid_submission, "name": f"n{i}"}).get_json()["submissionId"]
        for i in range(3)
    ]
    listed = client.get(f"/admin/forms/{contact['_id']}/submissions?limit=2", headers=admin_headers).get_json()
    assert listed["count"] == 3
    assert [s["_id"] for s in listed["submissions"]] == [ids[2], ids[1]]  # newest first
    page2 = client.get(f"/admin/forms/{contact['_id']}/submissions?skip=2", headers=admin_headers).get_json()
    assert [s["_id"] for s in page2["submissions"]] == [ids[0]]

    one = client.get(f"/admin/forms/submissions/{ids[0]}", headers=admin_headers).get_json()
    assert one["form"] == contact["_id"]
    assert one["data"] == {
        "name": "n0",
        "email": "Ada@example.com",
        "message": "Hello\nthere",
        "age": 36,
        "newsletter": False,
    }
    assert one["forwardStatus"] is None and one["forwardError"] is None

    assert client.delete(f"/admin/forms/submissions/{ids[0]}", headers=admin_headers).get_json() == {
        "_id": ids[0],
        "deleted": True,
    }
    assert client.get(f"/admin/forms/submissions/{ids[0]}", headers=admin_headers).status_code == 404
    assert client.delete(f"/admin/forms/submissions/{ids[0]}", headers=admin_headers).status_code == 404
    assert client.get("/admin/forms/missing/submissions", headers=admin_headers).status_code == 404


def test_deleting_a_form_deletes_its_submissions(client, admin_headers, contact, valid_submission):
    submission_id = submit(client, contact["_id"], valid_submission).get_json()["submissionId"]
    assert client.delete(f"/admin/forms/{contact['_id']}", headers=admin_headers).status_code == 200
    assert client.get(f"/admin/forms/submissions/{submission_id}", headers=admin_headers).status_code == 404


@pytest.mark.parametrize(
    "method,path",
    [
        ("get", "/admin/forms"),
        ("post", "/admin/forms"),
        ("get", "/admin/forms/x"),
        ("put", "/admin/forms/x"),
        ("delete", "/admin/forms/x"),
        ("get", "/admin/forms/x/submissions"),
        ("get", "/admin/forms/submissions/x"),
        ("delete", "/admin/forms/submissions/x"),
    ],
)
def test_admin_routes_need_credentials(client, method, path):
    assert getattr(client, method)(path, json={}).status_code == 401
    assert getattr(client, method)(path, json={}, headers={"masterkey": "wrong"}).status_code == 401


def test_admin_bearer_token_is_enough(client, admin_token, make_form):
    make_form()
    response = client.get("/admin/forms", headers={"Authorization": f"Bearer {admin_token}"})
    assert response.status_code == 200 and response.get_json()["count"] == 1


def test_a_user_token_is_not_enough_for_admin_routes(app, request, client, contact, valid_submission):
    """Needs the Authentication module for real user tokens (runs in the all-modules suite)."""
    if app.extensions["trellis"].module("authentication") is None:
        pytest.skip("needs the authentication module")
    headers = request.getfixturevalue("user_headers")
    assert client.get("/admin/forms", headers=headers).status_code == 403
    assert client.get(f"/admin/forms/{contact['_id']}/submissions", headers=headers).status_code == 403
    # The public route ignores who is calling.
    assert client.post(f"/forms/submit/{contact['_id']}", json=valid_submission, headers=headers).status_code == 201


def test_forms_are_listed_as_owned_schemas(app, client, admin_headers):
    """The Database module's schema list shows Form and FormSubmission with ownerModule forms (when loaded)."""
    if app.extensions["trellis"].module("database") is None:
        pytest.skip("needs the database module")
    schemas = client.get("/database/schemas?owner=forms", headers=admin_headers).get_json()["schemas"]
    assert [(s["name"], s["ownerModule"]) for s in schemas] == [("Form", "forms"), ("FormSubmission", "forms")]
