"""The Functions module's routes: ``POST /functions/{name}`` (callable functions) and ``/admin/functions``."""

from __future__ import annotations

import threading
from typing import Any

from flask import current_app, request
from sqlalchemy import func, select

from trellis import db, jsonbody, ratelimit
from trellis.credentials import admin_required, identify, require_admin
from trellis.errors import ErrorSchema, not_found, unauthorized
from trellis.http import Blueprint, FreeFormSchema
from trellis.module_config import get as get_config

from . import schedules
from .models import FunctionLogEntry
from .running import Ctx, invoke, plain_json, write_log
from .schemas import (
    FunctionCallResultSchema,
    FunctionLogArgs,
    FunctionLogSchema,
    FunctionScheduleRunSchema,
    FunctionsOverviewSchema,
)
from .state import of, registry

blp = Blueprint("functions", __name__, description="Functions: server-side code from the functions folder")


@blp.route("/functions/<string:name>", methods=["POST"])
@blp.arguments(FreeFormSchema)
@blp.response(200, FunctionCallResultSchema)
@blp.alt_response(400, schema=ErrorSchema, description="The body is not a JSON object, or the function refused it")
@blp.alt_response(401, schema=ErrorSchema, description="The function needs a user (or admin) credential")
@blp.alt_response(403, schema=ErrorSchema, description="The function is for administrators, or refused the call")
@blp.alt_response(404, schema=ErrorSchema, description="No function of that name")
@blp.alt_response(429, schema=ErrorSchema, description="Too many calls from this caller")
@blp.alt_response(
    500, schema=ErrorSchema, description="FUNCTION_ERROR: the function raised or returned what JSON cannot carry"
)
def call_function(params: dict[str, Any], name: str):
    """Call a function declared with ``@function(name)``: the body is its ``params`` (a JSON object); the
    answer is ``{result}``. Each function also has its own path in this document."""
    found = registry().functions.get(name)
    if found is None:
        raise not_found(f"No function named {name!r}")
    identity = identify()
    if found.auth == "admin":
        identity = require_admin()
    elif found.auth == "user" and identity is None:
        raise unauthorized(f"Function {name!r} needs a user Bearer token")
    key = identity.id if identity is not None and identity.id else ratelimit.client_ip()
    ratelimit.check("functions-call", f"{name}:{key}", get_config("functions")["rateLimit"])
    if jsonbody.has_body(request):
        jsonbody.require_json(request, "the function's params as a JSON object")
    ctx = Ctx(identity)
    db.session.connection()  # one transaction: what the function wrote commits only if it answers
    result = invoke(lambda c, p: plain_json(name, found.function(c, p)), name, "function", (params,), ctx)
    db.session.commit()
    return {"result": result}


@blp.route("/admin/functions", methods=["GET"])
@admin_required
@blp.response(200, FunctionsOverviewSchema)
def overview():
    """The functions files (with their load errors and lines), the triggers, the callable functions and the
    schedules with their last and next runs, as this process has them loaded."""
    functions = of()
    loaded = functions.registry
    now = db.utcnow()
    runs = schedules.last_runs()
    return {
        "folder": str(functions.folder),
        "reload": functions.reloads,
        "files": [
            {
                "name": f.name,
                "loaded": f.loaded,
                "loadedAt": db.isoformat(f.loaded_at),
                **({"error": f.error} if f.error else {}),
                **({"line": f.line} if f.line else {}),
            }
            for f in loaded.files
        ],
        "triggers": [
            {"schema": t.schema, "event": t.event, "function": t.name, "file": t.file} for t in loaded.triggers
        ],
        "functions": [{"name": f.name, "auth": f.auth, "file": f.file} for f in loaded.functions.values()],
        "schedules": [
            {
                "name": s.name,
                "cron": s.cron,
                "file": s.file,
                "nextRunAt": db.isoformat(schedules.next_due(s.cron, now)),
                **({"lastRunAt": db.isoformat(runs[s.name][1])} if runs.get(s.name, (None, None))[1] else {}),
            }
            for s in loaded.schedules.values()
        ],
    }


@blp.route("/admin/functions/schedules/<string:name>/run", methods=["POST"])
@admin_required
@blp.response(202, FunctionScheduleRunSchema)
@blp.alt_response(404, schema=ErrorSchema, description="No schedule of that name")
def run_schedule(name: str):
    """Run a schedule now, in the background (its outcome goes to the function log)."""
    found = registry().schedules.get(name)
    if found is None:
        raise not_found(f"No schedule named {name!r}")
    app = current_app._get_current_object()  # type: ignore[attr-defined]

    def work() -> None:
        with app.app_context():
            schedules.run(found)

    threading.Thread(target=work, name=f"functions-run-{name}", daemon=True).start()
    return {"name": name, "started": True}


@blp.route("/admin/functions/log", methods=["GET"])
@admin_required
@blp.arguments(FunctionLogArgs, location="query")
@blp.response(200, FunctionLogSchema)
def function_log(args: dict[str, Any]):
    """The function log, newest first: every after-trigger, schedule and callable run, and every
    before-trigger that refused or failed; ``function`` and ``status`` filter it."""
    table = FunctionLogEntry.__table__
    conditions = [table.c[key] == args[key] for key in ("function", "status") if key in args]
    total = db.session.execute(select(func.count()).select_from(table).where(*conditions)).scalar_one()
    rows = db.session.execute(
        select(table)
        .where(*conditions)
        .order_by(table.c.created_at.desc(), table.c.id.desc())
        .offset(args["skip"])
        .limit(args["limit"])
    ).all()
    return {"entries": [_entry(row) for row in rows], "count": total}


def _entry(row: Any) -> dict[str, Any]:
    entry = {
        "_id": row.id,
        "function": row.function,
        "kind": row.kind,
        "status": row.status,
        "durationMs": row.duration_ms,
        "createdAt": db.isoformat(row.created_at),
    }
    for key, value in (("message", row.message), ("attempt", row.attempt), ("requestId", row.request_id)):
        if value is not None:
            entry[key] = value
    return entry


def flush_log(_error: BaseException | None = None) -> None:
    """``teardown_request``: the entries of this request's runs, once its work has committed or not."""
    write_log()
