"""Public POST /forms/submit/{formId}: validation per field type, limits, honeypot, rate limit."""

import io
import json

import pytest

from trellis import create_app


def submit(client, form_id, body, **kwargs):
    return client.post(f"/forms/submit/{form_id}", json=body, **kwargs)


def stored(client, admin_headers, form_id):
    return client.get(f"/admin/forms/{form_id}/submissions", headers=admin_headers).get_json()


def test_submission_needs_no_credentials_and_is_stored_clean(client, admin_headers, contact, valid_submission):
    response = submit(client, contact["_id"], {**valid_submission, "newsletter": True})
    assert response.status_code == 201
    body = response.get_json()
    assert body["message"] == "Submission received" and set(body) == {"message", "submissionId"}
    listed = stored(client, admin_headers, contact["_id"])
    assert listed["count"] == 1
    submission = listed["submissions"][0]
    assert submission["_id"] == body["submissionId"]
    assert submission["data"] == {
        "name": "Ada Lovelace",
        "email": "Ada@example.com",
        "message": "Hello\nthere",
        "age": 36,
        "newsletter": True,
    }
    assert submission["forwardStatus"] is None


@pytest.mark.parametrize(
    "changes,field,reason",
    [
        ({"email": "not-an-email"}, "email", "An email address must have an @-sign."),
        ({"email": "ada@example"}, "email", None),
        ({"email": 42}, "email", "Not a valid string."),
        ({"name": "two\nlines"}, "name", "Must be a single line (use a textarea field for more)."),
        ({"name": "x" * 1001}, "name", "Longer than 1000 characters."),
        ({"message": "x" * 10001}, "message", "Longer than 10000 characters."),
        ({"message": ["list"]}, "message", "Not a valid string."),
        ({"age": "old"}, "age", "Not a valid number."),
        ({"age": True}, "age", "Not a valid number."),
        ({"age": "NaN"}, "age", "Not a valid number."),
        ({"newsletter": "yes"}, "newsletter", "Not a valid boolean."),
        ({"name": ""}, "name", "Missing data for required field."),
        ({"name": None}, "name", "Missing data for required field."),
        ({"phone": "123"}, "phone", "Unknown field."),
    ],
)
def test_each_field_type_is_validated(client, admin_headers, contact, valid_submission, changes, field, reason):
    response = submit(client, contact["_id"], {**valid_submission, **changes})
    assert response.status_code == 400, response.get_json()
    errors = response.get_json()["errors"]
    assert list(errors) == [field]
    if reason:
        assert errors[field] == [reason]
    assert stored(client, admin_headers, contact["_id"])["count"] == 0


def test_all_problems_are_reported_at_once(client, contact):
    response = submit(client, contact["_id"], {"email": "bad", "extra": 1})
    assert response.status_code == 400
    assert response.get_json()["errors"] == {
        "extra": ["Unknown field."],
        "name": ["Missing data for required field."],
        "email": ["An email address must have an @-sign."],
        "message": ["Missing data for required field."],
    }


def test_optional_fields_may_be_left_out_and_numbers_keep_their_kind(client, admin_headers, contact):
    body = {"name": "A", "email": "a@example.com", "message": "m", "age": 2.5}
    assert submit(client, contact["_id"], body).status_code == 201
    data = stored(client, admin_headers, contact["_id"])["submissions"][0]["data"]
    assert data == {"name": "A", "email": "a@example.com", "message": "m", "age": 2.5, "newsletter": False}


def test_a_required_checkbox_must_be_checked(client, make_form):
    form = make_form(name="Terms", fields=[{"name": "agree", "type": "checkbox", "required": True}])
    assert submit(client, form["_id"], {"agree": False}).get_json()["errors"] == {"agree": ["Must be checked."]}
    assert submit(client, form["_id"], {}).get_json()["errors"] == {"agree": ["Must be checked."]}
    assert submit(client, form["_id"], {"agree": True}).status_code == 201


@pytest.mark.parametrize("payload", [[1, 2], "text", 3])
def test_body_must_be_a_json_object(client, contact, payload):
    response = submit(client, contact["_id"], payload)
    assert response.status_code == 400


def test_malformed_json_is_400(client, contact):
    response = client.post(f"/forms/submit/{contact['_id']}", data="{nope", content_type="application/json")
    assert response.status_code == 400


def test_only_json_bodies_are_accepted(client, admin_headers, make_form):
    form = make_form(name="Optional", fields=[{"name": "note", "type": "text"}])
    response = client.post(f"/forms/submit/{form['_id']}", data={"note": "hi"})  # an HTML form post
    assert response.status_code == 415
    assert response.get_json()["name"] == "UNSUPPORTED_MEDIA_TYPE"
    assert stored(client, admin_headers, form["_id"])["count"] == 0


def test_unknown_form_is_404(client, valid_submission):
    response = submit(client, "no-such-form", valid_submission)
    assert response.status_code == 404 and response.get_json()["name"] == "NOT_FOUND"


def test_disabled_form_is_403(client, admin_headers, contact, valid_submission):
    client.put(f"/admin/forms/{contact['_id']}", json={"enabled": False}, headers=admin_headers)
    response = submit(client, contact["_id"], valid_submission)
    assert response.status_code == 403 and response.get_json()["name"] == "FORBIDDEN"
    assert stored(client, admin_headers, contact["_id"])["count"] == 0


def test_oversized_body_is_413(client, admin_headers, contact, valid_submission, configure_forms):
    configure_forms(maxBodyBytes=2048)
    response = submit(client, contact["_id"], {**valid_submission, "message": "x" * 3000})
    assert response.status_code == 413
    assert response.get_json()["name"] == "PAYLOAD_TOO_LARGE"
    assert submit(client, contact["_id"], {**valid_submission, "message": "x" * 1500}).status_code == 201
    # A chunked body (no Content-Length) is measured too.
    body = json.dumps({**valid_submission, "message": "x" * 3000}).encode()
    chunked = client.post(
        f"/forms/submit/{contact['_id']}",
        input_stream=io.BytesIO(body),
        content_type="application/json",
        headers={"Transfer-Encoding": "chunked"},
        environ_base={"wsgi.input_terminated": True},
    )
    assert chunked.status_code == 413


def test_filled_honeypot_looks_accepted_but_nothing_is_kept(client, admin_headers, contact, valid_submission):
    response = submit(client, contact["_id"], {**valid_submission, "_gotcha": "http://spam.example"})
    assert response.status_code == 201
    fake_id = response.get_json()["submissionId"]
    assert stored(client, admin_headers, contact["_id"])["count"] == 0
    assert client.get(f"/admin/forms/submissions/{fake_id}", headers=admin_headers).status_code == 404


def test_empty_honeypot_is_accepted_and_not_stored_as_data(client, admin_headers, contact, valid_submission):
    assert submit(client, contact["_id"], {**valid_submission, "_gotcha": ""}).status_code == 201
    assert "_gotcha" not in stored(client, admin_headers, contact["_id"])["submissions"][0]["data"]


def test_honeypot_name_is_configurable(client, admin_headers, contact, valid_submission, configure_forms):
    configure_forms(honeypotField="website")
    assert submit(client, contact["_id"], {**valid_submission, "website": "x"}).status_code == 201
    assert stored(client, admin_headers, contact["_id"])["count"] == 0
    # The old name is now just an unknown field.
    assert submit(client, contact["_id"], {**valid_submission, "_gotcha": "x"}).status_code == 400


def test_rate_limit_per_client_address(client, admin_headers, contact, valid_submission, configure_forms):
    configure_forms(rateLimit="3/minute")
    for _ in range(3):
        assert submit(client, contact["_id"], valid_submission).status_code == 201
    response = submit(client, contact["_id"], valid_submission)
    assert response.status_code == 429
    assert response.get_json()["name"] == "RATE_LIMITED"
    assert int(response.headers["Retry-After"]) >= 1
    # Invalid and unknown-form attempts count too, and another address is not affected.
    assert submit(client, "no-such-form", valid_submission).status_code == 429
    other = submit(client, contact["_id"], valid_submission, environ_base={"REMOTE_ADDR": "203.0.113.9"})
    assert other.status_code == 201
    assert stored(client, admin_headers, contact["_id"])["count"] == 4


def test_forms_config_is_validated(client, admin_headers):
    for body in ({"rateLimit": "lots"}, {"maxBodyBytes": 10}, {"honeypotField": ""}):
        assert client.put("/config/forms", json=body, headers=admin_headers).status_code == 400, body


def test_inactive_module_hides_the_public_route(client, admin_headers, contact, valid_submission, configure_forms):
    configure_forms(active=False)
    assert submit(client, contact["_id"], valid_submission).status_code == 404
    assert client.get("/admin/forms", headers=admin_headers).status_code == 200


def test_forms_work_without_the_email_module(app_config, app, db, admin_headers, valid_submission):
    """Forms requires nothing: an app with Forms alone stores submissions and marks forwarding skipped."""
    import trellis_forms

    alone = create_app({**app_config, "MODULES": "forms"}, modules=[trellis_forms.module]).test_client()
    fields = [{"name": "email", "type": "email", "required": True}]
    form = alone.post(
        "/admin/forms", json={"name": "Solo", "fields": fields, "forwardTo": "owner@example.com"}, headers=admin_headers
    ).get_json()
    response = alone.post(f"/forms/submit/{form['_id']}", json={"email": "a@example.com"})
    assert response.status_code == 201
    submission = alone.get(
        f"/admin/forms/submissions/{response.get_json()['submissionId']}", headers=admin_headers
    ).get_json()
    assert submission["forwardStatus"] == "skipped"
    assert submission["forwardError"] == "The Email module is not loaded or not active"
