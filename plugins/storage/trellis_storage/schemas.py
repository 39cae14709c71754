"""Request and response schemas (validation and the OpenAPI document come from these)."""

from __future__ import annotations

import re
from typing import Any

from flask_smorest.fields import Upload
from marshmallow import Schema, ValidationError, fields, validate
from werkzeug.datastructures import FileStorage

from trellis.db import isoformat
from trellis.fields import JsonBoolean
from trellis.http import ListArgs

from .models import File, Folder
from .urls import record_url

# A folder name is a label, not a path: no separators, no control characters, not "." or "..".
_FOLDER_NAME = re.compile(r"^(?!\.{1,2}$)[^/\\\x00-\x1f\x7f]{1,255}$")


class FileField(Upload):
    """A multipart file part (a plain form value of the same name is refused)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> FileStorage:
        if not isinstance(value, FileStorage):
            raise ValidationError("Must be a file part (multipart/form-data with a filename)")
        if not value.filename:
            raise ValidationError("No file was selected")
        return value


class UploadForm(Schema):
    file = FileField(required=True, metadata={"description": "the file"})
    folder = fields.String(
        load_default=None, allow_none=True, metadata={"description": "id of one of your folders (optional)"}
    )
    isPublic = fields.Boolean(
        load_default=None,
        allow_none=True,
        metadata={"description": "public files get a URL served without credentials; default: the folder's"},
    )


class AdminUploadForm(UploadForm):
    owner = fields.String(required=True, metadata={"description": "id of the user who will own the file"})
    folder = fields.String(
        load_default=None, allow_none=True, metadata={"description": "id of one of the owner's folders (optional)"}
    )


class UploadedSchema(Schema):
    id = fields.String(required=True)
    url = fields.String(required=True)
    name = fields.String(required=True)
    size = fields.Integer(required=True)
    contentType = fields.String(attribute="content_type")
    isPublic = fields.Boolean(attribute="is_public")
    folder = fields.String(attribute="folder_id", allow_none=True)


class FileSchema(Schema):
    _id = fields.String(attribute="id", required=True)
    name = fields.String(required=True, metadata={"description": "sanitised name (ASCII, safe in paths)"})
    displayName = fields.String(attribute="display_name", metadata={"description": "the name as uploaded"})
    folder = fields.String(attribute="folder_id", allow_none=True)
    owner = fields.String()
    size = fields.Integer()
    contentType = fields.String(attribute="content_type", metadata={"description": "sniffed from the bytes"})
    sha256 = fields.String()
    isPublic = fields.Boolean(attribute="is_public")
    provider = fields.String(attribute="backend", metadata={"description": "backend holding the bytes: local | s3"})
    url = fields.Method("_url")
    createdAt = fields.Method("_created")
    updatedAt = fields.Method("_updated")

    def _url(self, record: File) -> str:
        return record_url(record)

    def _created(self, record: File | Folder) -> str | None:
        return isoformat(record.created_at)

    def _updated(self, record: File | Folder) -> str | None:
        return isoformat(record.updated_at)


class FolderCreateSchema(Schema):
    name = fields.String(required=True, validate=validate.Regexp(_FOLDER_NAME, error="Not a valid folder name"))
    isPublic = JsonBoolean(load_default=False)
    parent = fields.String(load_default=None, allow_none=True, metadata={"description": "id of a folder of yours"})


class FolderSchema(Schema):
    _id = fields.String(attribute="id", required=True)
    name = fields.String(required=True)
    isPublic = fields.Boolean(attribute="is_public")
    parent = fields.String(attribute="parent_id", allow_none=True)
    owner = fields.String()
    createdAt = fields.Method("_created")
    updatedAt = fields.Method("_updated")

    _created = FileSchema._created
    _updated = FileSchema._updated


class FolderContentsSchema(Schema):
    folder = fields.Nested(FolderSchema, required=True)
    folders = fields.List(fields.Nested(FolderSchema), required=True, metadata={"description": "sub-folders"})
    files = fields.List(fields.Nested(FileSchema), required=True, metadata={"description": "one page of files"})
    count = fields.Integer(required=True, metadata={"description": "files in the folder, before skip/limit"})


class FolderDeleteArgs(Schema):
    recursive = fields.Boolean(load_default=False, metadata={"description": "also delete everything inside"})


class UrlSchema(Schema):
    url = fields.String(required=True)
    isPublic = fields.Boolean(required=True)
    expiresAt = fields.String(
        allow_none=True, required=True, metadata={"description": "ISO 8601; null for a public URL"}
    )


class FileListArgs(ListArgs):
    owner = fields.String()
    folder = fields.String()
    isPublic = fields.Boolean()
    contentType = fields.String()
    search = fields.String(metadata={"description": "case-insensitive part of the name"})


class FolderListArgs(ListArgs):
    owner = fields.String()
    parent = fields.String()


class CountBytesSchema(Schema):
    count = fields.Integer(required=True)
    bytes = fields.Integer(required=True)


class StatsSchema(Schema):
    count = fields.Integer(required=True, metadata={"description": "files"})
    bytes = fields.Integer(required=True, metadata={"description": "total size of all files"})
    folders = fields.Integer(required=True)
    byContentType = fields.Dict(keys=fields.String(), values=fields.Nested(CountBytesSchema), required=True)
    byProvider = fields.Dict(keys=fields.String(), values=fields.Nested(CountBytesSchema), required=True)
