"""Forms routes: public ``POST /forms/submit/{formId}`` and the ``/admin/forms/...`` administration."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from flask import request

from trellis import jsonbody, ratelimit
from trellis.credentials import admin_required
from trellis.errors import ErrorSchema
from trellis.http import Blueprint, DeletedSchema, ListArgs, body_limit, deleted
from trellis.module_config import get as get_config

from . import service
from .schemas import (
    FormCreateSchema,
    FormListArgs,
    FormListSchema,
    FormSchema,
    FormSubmissionListSchema,
    FormSubmissionSchema,
    FormSubmitResultSchema,
    FormSubmitSchema,
    FormUpdateSchema,
)

blp = Blueprint("forms", __name__, description="Forms: admin-defined forms and their public submissions")


def _max_body_bytes() -> int:
    return get_config("forms")["maxBodyBytes"]


def submission_limits(func: Callable[..., Any]) -> Callable[..., Any]:
    """Per-IP rate limit and JSON only; the body limit (``maxBodyBytes``) is the core's per-route limit,
    checked before the body is read or parsed."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ratelimit.check("forms-submit", ratelimit.client_ip(), get_config("forms")["rateLimit"])
        # Without this a url-encoded post would be read as an empty object and stored as such.
        jsonbody.require_json(request, "the form's fields as a JSON object")
        return func(*args, **kwargs)

    return body_limit(_max_body_bytes)(wrapper)


@blp.route("/forms/submit/<string:formId>", methods=["POST"])
@submission_limits
@blp.arguments(FormSubmitSchema)
@blp.response(201, FormSubmitResultSchema)
@blp.alt_response(400, schema=ErrorSchema, description="Missing, unknown or invalid fields (`errors` per field)")
@blp.alt_response(403, schema=ErrorSchema, description="The form is disabled")
@blp.alt_response(404, schema=ErrorSchema, description="No such form")
@blp.alt_response(413, schema=ErrorSchema, description="The body is larger than `maxBodyBytes`")
@blp.alt_response(415, schema=ErrorSchema, description="The body is not JSON")
@blp.alt_response(429, schema=ErrorSchema, description="Too many submissions from this address")
def submit(body: dict[str, Any], formId: str):
    """Submit a form (no credentials): the object's keys are the form's field names."""
    return {"message": service.SUBMITTED, "submissionId": service.submit(formId, body)}


@blp.route("/admin/forms", methods=["GET"])
@admin_required
@blp.arguments(FormListArgs, location="query")
@blp.response(200, FormListSchema)
def list_forms(args: dict[str, Any]):
    """Forms, by name."""
    forms, count = service.list_forms(args["skip"], args["limit"], args.get("search"))
    return {"forms": forms, "count": count}


@blp.route("/admin/forms", methods=["POST"])
@admin_required
@blp.arguments(FormCreateSchema)
@blp.response(201, FormSchema)
@blp.alt_response(409, schema=ErrorSchema, description="A form of that name exists")
def create_form(body: dict[str, Any]):
    """Create a form: `fields` of type text, email, textarea, number or checkbox."""
    return service.form_dict(service.create_form(body))


@blp.route("/admin/forms/<string:formId>", methods=["GET"])
@admin_required
@blp.response(200, FormSchema)
def get_form(formId: str):
    """One form."""
    return service.form_dict(service.get_form(formId))


@blp.route("/admin/forms/<string:formId>", methods=["PUT"])
@admin_required
@blp.arguments(FormUpdateSchema)
@blp.response(200, FormSchema)
@blp.alt_response(409, schema=ErrorSchema, description="Another form has that name")
def update_form(body: dict[str, Any], formId: str):
    """Change a form; `fields` replaces the whole list."""
    return service.form_dict(service.update_form(formId, body))


@blp.route("/admin/forms/<string:formId>", methods=["DELETE"])
@admin_required
@blp.response(200, DeletedSchema)
def delete_form(formId: str):
    """Delete a form and its submissions."""
    return deleted(service.delete_form(formId))


@blp.route("/admin/forms/<string:formId>/submissions", methods=["GET"])
@admin_required
@blp.arguments(ListArgs, location="query")
@blp.response(200, FormSubmissionListSchema)
def list_submissions(args: dict[str, Any], formId: str):
    """Submissions of a form, newest first."""
    submissions, count = service.list_submissions(formId, args["skip"], args["limit"])
    return {"submissions": submissions, "count": count}


@blp.route("/admin/forms/submissions/<string:submissionId>", methods=["GET"])
@admin_required
@blp.response(200, FormSubmissionSchema)
def get_submission(submissionId: str):
    """One submission, with how its forwarding went."""
    return service.submission_dict(service.get_submission(submissionId))


@blp.route("/admin/forms/submissions/<string:submissionId>", methods=["DELETE"])
@admin_required
@blp.response(200, DeletedSchema)
def delete_submission(submissionId: str):
    """Delete a submission."""
    return deleted(service.delete_submission(submissionId))
