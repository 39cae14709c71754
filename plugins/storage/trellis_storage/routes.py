"""User routes of the Storage module (``/storage/...``) and the credential-free file URLs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from marshmallow import Schema
from sqlalchemy import select
from werkzeug.datastructures import CombinedMultiDict
from werkzeug.exceptions import RequestEntityTooLarge

from trellis import audit, db
from trellis.credentials import Identity, identify, require_user, user_or_admin_required, user_required
from trellis.errors import ErrorSchema, not_found, unauthorized
from trellis.http import ArgumentsParser, Blueprint, DeletedSchema, ListArgs, body_limit, deleted, paginate
from trellis.server.formbody import FormLimitExceeded

from . import placement, service, signed_urls, urls
from .models import File, Folder
from .schemas import (
    FileSchema,
    FolderContentsSchema,
    FolderCreateSchema,
    FolderDeleteArgs,
    FolderSchema,
    UploadedSchema,
    UploadForm,
    UrlSchema,
)
from .streaming import serve
from .variants import TransformArgs, serve_image, transform_of

# Room for the multipart framing and the small form fields on top of the file itself.
FORM_OVERHEAD = 64 * 1024


class _Parser(ArgumentsParser):
    """Adds the ``multipart`` location: form fields and file parts of one multipart body, one schema."""

    __location_map__ = {**ArgumentsParser.__location_map__, "multipart": "load_multipart"}

    def load_multipart(self, req: Any, schema: Any) -> Any:
        try:
            return self._makeproxy(CombinedMultiDict([req.files, req.form]), schema)
        except FormLimitExceeded:
            raise  # too many fields, or a text field too large: its own message
        except RequestEntityTooLarge:
            raise service.too_large(placement.config()["maxFileSize"]) from None


F = TypeVar("F", bound=Callable[..., Any])


class StorageBlueprint(Blueprint):
    ARGUMENTS_PARSER = _Parser()
    DEFAULT_LOCATION_CONTENT_TYPE_MAPPING = {
        **Blueprint.DEFAULT_LOCATION_CONTENT_TYPE_MAPPING,
        "multipart": "multipart/form-data",
    }

    def upload_form(self, form: type[Schema]) -> Callable[[F], F]:
        """What every upload route shares: its body limit, its multipart form, its documented refusals."""

        def decorate(func: F) -> F:
            for decorator in (
                self.alt_response(500, schema=ErrorSchema, description="PROVIDER_ERROR: the storage backend failed"),
                self.alt_response(415, schema=ErrorSchema, description="The (sniffed) type is not in allowedTypes"),
                self.alt_response(
                    413,
                    schema=ErrorSchema,
                    description="The file is larger than maxFileSize, or the form has over 1,000 fields",
                ),
                self.arguments(form, location="multipart"),
                body_limit(upload_limit),
            ):
                func = decorator(func)
            return func

        return decorate


blp = StorageBlueprint("storage", __name__, description="Files and folders of users; public and signed URLs")

_BINARY = {"schema": {"type": "string", "format": "binary"}}
_FILE_RESPONSES = {
    # Sent with the file's stored content type; declared as bytes (a generator's download returns bytes).
    200: {
        "description": "The file's bytes, with its stored content type",
        "content": {"application/octet-stream": _BINARY},
    },
    206: {"description": "The requested byte range", "content": {"application/octet-stream": _BINARY}},
    304: {"description": "Not modified (If-None-Match matched the ETag)"},
    400: {
        "description": "A transform was asked of a file that is not a supported image (or a hostile one, or one too "
        "large to transform), or a parameter is out of range",
        "content": {"application/json": {"schema": ErrorSchema}},
    },
    404: {"description": "No such file, or not yours", "content": {"application/json": {"schema": ErrorSchema}}},
    416: {"description": "Range not satisfiable", "content": {"application/json": {"schema": ErrorSchema}}},
    503: {
        "description": "Too many image transforms are running or waiting in this process; retry after `Retry-After`",
        "headers": {"Retry-After": {"description": "seconds", "schema": {"type": "integer"}}},
        "content": {"application/json": {"schema": ErrorSchema}},
    },
}


def upload_limit() -> int:
    """The upload routes' body limit (checked by the core before the body is read: see ``body_limit``)."""
    return placement.config()["maxFileSize"] + FORM_OVERHEAD


def _caller() -> Identity:
    identity = identify()
    assert identity is not None  # the guards above ran
    return identity


# ------------------------------------------------------------------------------------------- files


@blp.route("/storage/upload", methods=["POST"])
@user_required
@blp.upload_form(UploadForm)
@blp.response(201, UploadedSchema)
def upload(form: dict[str, Any]):
    """Upload a file (multipart `file`, optional `folder` id and `isPublic`).

    The content type is sniffed from the bytes (by extension only when the bytes say nothing); the name
    is sanitised. Nothing is left behind when the upload fails.
    """
    record = service.store_form(form, require_user().id)
    return {
        "id": record.id,
        "url": urls.record_url(record),
        "name": record.name,
        "size": record.size,
        "content_type": record.content_type,
        "is_public": record.is_public,
        "folder_id": record.folder_id,
    }


@blp.route("/storage/file/<string:fileId>", methods=["GET"])
@user_or_admin_required
@blp.response(200, FileSchema)
@blp.alt_response(404, schema=ErrorSchema, description="No such file, or a private file of somebody else")
def get_file(fileId: str):
    """A file record (your own, a public one, or any for an admin)."""
    return service.visible_file(fileId, _caller())


def _answer(record: File, args: dict[str, Any], *, public: bool = False):
    """The file as stored, or the image transform its query asks for."""
    transform = transform_of(args)
    if transform is None:
        return serve(record, public=public)
    return serve_image(record, transform, public=public)


@blp.route("/storage/download/<string:fileId>", methods=["GET"])
@user_or_admin_required
@blp.arguments(TransformArgs, location="query")
@blp.doc(responses=_FILE_RESPONSES)
def download(args: dict[str, Any], fileId: str):
    """The file's content, streamed; honours `Range` and `If-None-Match`.

    An image (JPEG, PNG, WebP, GIF) is transformed when `width`, `height`, `fit`, `format` or `quality` is
    given: EXIF orientation applied, metadata dropped, its own `Content-Type` and `ETag`; computed once, then
    served from a cache kept beside the file.
    """
    return _answer(service.visible_file(fileId, _caller()), args)


@blp.route("/storage/file/<string:fileId>", methods=["DELETE"])
@user_or_admin_required
@blp.response(200, DeletedSchema)
@blp.alt_response(403, schema=ErrorSchema, description="A public file of somebody else")
@blp.alt_response(404, schema=ErrorSchema, description="No such file, or a private file of somebody else")
def delete_file(fileId: str):
    """Delete a file (the owner, or an admin); its bytes are removed once the record is gone."""
    record = service.own_file(fileId, _caller())
    service.delete_files([record])
    audit.record("storage", "file.delete", fileId, {"name": record.name, "owner": record.owner})  # an admin's only
    db.session.commit()
    return deleted(fileId)


@blp.route("/storage/getUrl/<string:fileId>", methods=["GET"])
@blp.arguments(TransformArgs, location="query")
@blp.response(200, UrlSchema)
@blp.alt_response(401, schema=ErrorSchema, description="A private file needs the owner's Bearer (or an admin)")
@blp.alt_response(404, schema=ErrorSchema, description="No such file, or a private file of somebody else")
@blp.doc(security=[{}, {"bearerAuth": []}, {"masterkey": []}])
def get_url(args: dict[str, Any], fileId: str):
    """A URL that serves the file without credentials.

    Public file: its stable public URL (no credentials needed to ask). Private file: the owner (Bearer)
    or an admin gets a signed URL that expires after `signedUrlExpiry` seconds (default 1 h). Image
    transform parameters (`width`, `height`, `fit`, `format`, `quality`) are carried in the URL, ready for an
    `<img src>` (a private S3 file then gets a Trellis-signed URL, which transforms, instead of S3's).
    """
    identity = identify()
    record = db.session.get(File, fileId)
    if record is not None and record.is_public:
        return {"url": urls.public_url(record, args), "isPublic": True, "expiresAt": None}
    if record is not None and identity is None:
        raise unauthorized("A private file's URL needs the owner's Bearer token or administrator credentials")
    record = service.visible_file(fileId, identity)
    url, expires = signed_urls.signed_url(record, query=args)
    return {
        "url": url,
        "isPublic": False,
        "expiresAt": db.isoformat(datetime.fromtimestamp(expires, UTC)),
    }


@blp.route("/storage/public/<string:fileId>/<string:name>", methods=["GET"])
@blp.arguments(TransformArgs, location="query")
@blp.doc(responses=_FILE_RESPONSES, security=[])
def public_file(args: dict[str, Any], fileId: str, name: str):
    """A public file, without credentials (the name is cosmetic: browsers save under it); image transforms
    as on the download route."""
    record = db.session.get(File, fileId)
    if record is None or not record.is_public:
        raise not_found("File not found")
    return _answer(record, args, public=True)


@blp.route("/storage/signed/<string:token>", methods=["GET"])
@blp.arguments(TransformArgs, location="query")
@blp.doc(
    responses={
        **_FILE_RESPONSES,
        403: {"description": "Forged or expired signature", "content": {"application/json": {"schema": ErrorSchema}}},
    },
    security=[],
)
def signed_file(args: dict[str, Any], token: str):
    """A private file through a signed URL from `getUrl` (local backend, and any file's image transforms; S3
    files' plain downloads get presigned S3 URLs). Image transforms as on the download route."""
    return _answer(signed_urls.file_from_token(token), args)


# ----------------------------------------------------------------------------------------- folders


@blp.route("/storage/folder", methods=["POST"])
@user_required
@blp.arguments(FolderCreateSchema)
@blp.response(201, FolderSchema)
@blp.alt_response(409, schema=ErrorSchema, description="You already have a folder of that name there")
def create_folder(body: dict[str, Any]):
    """Create a folder (optionally inside one of yours: `parent`)."""
    owner = require_user().id
    parent = service.target_folder(body["parent"], owner, "parent")
    return service.create_folder(owner, body["name"], body["isPublic"], parent)


@blp.route("/storage/folder/<string:folderId>", methods=["GET"])
@user_or_admin_required
@blp.arguments(ListArgs, location="query")
@blp.response(200, FolderContentsSchema)
@blp.alt_response(404, schema=ErrorSchema, description="No such folder, or a private folder of somebody else")
def get_folder(args: dict[str, Any], folderId: str):
    """A folder and its contents: `{folder, folders, files, count}`.

    `folders` lists every sub-folder; `files` is one page (`skip`/`limit`) and `count` the number of
    files in the folder. Somebody else's public folder shows only its public files and sub-folders.
    """
    identity = _caller()
    folder = service.visible_folder(folderId, identity)
    everything = service.owns(identity, folder.owner)
    files = select(File).where(File.folder_id == folder.id)
    children = select(Folder).where(Folder.parent_id == folder.id).order_by(Folder.name, Folder.id)
    if not everything:
        files = files.where(File.is_public.is_(True))
        children = children.where(Folder.is_public.is_(True))
    page, count = paginate(files, args["skip"], args["limit"], (File.created_at.desc(), File.id))
    return {
        "folder": folder,
        "folders": list(db.session.execute(children).scalars()),
        "files": page,
        "count": count,
    }


@blp.route("/storage/folder/<string:folderId>", methods=["DELETE"])
@user_or_admin_required
@blp.arguments(FolderDeleteArgs, location="query")
@blp.response(200, DeletedSchema)
@blp.alt_response(403, schema=ErrorSchema, description="A public folder of somebody else")
@blp.alt_response(404, schema=ErrorSchema, description="No such folder, or a private folder of somebody else")
@blp.alt_response(409, schema=ErrorSchema, description="Not empty (use ?recursive=true)")
def delete_folder(args: dict[str, Any], folderId: str):
    """Delete a folder; a non-empty one only with `?recursive=true` (files and sub-folders go too)."""
    folder = service.own_folder(folderId, _caller())
    service.delete_folder(folder, args["recursive"])
    return deleted(folderId)
