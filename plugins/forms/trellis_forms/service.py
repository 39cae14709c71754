"""Forms services: form definitions, public submissions, forwarding through the Email module when present."""

from __future__ import annotations

import logging
from typing import Any

from flask import current_app
from markupsafe import Markup, escape
from sqlalchemy import delete, func, select

from trellis import audit, db, events
from trellis.errors import APIError, bad_request, conflict, forbidden, not_found
from trellis.http import paginate
from trellis.module_config import get as get_config

from .models import Form, FormSubmission
from .validation import clean_submission

log = logging.getLogger(__name__)

SUBMITTED = "Submission received"


# --- forms ---------------------------------------------------------------------------------------


def form_dict(form: Form) -> dict[str, Any]:
    return {
        "_id": form.id,
        "name": form.name,
        "fields": form.fields,
        "enabled": form.enabled,
        "forwardTo": form.forward_to,
        "createdAt": db.isoformat(form.created_at),
        "updatedAt": db.isoformat(form.updated_at),
    }


def get_form(form_id: str) -> Form:
    form = db.session.get(Form, form_id)
    if form is None:
        raise not_found(f"No form with id {form_id!r}")
    return form


def list_forms(skip: int, limit: int, search: str | None = None) -> tuple[list[dict[str, Any]], int]:
    query = select(Form)
    if search:
        query = query.where(func.lower(Form.name).contains(search.lower(), autoescape=True))
    rows, total = paginate(query, skip, limit, order_by=(Form.name,))
    return [form_dict(row) for row in rows], total


def check_definition(name: str, own_id: str | None, form_fields: list[dict[str, Any]] | None) -> None:
    taken = db.session.execute(select(Form.id).where(Form.name == name)).scalar_one_or_none()
    if taken is not None and taken != own_id:
        raise conflict(f"A form named {name!r} already exists", {"name": ["Already taken."]})
    honeypot = get_config("forms")["honeypotField"]
    if form_fields and any(field["name"] == honeypot for field in form_fields):
        raise bad_request(
            f"{honeypot!r} is the spam honeypot field; rename the form field or the honeypotField setting",
            {"fields": [f"{honeypot!r} is reserved."]},
        )


def create_form(data: dict[str, Any]) -> Form:
    check_definition(data["name"], None, data["fields"])
    form = Form(name=data["name"], fields=data["fields"], enabled=data["enabled"], forward_to=data.get("forwardTo"))
    form.id = db.new_id()
    db.session.add(form)
    audit.record("forms", "form.create", form.id, data)
    db.session.commit()
    return form


def update_form(form_id: str, changes: dict[str, Any]) -> Form:
    """Changes apply to later submissions; stored ones keep the values they were accepted with."""
    form = get_form(form_id)
    check_definition(changes.get("name", form.name), form.id, changes.get("fields"))
    for key, attribute in (("name", "name"), ("fields", "fields"), ("enabled", "enabled"), ("forwardTo", "forward_to")):
        if key in changes:
            setattr(form, attribute, changes[key])
    audit.record("forms", "form.update", form.id, changes)
    db.session.commit()
    return form


def delete_form(form_id: str) -> str:
    """Deletes the form and its submissions, in one transaction."""
    form = get_form(form_id)
    db.session.execute(delete(FormSubmission).where(FormSubmission.form_id == form.id))
    db.session.delete(form)
    audit.record("forms", "form.delete", form.id, {"name": form.name})
    db.session.commit()
    return form_id


# --- submissions ---------------------------------------------------------------------------------


def submission_dict(submission: FormSubmission) -> dict[str, Any]:
    return {
        "_id": submission.id,
        "form": submission.form_id,
        "data": submission.data,
        "forwardStatus": submission.forward_status,
        "forwardError": submission.forward_error,
        "forwardMessageId": submission.forward_message_id,
        "createdAt": db.isoformat(submission.created_at),
    }


def get_submission(submission_id: str) -> FormSubmission:
    submission = db.session.get(FormSubmission, submission_id)
    if submission is None:
        raise not_found(f"No submission with id {submission_id!r}")
    return submission


def list_submissions(form_id: str, skip: int, limit: int) -> tuple[list[dict[str, Any]], int]:
    get_form(form_id)
    query = select(FormSubmission).where(FormSubmission.form_id == form_id)
    order = (FormSubmission.created_at.desc(), FormSubmission.id.desc())
    rows, total = paginate(query, skip, limit, order_by=order)
    return [submission_dict(row) for row in rows], total


def delete_submission(submission_id: str) -> str:
    db.session.delete(get_submission(submission_id))
    audit.record("forms", "submission.delete", submission_id)
    db.session.commit()
    return submission_id


def submit(form_id: str, data: dict[str, Any]) -> str:
    """Validate, store and forward one public submission; returns its id.

    A filled honeypot gets the same answer as a real submission (bots learn nothing) but nothing is
    stored or forwarded. The submission is committed before forwarding, so a failed forward never loses it.
    """
    form = get_form(form_id)
    if not form.enabled:
        raise forbidden("This form does not accept submissions")
    honeypot = get_config("forms")["honeypotField"]
    if not _empty(data.get(honeypot)):
        log.info("form %s: honeypot filled; submission dropped", form.id)
        return db.new_id()
    data = {key: value for key, value in data.items() if key != honeypot}
    submission = FormSubmission(
        id=db.new_id(), form_id=form.id, data=clean_submission(form.fields, data), created_at=db.utcnow()
    )
    db.session.add(submission)
    events.record("forms.submission.create", submission_dict(submission))  # in its transaction (webhooks)
    db.session.commit()
    if form.forward_to:
        _forward(form, submission, form.forward_to)
    return submission.id


def _empty(value: Any) -> bool:
    return value is None or value == "" or value is False


def _forward(form: Form, submission: FormSubmission, to: str) -> None:
    trellis = current_app.extensions["trellis"]
    if trellis.module("email") is None or not trellis.configs.is_active("email"):
        status, error, message_id = "skipped", "The Email module is not loaded or not active", None
    else:
        from trellis_email.service import send_email  # only importable when the Email module is installed

        try:
            record = send_email(to, f"New submission: {form.name}", _forward_html(form, submission))
            status, error, message_id = record["status"], record["error"], record["_id"]
        except APIError as exc:  # e.g. the Email module's sender address does not validate
            status, error, message_id = "failed", exc.message, None
        except Exception:  # forwarding is best effort: the stored submission must survive any failure
            log.exception("form %s: forwarding submission %s failed", form.id, submission.id)
            db.session.rollback()
            status, error, message_id = "failed", "Internal error while forwarding (see the server log)", None
    submission.forward_status, submission.forward_error, submission.forward_message_id = status, error, message_id
    db.session.commit()


def _forward_html(form: Form, submission: FormSubmission) -> str:
    rows = []
    for field in form.fields:
        if field["name"] not in submission.data:
            continue
        value = submission.data[field["name"]]
        if isinstance(value, bool):
            shown: Markup | str = "yes" if value else "no"
        else:
            shown = escape(str(value)).replace("\n", Markup("<br>"))
        rows.append(Markup('<tr><th align="left">{}</th><td>{}</td></tr>').format(field["name"], shown))
    return Markup("<h2>New submission to {}</h2><table>{}</table><p>Submission {} at {}</p>").format(
        form.name, Markup("").join(rows), submission.id, db.isoformat(submission.created_at)
    )
