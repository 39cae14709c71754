"""The Push Notifications module's configuration (the core's ConfigStore keeps it)."""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from trellis.module_config import ModuleConfigSchema, api_url, missing_provider_settings

PROVIDERS = ("outbox", "firebase")
FCM_API = "https://fcm.googleapis.com"
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"


class PrivateKey(fields.String):
    """A service account's PEM RSA private key (as in its JSON key file); escaped ``\\n`` are accepted."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        text = super()._deserialize(value, attr, data, **kwargs).replace("\\n", "\n")
        try:
            key = serialization.load_pem_private_key(text.encode(), password=None)
        except (ValueError, TypeError):
            raise ValidationError("Not a PEM private key (copy private_key from the service account JSON)") from None
        if not isinstance(key, rsa.RSAPrivateKey):
            raise ValidationError("The service account key must be an RSA key")
        return text


class PushOutboxSettings(Schema):
    """The outbox provider delivers nothing; it has no settings."""


class PushFirebaseSettings(Schema):
    projectId = fields.String(
        validate=validate.Regexp(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$", error="Not a Firebase project id")
    )
    clientEmail = fields.Email(metadata={"description": "client_email of the service account"})
    privateKey = PrivateKey(metadata={"description": "private_key of the service account (PEM)", "secret": True})
    baseUrl = api_url(FCM_API, "FCM API address (change it only to reach a test server)")
    tokenUri = api_url(GOOGLE_TOKEN_URI, "OAuth 2.0 token endpoint (token_uri of the service account)")


class PushConfig(ModuleConfigSchema):
    provider = fields.String(load_default="outbox", validate=validate.OneOf(PROVIDERS))
    outbox = fields.Nested(PushOutboxSettings, load_default=dict)
    firebase = fields.Nested(PushFirebaseSettings, load_default=dict)

    @validates_schema
    def provider_is_configured(self, data: dict[str, Any], partial: Any = None, **_: Any) -> None:
        # A partial load is a PUT body; the merged result is checked again in full by the ConfigStore.
        errors = (
            {} if partial else missing_provider_settings(data, {"firebase": ("projectId", "clientEmail", "privateKey")})
        )
        if errors:
            raise ValidationError(errors)
