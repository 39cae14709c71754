"""Email services: sending (raw and from templates), templates, provider upload and sync.

Other modules send mail now through :func:`send_email` (the Forms module forwards submissions with it) or
:func:`send_template`, queue it for the background senders through ``trellis_email.outbox`` (mail sent on
behalf of a request: the Authentication module's links), and provide the templates they send with
:func:`ensure_template`.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from trellis import audit, db
from trellis.errors import APIError, bad_request, conflict, not_found, provider_error
from trellis.http import paginate
from trellis.metrics import ModuleCounter
from trellis.module_config import get as get_config

from .addresses import Address, parse_recipient, parse_sender
from .models import QUEUED, EmailMessage, EmailTemplate
from .providers import Outgoing, Provider, ProviderFailure, RemoteTemplate, TemplatesUnsupported, for_config
from .rendering import placeholders, render

log = logging.getLogger(__name__)


# --- sending -------------------------------------------------------------------------------------
SENT = ModuleCounter("trellis_email_sent_total", "Emails handed to the provider, by outcome", ("provider", "status"))


def send_email(
    to: str, subject: str, html: str, from_: str | None = None, *, template_name: str | None = None
) -> dict[str, Any]:
    """Send one HTML message through the configured provider and return its record.

    The record is committed before delivery is attempted and again with the outcome, so a failed send
    stays visible (``status: "failed"`` and ``error``) whatever the caller does next. Provider failures
    are reported in the record, not raised; bad addresses or subject raise 400.
    """
    config = get_config("email")
    recipient, sender = _addresses(to, from_ or config["from"], explicit_sender=from_ is not None)
    if "\r" in subject or "\n" in subject:
        raise bad_request("The subject must not contain line breaks", {"subject": ["Line breaks are not allowed."]})
    provider = for_config(config)
    record = EmailMessage(
        to=str(recipient),
        sender=str(sender),
        subject=subject,
        body=html,
        template_name=template_name,
        provider=provider.name,
        status="pending",
    )
    db.session.add(record)
    db.session.commit()
    try:
        record.provider_message_id = provider.send(Outgoing(recipient, sender, subject, html))
        record.status = "sent"
    except ProviderFailure as exc:
        record.status, record.error = "failed", str(exc)
        log.warning("email %s through %s failed: %s", record.id, provider.name, exc)
    SENT.inc(provider=provider.name, status=record.status)
    db.session.commit()
    return message_dict(record)


def send_template(to: str, template_name: str, variables: dict[str, Any], from_: str | None = None) -> dict[str, Any]:
    """Render a stored template with ``variables`` and send it (404 unknown template, 400 missing variable)."""
    template = db.session.execute(select(EmailTemplate).where(EmailTemplate.name == template_name)).scalar_one_or_none()
    if template is None:
        raise not_found(f"No email template named {template_name!r}")
    subject, body = render(template.subject, template.body, variables)
    return send_email(to, subject, body, from_, template_name=template.name)


def _addresses(to: str, sender: str, explicit_sender: bool) -> tuple[Address, Address]:
    errors: dict[str, list[str]] = {}
    recipient = parsed_sender = None
    try:
        recipient = parse_recipient(to)
    except ValueError as exc:
        errors["to"] = [str(exc)]
    try:
        parsed_sender = parse_sender(sender)
    except ValueError as exc:
        errors["from" if explicit_sender else "config.from"] = [str(exc)]
    if errors:
        raise bad_request("Invalid e-mail address", errors)
    return recipient, parsed_sender  # type: ignore[return-value]


def message_dict(record: EmailMessage) -> dict[str, Any]:
    return {
        "_id": record.id,
        "to": record.to,
        "from": record.sender,
        "subject": record.subject,
        "body": record.body,
        "templateName": record.template_name,
        "provider": record.provider,
        "status": record.status,
        "providerMessageId": record.provider_message_id,
        "error": record.error,
        "attempts": record.attempts or 0,
        "nextAttemptAt": db.isoformat(record.next_attempt_at) if record.status == QUEUED else None,
        "createdAt": db.isoformat(record.created_at),
    }


def list_messages(
    skip: int, limit: int, status: str | None = None, provider: str | None = None
) -> tuple[list[dict[str, Any]], int]:
    query = select(EmailMessage)
    if status:
        query = query.where(EmailMessage.status == status)
    if provider:
        query = query.where(EmailMessage.provider == provider)
    rows, total = paginate(query, skip, limit, order_by=(EmailMessage.created_at.desc(), EmailMessage.id.desc()))
    return [message_dict(row) for row in rows], total


# --- templates -----------------------------------------------------------------------------------


def template_dict(template: EmailTemplate) -> dict[str, Any]:
    return {
        "_id": template.id,
        "name": template.name,
        "subject": template.subject,
        "body": template.body,
        "variables": list(template.variables or []),
        "externalId": template.external_id,
        "externalProvider": template.external_provider,
        "createdAt": db.isoformat(template.created_at),
        "updatedAt": db.isoformat(template.updated_at),
    }


def get_template(template_id: str) -> EmailTemplate:
    template = db.session.get(EmailTemplate, template_id)
    if template is None:
        raise not_found(f"No email template with id {template_id!r}")
    return template


def list_templates(skip: int, limit: int, search: str | None = None) -> tuple[list[dict[str, Any]], int]:
    query = select(EmailTemplate)
    if search:
        query = query.where(func.lower(EmailTemplate.name).contains(search.lower(), autoescape=True))
    rows, total = paginate(query, skip, limit, order_by=(EmailTemplate.name,))
    return [template_dict(row) for row in rows], total


def _ensure_name_free(name: str, own_id: str | None = None) -> None:
    taken = db.session.execute(select(EmailTemplate.id).where(EmailTemplate.name == name)).scalar_one_or_none()
    if taken is not None and taken != own_id:
        raise conflict(f"An email template named {name!r} already exists", {"name": ["Already taken."]})


def derive_variables(subject: str, body: str, declared: list[str] | None) -> list[str]:
    """``variables`` comes from the placeholders; a client's own list must agree with them."""
    found = placeholders(subject, body)
    if declared is not None and sorted(set(declared)) != found:
        extra = sorted(set(declared) - set(found))
        missing = sorted(set(found) - set(declared))
        reasons = [f"Not used by the template: {', '.join(extra)}."] if extra else []
        reasons += [f"Used by the template but not listed: {', '.join(missing)}."] if missing else []
        raise bad_request("variables does not match the template's placeholders", {"variables": reasons})
    return found


def create_template(data: dict[str, Any]) -> EmailTemplate:
    _ensure_name_free(data["name"])
    template = EmailTemplate(
        id=db.new_id(),
        name=data["name"],
        subject=data["subject"],
        body=data["body"],
        variables=derive_variables(data["subject"], data["body"], data.get("variables")),
    )
    db.session.add(template)
    audit.record("email", "template.create", template.id, data)
    db.session.commit()
    return template


def ensure_template(name: str, subject: str, body: str, *, commit: bool = True) -> bool:
    """Create the template ``name`` unless one exists (an administrator's edits are kept); True if created.

    For modules that send their own templates. Safe when several processes do it at once. ``commit=False``
    leaves it to the caller's transaction (one that is queueing a mail from it).
    """
    if db.session.execute(select(EmailTemplate.id).where(EmailTemplate.name == name)).first() is not None:
        return False
    try:
        with db.session.begin_nested():  # a concurrent creation loses only this insert
            db.session.add(
                EmailTemplate(name=name, subject=subject, body=body, variables=derive_variables(subject, body, None))
            )
    except IntegrityError:
        return False
    if commit:
        db.session.commit()
    return True


def update_template(template_id: str, changes: dict[str, Any]) -> EmailTemplate:
    template = get_template(template_id)
    if "name" in changes and changes["name"] != template.name:
        _ensure_name_free(changes["name"], template.id)
    subject = changes.get("subject", template.subject)
    body = changes.get("body", template.body)
    variables = derive_variables(subject, body, changes.get("variables"))
    for key in ("name", "subject", "body"):
        if key in changes:
            setattr(template, key, changes[key])
    template.variables = variables
    audit.record("email", "template.update", template.id, changes)
    db.session.commit()
    return template


def delete_template(template_id: str) -> str:
    """Deletes the local template only; the provider's copy (if uploaded) stays there."""
    template = get_template(template_id)
    db.session.delete(template)
    audit.record("email", "template.delete", template_id, {"name": template.name})
    db.session.commit()
    return template_id


# --- provider templates --------------------------------------------------------------------------


def _provider_failed(provider: Provider, action: str, exc: ProviderFailure) -> APIError:
    log.warning("email %s through %s failed: %s", action, provider.name, exc)
    return provider_error(f"{action.capitalize()} through {provider.name} failed: {exc}")


def _unsupported(provider: Provider) -> APIError:
    return bad_request(f"The {provider.name} provider keeps no templates; configure mailgun or sendgrid")


def upload_template(template_id: str) -> EmailTemplate:
    """Push a template to the provider (create, or update the copy it already has) and keep its id."""
    template = get_template(template_id)
    provider = for_config(get_config("email"))
    known = template.external_id if template.external_provider == provider.name else None
    try:
        external_id = provider.upload_template(template.name, template.subject, template.body, known)
    except TemplatesUnsupported:
        raise _unsupported(provider) from None
    except ProviderFailure as exc:
        raise _provider_failed(provider, "template upload", exc) from None
    template.external_id, template.external_provider = external_id, provider.name
    audit.record("email", "template.upload", template.id, {"provider": provider.name, "externalId": external_id})
    db.session.commit()
    return template


def sync_templates() -> dict[str, Any]:
    """Pull the provider's templates into local ones, matched by external id, then by name; one transaction."""
    provider = for_config(get_config("email"))
    try:
        remote_templates = list(provider.list_templates())
    except TemplatesUnsupported:
        raise _unsupported(provider) from None
    except ProviderFailure as exc:
        raise _provider_failed(provider, "template sync", exc) from None
    report: dict[str, list[Any]] = {"created": [], "updated": [], "unchanged": [], "skipped": []}
    for remote in remote_templates:
        outcome, detail = _apply_remote(provider.name, remote)
        report[outcome].append(detail)
    audit.record("email", "template.sync", provider.name, report)
    db.session.commit()
    return report


def _apply_remote(provider: str, remote: RemoteTemplate) -> tuple[str, Any]:
    name = remote.name[:200]
    if remote.body is None:
        return "skipped", {"name": name, "reason": "The provider holds no active content for it."}
    try:
        variables = placeholders(remote.subject, remote.body)
    except APIError as exc:
        reasons = "; ".join(f"{part}: {msgs[0]}" for part, msgs in (exc.errors or {}).items())
        return "skipped", {"name": name, "reason": f"Not a valid Trellis template ({reasons})."}
    local = db.session.execute(
        select(EmailTemplate).where(
            EmailTemplate.external_provider == provider, EmailTemplate.external_id == remote.external_id
        )
    ).scalar_one_or_none()
    if local is None:
        local = db.session.execute(select(EmailTemplate).where(EmailTemplate.name == name)).scalar_one_or_none()
        if local is not None and local.external_provider == provider and local.external_id:
            return "skipped", {
                "name": name,
                "reason": "A local template of this name is linked to another provider template.",
            }
    if local is None:
        db.session.add(
            EmailTemplate(
                name=name,
                subject=remote.subject,
                body=remote.body,
                variables=variables,
                external_id=remote.external_id,
                external_provider=provider,
            )
        )
        db.session.flush()  # the next remote template of the same name must see this one
        return "created", name
    wanted = {
        "subject": remote.subject,
        "body": remote.body,
        "variables": variables,
        "external_id": remote.external_id,
        "external_provider": provider,
    }
    if all(getattr(local, key) == value for key, value in wanted.items()):
        return "unchanged", local.name
    for key, value in wanted.items():
        setattr(local, key, value)
    return "updated", local.name
