"""Administrative routes of the Storage module (``/admin/storage/...``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from trellis import db
from trellis.credentials import admin_required
from trellis.errors import APIError, bad_request
from trellis.http import list_schema, paginate
from trellis.module_config import admin_config_routes

from . import service
from .config import StorageConfig
from .models import File, Folder
from .placement import MODULE
from .routes import StorageBlueprint
from .schemas import AdminUploadForm, FileListArgs, FileSchema, FolderListArgs, FolderSchema, StatsSchema

blp = StorageBlueprint(
    "storage_admin",
    __name__,
    description="Storage administration: all files, uploads for users, statistics, configuration",
)

FileList = list_schema("StorageFileList", "files", FileSchema)
FolderList = list_schema("StorageFolderList", "folders", FolderSchema)


@blp.route("/admin/storage/files", methods=["GET"])
@admin_required
@blp.arguments(FileListArgs, location="query")
@blp.response(200, FileList)
def list_files(args: dict[str, Any]):
    """Every file, newest first; filters `owner`, `folder`, `isPublic`, `contentType`, `search`."""
    query = select(File)
    if "owner" in args:
        query = query.where(File.owner == args["owner"])
    if "folder" in args:
        query = query.where(File.folder_id == args["folder"])
    if "isPublic" in args:
        query = query.where(File.is_public.is_(args["isPublic"]))
    if "contentType" in args:
        query = query.where(File.content_type == args["contentType"])
    if args.get("search"):
        query = query.where(func.lower(File.display_name).contains(args["search"].lower(), autoescape=True))
    files, count = paginate(query, args["skip"], args["limit"], (File.created_at.desc(), File.id))
    return {"files": files, "count": count}


@blp.route("/admin/storage/upload", methods=["POST"])
@admin_required
@blp.upload_form(AdminUploadForm)
@blp.response(201, FileSchema)
def upload_for_user(form: dict[str, Any]):
    """Upload a file on behalf of a user (multipart `file`, `owner`, optional `folder` and `isPublic`).

    `POST /storage/upload` takes a user token (the uploader owns the file); here an administrator picks the
    owner. The same rules apply: size limit, sniffed type, allowed types, the folder must be the owner's.
    Answers the file record as `GET /storage/file/{fileId}` does; the upload is in the audit log.
    """
    from trellis_authentication.service import get_user  # the module this one requires

    try:
        get_user(form["owner"])
    except APIError as exc:
        if exc.status != 404:
            raise
        raise bad_request("No such user", {"owner": ["No user with this id"]}) from None
    return service.store_form(form, form["owner"])


@blp.route("/admin/storage/folders", methods=["GET"])
@admin_required
@blp.arguments(FolderListArgs, location="query")
@blp.response(200, FolderList)
def list_folders(args: dict[str, Any]):
    """Every folder, newest first; filters `owner`, `parent`."""
    query = select(Folder)
    if "owner" in args:
        query = query.where(Folder.owner == args["owner"])
    if "parent" in args:
        query = query.where(Folder.parent_id == args["parent"])
    folders, count = paginate(query, args["skip"], args["limit"], (Folder.created_at.desc(), Folder.id))
    return {"folders": folders, "count": count}


@blp.route("/admin/storage/stats", methods=["GET"])
@admin_required
@blp.response(200, StatsSchema)
def stats():
    """Files and bytes in total, per content type and per backend; the number of folders."""
    count, total = db.session.execute(select(func.count(File.id), func.coalesce(func.sum(File.size), 0))).one()

    def grouped(column: Any) -> dict[str, dict[str, int]]:
        rows = db.session.execute(
            select(column, func.count(File.id), func.coalesce(func.sum(File.size), 0)).group_by(column)
        )
        return {key: {"count": n, "bytes": int(size)} for key, n, size in rows}

    return {
        "count": count,
        "bytes": int(total),
        "folders": db.session.execute(select(func.count(Folder.id))).scalar_one(),
        "byContentType": grouped(File.content_type),
        "byProvider": grouped(File.backend),
    }


# Switching `provider` affects new uploads only; existing files stay readable where they are.
admin_config_routes(
    blp,
    MODULE,
    StorageConfig,
    '`{"provider": "s3", "s3": {bucket, region, endpointUrl, accessKeyId, secretAccessKey}}`',
)
