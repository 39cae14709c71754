"""Email routes: ``POST /email/send`` and the ``/admin/email/...`` administration (all need admin credentials)."""

from __future__ import annotations

from typing import Any

from trellis.credentials import admin_required
from trellis.errors import ErrorSchema, provider_error
from trellis.http import Blueprint, DeletedSchema, deleted
from trellis.module_config import admin_config_routes

from . import service
from .config import EmailConfigSchema
from .schemas import (
    EmailOutboxArgs,
    EmailOutboxSchema,
    EmailSendResultSchema,
    EmailSendSchema,
    EmailSyncResultSchema,
    EmailTemplateCreateSchema,
    EmailTemplateListArgs,
    EmailTemplateListSchema,
    EmailTemplateSchema,
    EmailTemplateUpdateSchema,
)

blp = Blueprint("email", __name__, description="Email: raw and template sends, templates, provider sync, outbox")

_PROVIDER_ERROR = "The provider failed (`PROVIDER_ERROR`); the send record says why"


@blp.route("/email/send", methods=["POST"])
@admin_required
@blp.arguments(EmailSendSchema)
@blp.response(200, EmailSendResultSchema)
@blp.alt_response(404, schema=ErrorSchema, description="No template of that name")
@blp.alt_response(500, schema=ErrorSchema, description=_PROVIDER_ERROR)
def send(body: dict[str, Any]):
    """Send an e-mail: raw (`subject`, `body`) or from a template (`templateName`, `variables`)."""
    if "templateName" in body:
        record = service.send_template(body["to"], body["templateName"], body.get("variables") or {}, body.get("from"))
    else:
        record = service.send_email(body["to"], body["subject"], body["body"], body.get("from"))
    if record["status"] != "sent":
        raise provider_error(
            f"Sending through {record['provider']} failed: {record['error']} (recorded as message {record['_id']})"
        )
    return {"messageId": record["_id"], "status": "sent"}


@blp.route("/admin/email/outbox", methods=["GET"])
@admin_required
@blp.arguments(EmailOutboxArgs, location="query")
@blp.response(200, EmailOutboxSchema)
def outbox(args: dict[str, Any]):
    """Every message sent (any provider), newest first; filter by `status` or `provider`."""
    messages, count = service.list_messages(args["skip"], args["limit"], args.get("status"), args.get("provider"))
    return {"messages": messages, "count": count}


@blp.route("/admin/email/templates", methods=["GET"])
@admin_required
@blp.arguments(EmailTemplateListArgs, location="query")
@blp.response(200, EmailTemplateListSchema)
def list_templates(args: dict[str, Any]):
    """Templates, by name."""
    templates, count = service.list_templates(args["skip"], args["limit"], args.get("search"))
    return {"templates": templates, "count": count}


@blp.route("/admin/email/templates", methods=["POST"])
@admin_required
@blp.arguments(EmailTemplateCreateSchema)
@blp.response(201, EmailTemplateSchema)
@blp.alt_response(409, schema=ErrorSchema, description="A template of that name exists")
def create_template(body: dict[str, Any]):
    """Create a template; `variables` are derived from its `{{placeholders}}`."""
    return service.template_dict(service.create_template(body))


@blp.route("/admin/email/templates/<string:templateId>", methods=["GET"])
@admin_required
@blp.response(200, EmailTemplateSchema)
def get_template(templateId: str):
    """One template."""
    return service.template_dict(service.get_template(templateId))


@blp.route("/admin/email/templates/<string:templateId>", methods=["PUT"])
@admin_required
@blp.arguments(EmailTemplateUpdateSchema)
@blp.response(200, EmailTemplateSchema)
@blp.alt_response(409, schema=ErrorSchema, description="Another template has that name")
def update_template(body: dict[str, Any], templateId: str):
    """Change a template's name, subject or body."""
    return service.template_dict(service.update_template(templateId, body))


@blp.route("/admin/email/templates/<string:templateId>", methods=["DELETE"])
@admin_required
@blp.response(200, DeletedSchema)
def delete_template(templateId: str):
    """Delete a template (the provider's copy, if any, is left alone)."""
    return deleted(service.delete_template(templateId))


@blp.route("/admin/email/templates/<string:templateId>/upload", methods=["POST"])
@admin_required
@blp.response(200, EmailTemplateSchema)
@blp.alt_response(400, schema=ErrorSchema, description="The provider keeps no templates (outbox, smtp)")
@blp.alt_response(500, schema=ErrorSchema, description=_PROVIDER_ERROR)
def upload_template(templateId: str):
    """Push the template to the provider (Mailgun, SendGrid); `externalId` keeps the provider's id."""
    return service.template_dict(service.upload_template(templateId))


@blp.route("/admin/email/sync", methods=["POST"])
@admin_required
@blp.response(200, EmailSyncResultSchema)
@blp.alt_response(400, schema=ErrorSchema, description="The provider keeps no templates (outbox, smtp)")
@blp.alt_response(500, schema=ErrorSchema, description=_PROVIDER_ERROR)
def sync_templates():
    """Pull the provider's templates into local ones (matched by external id, then by name)."""
    return service.sync_templates()


admin_config_routes(
    blp, "email", EmailConfigSchema, '`{"provider": "mailgun", "mailgun": {"apiKey": "…", "domain": "…"}}`'
)
