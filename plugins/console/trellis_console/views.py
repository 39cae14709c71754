"""The console's server side: page shells, static assets, security headers, and one upload helper.

Pages carry no data: they are static shells that the JavaScript in ``static/`` fills from the REST API
with the administrator's Bearer token (kept in ``sessionStorage``, see README.md). So nothing here reads
or writes a module's records, except :func:`storage_upload`, which exists because the Storage API has no
administrator upload (see its docstring).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from flask import Blueprint, Flask, Response, current_app, redirect, render_template, request, url_for
from marshmallow import Schema, fields

from trellis.credentials import ADMIN_SECURITY, require_admin
from trellis.errors import APIError, bad_request, not_found
from trellis.http import body_limit

MODULE = "console"

# script-src 'self' and no 'unsafe-inline' anywhere: the only code that runs is /console/static/*.js.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
}


@dataclass(frozen=True)
class Page:
    slug: str
    title: str
    module: str | None  # the module the page administers; hidden when that module is not loaded


PAGES = (
    Page("modules", "Modules", None),
    Page("database", "Database", "database"),
    Page("users", "Users", "authentication"),
    Page("email", "Email", "email"),
    Page("forms", "Forms", "forms"),
    Page("chat", "Chat", "chat"),
    Page("storage", "Storage", "storage"),
    Page("sms", "SMS", "sms"),
    Page("push", "Push notifications", "pushNotifications"),
    Page("audit", "Audit log", None),
)

bp = Blueprint("console", __name__, url_prefix="/console", template_folder="templates", static_folder="static")


def _trellis() -> Any:
    return current_app.extensions["trellis"]


def available_pages() -> list[Page]:
    trellis = _trellis()
    return [page for page in PAGES if page.module is None or trellis.module(page.module) is not None]


@bp.before_request
def _only_when_active() -> None:
    if not _trellis().configs.is_active(MODULE):
        raise not_found("The console module is not active")


@bp.get("/")
def index() -> Response:
    return redirect(url_for("console.page", name="modules"))


@bp.get("/login")
def login() -> str:
    return render_template("console/login.html", page="login", title="Sign in")


@bp.get("/<string:name>")
def page(name: str) -> str:
    pages = available_pages()
    current = next((p for p in pages if p.slug == name), None)
    if current is None:
        raise not_found(f"No console page named {name!r}")
    config = _trellis().configs.get(MODULE)
    loaded = [m.name for m in _trellis().modules]
    return render_template(
        f"console/{name}.html",
        page=name,
        title=current.title,
        pages=pages,
        page_size=config["pageSize"],
        loaded=loaded,
    )


def _upload_limit() -> int:
    if _trellis().module("storage") is None:
        return current_app.config["MAX_CONTENT_LENGTH"]
    from trellis_storage.routes import upload_limit

    return upload_limit()


@bp.post("/storage/upload")
@body_limit(_upload_limit)
def storage_upload() -> tuple[dict[str, Any], int]:
    """Upload a file on behalf of a user (multipart ``file``, ``owner``, optional ``folder``, ``isPublic``).

    ``POST /storage/upload`` takes a user token only (the uploader owns the file), so an administrator
    cannot call it. This route runs the Storage module's own form schema and service functions (size
    limit, type sniffing, allowed types, folder ownership, all-or-nothing write) with the owner the
    administrator picked; it adds no rule of its own.
    """
    require_admin()
    if _trellis().module("storage") is None:
        raise not_found("The storage module is not loaded")
    from trellis_authentication import service as users  # storage requires authentication
    from trellis_storage import service as storage
    from trellis_storage.routes import StorageBlueprint

    # The Storage module's own multipart parser and form schema (plus the owner).
    form = StorageBlueprint.ARGUMENTS_PARSER.parse(_owned_upload_form()(), request, location="multipart")
    try:
        users.get_user(form["owner"])
    except APIError as exc:
        if exc.status != 404:
            raise
        raise bad_request("No such user", {"owner": ["No user with this id"]}) from None
    folder = storage.target_folder(form["folder"], form["owner"], "folder")
    upload = form["file"]
    record = storage.store_upload(
        upload.stream, upload.filename, owner=form["owner"], folder=folder, is_public=form["isPublic"]
    )
    from trellis_storage.schemas import FileSchema

    return FileSchema().dump(record), 201


@functools.cache
def _owned_upload_form() -> type[Schema]:
    from trellis_storage.schemas import UploadForm

    class OwnedUploadForm(UploadForm):
        owner = fields.String(required=True, metadata={"description": "id of the user who will own the file"})

    return OwnedUploadForm


def openapi_paths(app: Flask) -> dict[str, Any]:
    """The console's API route in /openapi.json: the upload helper. Its HTML pages, scripts and style
    sheet are for browsers, not API clients, and are left out (a generator would make functions of them)."""
    content = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    errors = {
        str(status): {"description": _ERRORS[status], "content": content} for status in (400, 401, 403, 404, 413, 415)
    }
    upload_form = {
        "type": "object",
        "required": ["file", "owner"],
        "properties": {
            "file": {"type": "string", "format": "binary"},
            "owner": {"type": "string", "description": "id of the user who will own the file"},
            "folder": {"type": "string", "description": "id of one of the owner's folders"},
            "isPublic": {"type": "boolean", "description": "default: the folder's"},
        },
    }
    upload = {
        "tags": ["console"],
        "operationId": "consoleUploadFile",
        "summary": "Upload a file on behalf of a user (the Storage module's rules apply)",
        "security": ADMIN_SECURITY,
        "requestBody": {"required": True, "content": {"multipart/form-data": {"schema": upload_form}}},
        "responses": {
            "201": {
                "description": "The file record, as `GET /storage/file/{fileId}` answers it",
                "content": {"application/json": {"schema": {"type": "object"}}},
            },
            **errors,
        },
    }
    return {
        "tags": [{"name": "console", "description": "The admin console's upload helper (its pages are at /console)"}],
        "paths": {"/console/storage/upload": {"post": upload}},
    }


_ERRORS = {
    400: "Invalid form (`errors` names the fields)",
    401: "Missing or invalid credentials",
    403: "Not an administrator",
    404: "Not found, or the console (or the Storage module) is not active or loaded",
    413: "The file is larger than the Storage module's maxFileSize",
    415: "The file's type is not in the Storage module's allowedTypes",
}


def _security_headers(response: Response) -> Response:
    # On every /console response, including 404s for paths no console route matched.
    if request.path == "/console" or request.path.startswith("/console/"):
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        if response.mimetype == "text/html":
            response.headers["Cache-Control"] = "no-store"
    return response


def init_app(app: Flask) -> None:
    app.register_blueprint(bp)
    app.after_request(_security_headers)
