"""The Email module's configuration (validated by the core's ConfigStore on every change)."""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from trellis.module_config import ModuleConfigSchema, api_url, missing_provider_settings

PROVIDERS = ("outbox", "smtp", "mailgun", "sendgrid")
SMTP_SECURITY = ("none", "starttls", "ssl")


def _defaults(schema: type[Schema]):
    # A nested section that is absent loads with its own defaults, not as None.
    return lambda: schema().load({})


class EmailOutboxConfigSchema(Schema):
    """The outbox keeps messages and delivers nothing; it has no settings."""


class EmailSmtpConfigSchema(Schema):
    host = fields.String(load_default="", metadata={"description": "SMTP server name or address"})
    port = fields.Integer(load_default=587, validate=validate.Range(min=1, max=65535))
    username = fields.String(load_default="", metadata={"description": "empty: no AUTH"})
    password = fields.String(load_default="", metadata={"secret": True})
    secure = fields.String(
        load_default="starttls",
        validate=validate.OneOf(SMTP_SECURITY),
        metadata={"description": "none (plain), starttls (upgrade after EHLO), ssl (implicit TLS, port 465)"},
    )
    timeout = fields.Float(load_default=10.0, validate=validate.Range(min=0.1, max=300))


class EmailMailgunConfigSchema(Schema):
    apiKey = fields.String(load_default="", metadata={"secret": True})
    domain = fields.String(load_default="", metadata={"description": "sending domain, e.g. mg.example.com"})
    baseUrl = api_url("https://api.mailgun.net/v3", "API root; https://api.eu.mailgun.net/v3 for the EU region")
    timeout = fields.Float(load_default=10.0, validate=validate.Range(min=0.1, max=300))


class EmailSendgridConfigSchema(Schema):
    apiKey = fields.String(load_default="", metadata={"secret": True})
    # The specification's PUT body carries {apiKey, domain} for every provider; SendGrid needs no domain.
    domain = fields.String(load_default="", metadata={"description": "accepted for the specification's shape; unused"})
    baseUrl = api_url("https://api.sendgrid.com/v3")
    timeout = fields.Float(load_default=10.0, validate=validate.Range(min=0.1, max=300))


class EmailConfigSchema(ModuleConfigSchema):
    provider = fields.String(load_default="outbox", validate=validate.OneOf(PROVIDERS))
    from_ = fields.String(
        data_key="from",
        attribute="from",  # the loaded config says "from" too (GET /config/email shows it as stored)
        load_default="no-reply@localhost",
        validate=validate.Length(min=3, max=320),
        metadata={"description": "default sender, `address` or `Name <address>`"},
    )
    outbox = fields.Nested(EmailOutboxConfigSchema, load_default=_defaults(EmailOutboxConfigSchema))
    smtp = fields.Nested(EmailSmtpConfigSchema, load_default=_defaults(EmailSmtpConfigSchema))
    mailgun = fields.Nested(EmailMailgunConfigSchema, load_default=_defaults(EmailMailgunConfigSchema))
    sendgrid = fields.Nested(EmailSendgridConfigSchema, load_default=_defaults(EmailSendgridConfigSchema))

    @validates_schema
    def _provider_is_configured(self, data: dict[str, Any], **kwargs: Any) -> None:
        """The chosen provider must have what it needs to send (checked on the merged config only)."""
        if kwargs.get("partial"):
            return
        from .addresses import parse_sender

        errors: dict[str, Any] = {}
        try:
            parse_sender(data["from"])
        except ValueError as exc:
            errors["from"] = [str(exc)]
        errors.update(
            missing_provider_settings(
                data, {"smtp": ("host",), "mailgun": ("apiKey", "domain"), "sendgrid": ("apiKey",)}
            )
        )
        if errors:
            raise ValidationError(errors)
