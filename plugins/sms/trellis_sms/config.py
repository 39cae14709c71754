"""The SMS module's configuration (stored by the core's ConfigStore, read with ``module_config.get``)."""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from trellis.module_config import ModuleConfigSchema, api_url, missing_provider_settings
from trellis.phones import PhoneNumber

PROVIDERS = ("outbox", "twilio")
TWILIO_API = "https://api.twilio.com"


class SmsOutboxSettings(Schema):
    """The outbox provider delivers nothing; it has no settings."""


class SmsTwilioSettings(Schema):
    accountSid = fields.String(
        validate=validate.Regexp(r"^AC[0-9a-fA-F]{32}$", error="Twilio account SIDs look like AC + 32 hex digits")
    )
    authToken = fields.String(validate=validate.Length(min=1, max=256), metadata={"secret": True})
    phoneNumber = PhoneNumber(metadata={"description": "the Twilio number messages are sent from"})
    baseUrl = api_url(TWILIO_API, "Twilio REST API address (change it only to reach a test server)")


class SmsConfig(ModuleConfigSchema):
    provider = fields.String(load_default="outbox", validate=validate.OneOf(PROVIDERS))
    outbox = fields.Nested(SmsOutboxSettings, load_default=dict)
    twilio = fields.Nested(SmsTwilioSettings, load_default=dict)

    @validates_schema
    def provider_is_configured(self, data: dict[str, Any], partial: Any = None, **_: Any) -> None:
        # A partial load is a PUT body; the merged result is checked again in full by the ConfigStore.
        errors = (
            {} if partial else missing_provider_settings(data, {"twilio": ("accountSid", "authToken", "phoneNumber")})
        )
        if errors:
            raise ValidationError(errors)
