"""``/storage/uploads``: the tus 1.0.0 protocol (core, creation, creation-with-upload, termination, expiration,
checksum with sha1, concatenation), so tus-js-client, Uppy and tuspy work unmodified, parallel uploads included.
Requests and answers are headers; errors keep the one JSON error shape (tus clients read only the status). The
work is in ``uploads.py`` and ``concatenation.py``."""

from __future__ import annotations

import base64
import re
from email.utils import format_datetime
from typing import Any

from flask import Response, request, url_for

from trellis.credentials import require_user, user_required
from trellis.errors import APIError, ErrorSchema, bad_request
from trellis.http import Blueprint, body_limit

from . import concatenation, placement, stored_parts, uploads
from .backends import LocalBackend
from .models import Upload

OFFSET_STREAM = "application/offset+octet-stream"
_DIGITS = re.compile(r"^[0-9]{1,19}$")

blp = Blueprint(
    "storage_uploads", __name__, description="Resumable uploads of the Storage module (tus 1.0.0: tus.io/protocols)"
)


@blp.after_request
def _tus_resumable(response: Response) -> Response:
    """Every answer of the tus routes names the protocol version, errors included."""
    response.headers["Tus-Resumable"] = uploads.TUS_VERSION
    response.headers["Cache-Control"] = "no-store"
    return response


def _chunk_limit() -> int:
    """A chunk is at most a whole file (the upload's own length is checked as it arrives)."""
    return placement.config()["maxFileSize"]


def _header(name: str, description: str, *, required: bool = False, pattern: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    if pattern:
        schema["pattern"] = pattern
    return {"in": "header", "name": name, "required": required, "description": description, "schema": schema}


_VERSION = _header("Tus-Resumable", "the protocol version: 1.0.0", required=True)
_OFFSET_HEADER = {"Upload-Offset": {"description": "bytes stored so far", "schema": {"type": "integer"}}}
_EXPIRES_HEADER = {
    "Upload-Expires": {
        "description": "when an unfinished upload is removed (RFC 9110 date)",
        "schema": {"type": "string"},
    }
}
_FILE_HEADER = {
    "Trellis-File-Id": {"description": "the file's id, once the last byte is stored", "schema": {"type": "string"}}
}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": ErrorSchema}}}


_ERRORS = {
    400: _error("A header is missing or malformed"),
    404: _error("No such upload of yours (or it expired)"),
    410: _error("The upload's stored bytes are gone (restored from a backup without them): start it again"),
    412: _error("Tus-Resumable is not 1.0.0 (Tus-Version lists what is supported)"),
    423: _error("Another request is writing to the upload; try again"),
}


def _check_version() -> None:
    if request.headers.get("Tus-Resumable") != uploads.TUS_VERSION:
        raise APIError(
            412,
            f"Tus-Resumable must be {uploads.TUS_VERSION}",
            name="PRECONDITION_FAILED",
            headers={"Tus-Version": uploads.TUS_VERSION},
        )


def _number(name: str) -> int:
    value = request.headers.get(name)
    if value is None:
        raise bad_request(f"The {name} header is required", {name: ["Missing"]})
    if not _DIGITS.match(value.strip()):
        raise bad_request(f"{name} must be a non-negative integer", {name: ["Not a non-negative integer"]})
    return int(value)


def _expires(upload: Upload) -> str:
    return format_datetime(upload.expires_at, usegmt=True)


def _metadata(upload: Upload) -> str:
    """``Upload-Metadata`` as HEAD repeats it: exactly what the creator sent. An upload created before the header
    was kept repeats what was kept of it (name, folder, visibility)."""
    if upload.metadata_header is not None:
        return upload.metadata_header
    pairs = {"filename": upload.filename, "folder": upload.folder_id}
    if upload.is_public is not None:
        pairs["isPublic"] = "true" if upload.is_public else "false"
    return ",".join(f"{k} {base64.b64encode(v.encode()).decode()}" for k, v in pairs.items() if v)


def _state_headers(upload: Upload) -> dict[str, str]:
    headers = {"Upload-Offset": str(upload.offset)}
    if upload.file_id is None:
        headers["Upload-Expires"] = _expires(upload)
    else:
        headers["Trellis-File-Id"] = upload.file_id
    return headers


def _body_length() -> int | None:
    """The chunk's length: ``Content-Length``, or None for a chunked body."""
    if request.content_length is not None:
        return request.content_length
    return None if "chunked" in request.headers.get("Transfer-Encoding", "").lower() else 0


def _checksum() -> tuple[str, bytes] | None:
    return uploads.parse_checksum(request.headers.get("Upload-Checksum"))


@blp.route("/storage/uploads", methods=["OPTIONS"])
@blp.doc(
    security=[],
    responses={
        204: {
            "description": "What this server supports",
            "headers": {
                "Tus-Version": {"description": "1.0.0", "schema": {"type": "string"}},
                "Tus-Extension": {"description": ",".join(uploads.EXTENSIONS), "schema": {"type": "string"}},
                "Tus-Max-Size": {"description": "maxFileSize in bytes", "schema": {"type": "integer"}},
                "Tus-Checksum-Algorithm": {"description": "sha1", "schema": {"type": "string"}},
            },
        }
    },
)
def capabilities():
    """The tus server's version, extensions, largest upload and checksum algorithms."""
    return Response(
        status=204,
        headers={
            "Tus-Version": uploads.TUS_VERSION,
            "Tus-Extension": ",".join(uploads.EXTENSIONS),
            "Tus-Max-Size": str(placement.config()["maxFileSize"]),
            "Tus-Checksum-Algorithm": ",".join(uploads.CHECKSUM_ALGORITHMS),
        },
    )


@blp.route("/storage/uploads", methods=["POST"])
@user_required
@body_limit(_chunk_limit)
@blp.doc(
    parameters=[
        _VERSION,
        _header("Upload-Length", "the file's size in bytes", required=True, pattern="^[0-9]+$"),
        _header(
            "Upload-Metadata",
            "comma-separated `key base64(value)`: filename, filetype (ignored: the type is sniffed), folder "
            "(one of your folders), isPublic (true/false); other keys are ignored",
        ),
        _header("Upload-Checksum", "sha1 and the base64 digest of a body sent with the creation"),
        _header(
            "Upload-Concat",
            "concatenation: `partial` (a part of a file), or `final;` and the partial uploads' URLs in order "
            "(no Upload-Length, no body: the file is made of them at once)",
        ),
    ],
    requestBody={
        "required": False,
        "content": {OFFSET_STREAM: {"schema": {"type": "string", "format": "binary"}}},
        "description": "optional (creation-with-upload): the first bytes",
    },
    responses={
        201: {
            "description": "Created; `Location` is the upload's URL",
            "headers": {
                "Location": {"description": "the upload's URL", "schema": {"type": "string"}},
                **_OFFSET_HEADER,
                **_EXPIRES_HEADER,
            },
        },
        413: _error("Upload-Length is over maxFileSize"),
        415: _error("The first bytes are of a type not in allowedTypes"),
        460: _error("The body does not match Upload-Checksum"),
        **_ERRORS,
        400: _error(
            "A header is missing or malformed, or a final upload names uploads that are not your complete partial uploads"
        ),
        409: _error("A final upload names a partial upload that is part of another one"),
    },
)
def create():
    """Create an upload (tus `creation`), optionally with its first bytes (`creation-with-upload`)."""
    _check_version()
    concat = request.headers.get("Upload-Concat")
    sources = concatenation.parse(concat) if concat is not None else None
    if sources is not None:
        return _create_final(sources)
    if "Upload-Defer-Length" in request.headers:
        raise bad_request(
            "Upload-Defer-Length is not supported: send Upload-Length", {"Upload-Defer-Length": ["Unsupported"]}
        )
    length = _number("Upload-Length")
    raw_metadata = request.headers.get("Upload-Metadata", "")
    metadata = uploads.parse_metadata(raw_metadata)
    body = _body_length()
    if body != 0 and request.mimetype != OFFSET_STREAM:
        raise APIError(415, f"A body sent with the creation must be {OFFSET_STREAM}")
    if body is not None and body > length:
        raise APIError(413, f"The body of {body} bytes goes past Upload-Length ({length})")
    checksum = _checksum()
    upload = uploads.create(
        require_user().id, length, metadata, raw_metadata, concat="partial" if concat is not None else None
    )
    if body != 0:
        try:
            upload = uploads.append(upload, 0, request.stream, body, checksum)
        except BaseException:
            uploads.discard_new(upload)  # a client that never learnt its Location cannot resume it
            raise
    headers = {"Location": _location(upload.id), **_state_headers(upload)}
    return Response(status=201, headers=headers)


def _location(upload_id: str) -> str:
    return url_for("storage_uploads.upload_state", uploadId=upload_id, _external=True)


def _create_final(sources: list[str]) -> Response:
    """tus ``concatenation``: the final upload of the partial uploads ``sources``, made into its file at once."""
    if _body_length() != 0:
        raise bad_request("A final upload takes no body: its bytes are its partial uploads'", {"body": ["Not empty"]})
    raw_metadata = request.headers.get("Upload-Metadata", "")
    metadata = uploads.parse_metadata(raw_metadata)
    stored_parts.require_partials(require_user().id, sources)
    upload = concatenation.create_final(require_user().id, sources, metadata, raw_metadata)
    headers = {"Location": _location(upload.id), "Upload-Length": str(upload.length), **_state_headers(upload)}
    return Response(status=201, headers=headers)


def _concat_header(upload: Upload) -> str | None:
    """``Upload-Concat`` as HEAD answers it: ``partial``, or ``final;`` and the partial uploads' URLs."""
    if upload.concat == "final":
        return "final;" + " ".join(_location(part) for part in upload.concat_parts or ())
    return upload.concat


@blp.route("/storage/uploads/<string:uploadId>", methods=["HEAD"])
@user_required
@blp.doc(
    parameters=[_VERSION],
    responses={
        200: {
            "description": "The upload's state",
            "headers": {
                **_OFFSET_HEADER,
                "Upload-Length": {"description": "the file's size", "schema": {"type": "integer"}},
                "Upload-Metadata": {"description": "as the creator sent it", "schema": {"type": "string"}},
                **_EXPIRES_HEADER,
                **_FILE_HEADER,
            },
        },
        **_ERRORS,
    },
)
def upload_state(uploadId: str):
    """How many bytes are stored (`Upload-Offset`); a finished upload also names its file (`Trellis-File-Id`)."""
    _check_version()
    upload = uploads.find(uploadId, require_user().id)
    stored_parts.require(upload)  # restored without its bytes: its client starts again (tus clients do on a 4xx)
    if upload.file_id is None and upload.concat == "final":
        stored_parts.require_partials(upload.owner, list(upload.concat_parts or ()))
        upload = concatenation.complete(upload)  # a request that was copying its partial uploads died
    elif upload.file_id is None and upload.offset == upload.length:
        upload = uploads.finish(upload)  # its last chunk was stored by a request that died before finishing
    headers = {"Upload-Length": str(upload.length), **_state_headers(upload)}
    concat = _concat_header(upload)
    if concat:
        headers["Upload-Concat"] = concat
    metadata = _metadata(upload)
    if metadata:
        headers["Upload-Metadata"] = metadata
    return Response(status=200, headers=headers)


@blp.route("/storage/uploads/<string:uploadId>", methods=["PATCH"])
@user_required
@body_limit(_chunk_limit)
@blp.doc(
    parameters=[
        _VERSION,
        _header("Upload-Offset", "where the chunk starts: the upload's offset", required=True, pattern="^[0-9]+$"),
        _header("Upload-Checksum", "sha1 and the base64 digest of the chunk"),
    ],
    requestBody={
        "required": True,
        "content": {OFFSET_STREAM: {"schema": {"type": "string", "format": "binary"}}},
    },
    responses={
        204: {"description": "Stored", "headers": {**_OFFSET_HEADER, **_EXPIRES_HEADER, **_FILE_HEADER}},
        403: _error("A final upload (concatenation) takes no PATCH"),
        409: _error("Upload-Offset is not the upload's offset, or the upload is complete"),
        413: _error("The chunk goes past Upload-Length"),
        415: _error(f"The body is not {OFFSET_STREAM}, or the file's type is not in allowedTypes"),
        460: _error("The chunk does not match Upload-Checksum"),
        **_ERRORS,
    },
)
def append(uploadId: str):
    """Append a chunk at `Upload-Offset`; the last one creates the file (`Trellis-File-Id`)."""
    _check_version()
    if request.mimetype != OFFSET_STREAM:
        raise APIError(415, f"A chunk must be sent as {OFFSET_STREAM}")
    offset = _number("Upload-Offset")
    checksum = _checksum()
    upload = uploads.find(uploadId, require_user().id)
    where = stored_parts.as_row(upload)
    if isinstance(uploads.upload_backend(upload), LocalBackend):
        stored_parts.require(upload)  # a look at one file: else the append would pad what is missing
    try:
        upload = uploads.append(upload, offset, request.stream, _body_length(), checksum)
    except APIError as exc:
        if exc.status >= 500:
            stored_parts.require(upload, where=where)  # S3 is asked only once a write failed
        raise
    return Response(status=204, headers=_state_headers(upload))


@blp.route("/storage/uploads/<string:uploadId>", methods=["DELETE"])
@user_required
@blp.doc(
    parameters=[_VERSION],
    responses={
        204: {"description": "The upload and its stored bytes are gone"},
        409: _error("The upload is complete (delete its file instead)"),
        **_ERRORS,
    },
)
def terminate(uploadId: str):
    """End an unfinished upload (tus `termination`): its stored bytes are removed."""
    _check_version()
    upload = uploads.find(uploadId, require_user().id)
    if stored_parts.lost(upload):
        uploads.remove(upload)  # nothing stored to lock or to wait for: its row goes
    else:
        uploads.terminate(upload)
    return Response(status=204)
