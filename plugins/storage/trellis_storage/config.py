"""The Storage module's configuration (README, "Configuration")."""

from __future__ import annotations

import re
from typing import Any

from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from trellis.fields import BoundedList
from trellis.module_config import ModuleConfigSchema

MiB = 1024 * 1024
DEFAULT_MAX_FILE_SIZE = 100 * MiB
DEFAULT_URL_EXPIRY = 3600
# S3 refuses presigned URLs that live longer than 7 days; the local signer keeps the same bound.
MAX_URL_EXPIRY = 7 * 24 * 3600
_MEDIA_TYPE = re.compile(r"^(\*/\*|[A-Za-z0-9][\w.+-]*/(\*|[A-Za-z0-9][\w.+-]*))$")


class LocalConfig(Schema):
    path = fields.String(
        load_default=None,
        allow_none=True,
        metadata={"description": "storage root; null means TRELLIS_STORAGE_PATH"},
    )


class S3Config(Schema):
    bucket = fields.String(load_default="")
    region = fields.String(load_default="us-east-1")
    endpointUrl = fields.String(
        load_default=None, allow_none=True, metadata={"description": "S3-compatible endpoint (MinIO, moto …)"}
    )
    accessKeyId = fields.String(load_default=None, allow_none=True)
    secretAccessKey = fields.String(load_default=None, allow_none=True, metadata={"secret": True})


class StorageConfig(ModuleConfigSchema):
    provider = fields.String(load_default="local", validate=validate.OneOf(["local", "s3"]))
    maxFileSize = fields.Integer(
        load_default=DEFAULT_MAX_FILE_SIZE, validate=validate.Range(min=1), metadata={"description": "bytes"}
    )
    allowedTypes = BoundedList(
        fields.String(validate=validate.Regexp(_MEDIA_TYPE, error="not a media type pattern such as image/*")),
        load_default=list,
        metadata={"description": "media types or patterns (image/*); empty allows every type"},
    )
    signedUrlExpiry = fields.Integer(
        load_default=DEFAULT_URL_EXPIRY,
        validate=validate.Range(min=1, max=MAX_URL_EXPIRY),
        metadata={"description": "seconds a signed URL of a private file stays valid"},
    )
    local = fields.Nested(LocalConfig, load_default=lambda: LocalConfig().load({}))
    s3 = fields.Nested(S3Config, load_default=lambda: S3Config().load({}))

    @validates_schema
    def _s3_needs_a_bucket(self, data: dict[str, Any], partial: Any = False, **_: Any) -> None:
        if partial:  # a partial body is validated again, whole, after it is merged
            return
        if data.get("provider") == "s3" and not (data.get("s3") or {}).get("bucket"):
            raise ValidationError("provider s3 needs s3.bucket", field_name="s3")


def type_allowed(content_type: str, allowed: list[str]) -> bool:
    """``allowed`` empty means everything; entries are exact types or ``major/*`` / ``*/*``."""
    if not allowed:
        return True
    major = content_type.split("/", 1)[0]
    return any(p == "*/*" or p == content_type or p == f"{major}/*" for p in (a.lower() for a in allowed))
