"""Admin routes of backups: ``/admin/backups`` (list, start, download, delete, upload, restore)."""

from __future__ import annotations

from flask import send_file
from flask_smorest.fields import Upload
from marshmallow import Schema, fields, validate

from .. import current
from ..credentials import admin_required
from ..errors import ErrorSchema
from ..http import Blueprint, body_limit
from . import jobs

blp = Blueprint("backups", __name__, description="Backups and restore of the whole state: tables and stored files")

UPLOAD_LIMIT = 1 << 40  # an archive holds every stored file: no limit below the disk's


class BackupSchema(Schema):
    name = fields.String(required=True)
    size = fields.Integer(allow_none=True)
    createdAt = fields.String()
    status = fields.String(validate=validate.OneOf(["running", "done", "failed"]))
    error = fields.String()


class BackupUploadForm(Schema):
    """The multipart body of an upload: the archive as the part ``file`` (werkzeug spools it to disk)."""

    file = Upload(required=True, metadata={"description": "the archive (a zip file made by a Trellis backup)"})


class RestoreSchema(Schema):
    name = fields.String(required=True, metadata={"description": "the archive restored"})
    status = fields.String(required=True, validate=validate.OneOf(["running", "done", "failed"]))
    startedAt = fields.String(required=True)
    finishedAt = fields.String()
    error = fields.String()


class BackupListSchema(Schema):
    backups = fields.List(fields.Nested(BackupSchema), required=True)
    count = fields.Integer(required=True)
    restore = fields.Nested(RestoreSchema, allow_none=True, metadata={"description": "the latest restore"})


class StartedSchema(Schema):
    name = fields.String(required=True)
    status = fields.String(required=True)


_NAME = {"name": {"description": "the archive's name (`….zip`)", "schema": {"type": "string"}}}


@blp.route("/admin/backups", methods=["GET"])
@admin_required
@blp.response(200, BackupListSchema)
def list_backups():
    """Every backup, newest first, and the latest restore; a backup or restore whose process died is `failed`."""
    backups = jobs.listing()
    return {"backups": backups, "count": len(backups), "restore": jobs.restore_state()}


@blp.route("/admin/backups", methods=["POST"])
@admin_required
@blp.response(202, StartedSchema)
@blp.alt_response(409, schema=ErrorSchema, description="A restore is running")
def start_backup():
    """Start a backup of every table and stored file; it is written in the background (see the list)."""
    name = jobs.start_backup(current.app())
    return {"name": name, "status": "running"}


@blp.route("/admin/backups/upload", methods=["POST"])
@admin_required
@body_limit(UPLOAD_LIMIT)
@blp.arguments(BackupUploadForm, location="files")
@blp.response(201, BackupSchema)
@blp.alt_response(400, schema=ErrorSchema, description="Not a usable Trellis backup (damaged, truncated, foreign)")
@blp.alt_response(409, schema=ErrorSchema, description="A backup of that name exists, or the disk is full")
def upload_backup(form: dict):
    """Add an archive (multipart `file`), kept once it is verified whole."""
    upload = form["file"]
    return jobs.upload(upload.stream, upload.filename)


@blp.route("/admin/backups/<string:name>", methods=["GET"])
@admin_required
@blp.doc(parameters=[{"in": "path", "name": "name", **_NAME["name"]}])
@blp.response(200, description="The archive (a zip file; `Range` requests are honoured)")
@blp.alt_response(404, schema=ErrorSchema, description="No finished backup of that name")
def download_backup(name: str):
    """Download an archive."""
    path = jobs.done_path(name)
    return send_file(path, mimetype="application/zip", as_attachment=True, download_name=name, conditional=True)


@blp.route("/admin/backups/<string:name>", methods=["DELETE"])
@admin_required
@blp.response(204)
@blp.alt_response(404, schema=ErrorSchema, description="No backup of that name")
@blp.alt_response(409, schema=ErrorSchema, description="It is still being written")
def delete_backup(name: str):
    """Delete an archive and its record."""
    jobs.delete(name)


@blp.route("/admin/backups/<string:name>/restore", methods=["POST"])
@admin_required
@blp.response(202, StartedSchema)
@blp.alt_response(400, schema=ErrorSchema, description="The archive is foreign or from newer code")
@blp.alt_response(404, schema=ErrorSchema, description="No finished backup of that name")
@blp.alt_response(409, schema=ErrorSchema, description="Another restore is running, or a backup is being written")
def restore_backup(name: str):
    """Start replacing every table and stored file by the archive's. It runs in the background: `restore`
    in `GET /admin/backups` says when it is done (from then on every process serves the restored state)
    or why it failed (the previous state is then in place)."""
    jobs.start_restore(current.app(), name)
    return {"name": name, "status": "running"}
