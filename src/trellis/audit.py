"""The audit log: who changed what, recorded in the transaction of the change.

A module calls :func:`record` where it writes an administrative change, before its commit, on the same
session (``trellis.db.session``): the entry commits with the change, and a change that rolls back leaves
no entry. The actor comes from the request's credential (masterkey, or an admin token: id and username);
a change made with a user's token is not administrative and records nothing, so a service shared by a
user route and an admin route can call :func:`record` unconditionally. Changes made by ``flask trellis``
commands (no request) are recorded with the actor ``{"type": "cli"}``.

A few changes matter whoever makes them: who may read a document is changed by its owner sharing it as
much as by an administrator granting a relation. Their service passes ``users=True`` and a user's change is
recorded too, with the actor ``{"type": "user", "id": <userId>}``.

``changes`` is what the caller sent, with secrets masked by the marshmallow schema that marks them
(``metadata={"secret": True}``, see ``trellis.redact``).
"""

from __future__ import annotations

import json
import logging
from datetime import UTC
from typing import Any

from flask import g, has_request_context, request
from marshmallow import Schema, fields, validate
from sqlalchemy import Select, or_, select

from . import db
from .credentials import admin_required, identify
from .errors import APIError
from .http import Blueprint, ListArgs, paginate
from .models import Admin, AuditEntry
from .redact import redact

log = logging.getLogger("trellis.audit")


def actor(users: bool = False) -> dict[str, Any] | None:
    """Who is making this change: ``{type: masterkey|admin|cli, id?, username?}``; for a user
    ``{type: user, id}`` with ``users``, else None (and None for nobody)."""
    if not has_request_context():
        return {"type": "cli"}
    try:
        identity = identify()
    except APIError:  # an invalid credential on a public route is nobody's administrative change
        return None
    if identity is not None and identity.kind == "user" and users:
        return {"type": "user", "id": identity.id}
    if identity is None or not identity.is_admin:
        return None
    if identity.kind == "master":
        return {"type": "masterkey"}
    admin = db.session.get(Admin, identity.id)
    return {"type": "admin", "id": identity.id, "username": admin.username if admin is not None else None}


def record(
    module: str,
    action: str,
    target: str | None = None,
    changes: Any = None,
    *,
    schema: Schema | type[Schema] | None = None,
    users: bool = False,
) -> AuditEntry | None:
    """Add an audit entry to the current session (the caller commits it with its change).

    ``action`` is ``<thing>.<verb>`` (``config.update``, ``user.block``); ``target`` the id or name changed;
    ``changes`` what was asked (JSON-able; secret fields of ``schema`` are masked). Returns None when the
    caller is not an administrator (nothing is recorded), unless ``users`` and the caller is a signed-in user.
    """
    who = actor(users)
    if who is None:
        return None
    safe = redact(changes, schema)
    entry = AuditEntry(
        id=db.new_id(),
        created_at=db.utcnow(),
        actor_type=who["type"],
        actor_id=who.get("id"),
        actor_username=who.get("username"),
        module=module,
        action=action,
        target=None if target is None else str(target)[:255],
        changes=safe,
        ip=request.remote_addr if has_request_context() else None,
        request_id=g.get("request_id") if has_request_context() else None,
    )
    db.session.add(entry)
    log.info("audit %s %s %s by %s: %s", module, action, target or "-", who["type"], json.dumps(safe, default=str))
    return entry


def entry_dict(entry: AuditEntry) -> dict[str, Any]:
    who: dict[str, Any] = {"type": entry.actor_type}
    if entry.actor_id is not None:
        who["id"] = entry.actor_id
    if entry.actor_username is not None:
        who["username"] = entry.actor_username
    return {
        "_id": entry.id,
        "actor": who,
        "action": entry.action,
        "module": entry.module,
        "target": entry.target,
        "changes": entry.changes,
        "ip": entry.ip,
        "requestId": entry.request_id,
        "createdAt": db.isoformat(entry.created_at),
    }


def _filtered(filters: dict[str, Any]) -> Select:
    query = select(AuditEntry)
    for name in ("module", "action", "target"):
        if filters.get(name):
            query = query.where(getattr(AuditEntry, name) == filters[name])
    if filters.get("actor"):
        who = filters["actor"]
        query = query.where(
            or_(AuditEntry.actor_id == who, AuditEntry.actor_username == who, AuditEntry.actor_type == who)
        )
    # In UTC: SQLite keeps timestamps as text without their offset.
    if filters.get("since") is not None:
        query = query.where(AuditEntry.created_at >= filters["since"].astimezone(UTC))
    if filters.get("until") is not None:
        query = query.where(AuditEntry.created_at < filters["until"].astimezone(UTC))
    return query


def entries(filters: dict[str, Any], skip: int = 0, limit: int = 25) -> tuple[list[dict[str, Any]], int]:
    """Entries matching ``filters`` (module, action, actor, target, since, until), newest first, and the total."""
    rows, count = paginate(
        _filtered(filters), skip, limit, order_by=(AuditEntry.created_at.desc(), AuditEntry.id.desc())
    )
    return [entry_dict(row) for row in rows], count


# --- GET /admin/audit ----------------------------------------------------------------------------------

blp = Blueprint(
    "audit", __name__, description="The audit log of administrative changes (and of users' sharing of documents)"
)

_TEXT = validate.Length(min=1, max=255)


class AuditArgs(ListArgs):
    module = fields.String(validate=_TEXT, metadata={"description": "module name, e.g. `email`"})
    action = fields.String(validate=_TEXT, metadata={"description": "e.g. `config.update`, `user.block`"})
    actor = fields.String(
        validate=_TEXT,
        metadata={"description": "an admin's id or username, a user's id, or `masterkey` / `cli` / `user`"},
    )
    target = fields.String(validate=_TEXT, metadata={"description": "id or name of the changed record"})
    since = fields.AwareDateTime(default_timezone=UTC, metadata={"description": "ISO 8601; entries at or after"})
    until = fields.AwareDateTime(default_timezone=UTC, metadata={"description": "ISO 8601; entries before"})


class ActorSchema(Schema):
    type = fields.String(required=True, metadata={"description": "masterkey | admin | cli | user"})
    id = fields.String()
    username = fields.String()


class AuditEntrySchema(Schema):
    _id = fields.String(required=True)
    actor = fields.Nested(ActorSchema, required=True)
    action = fields.String(required=True)
    module = fields.String(required=True)
    target = fields.String(allow_none=True)
    changes = fields.Raw(allow_none=True, metadata={"description": "what was asked, secrets masked"})
    ip = fields.String(allow_none=True)
    requestId = fields.String(allow_none=True)
    createdAt = fields.String(required=True)


class AuditListSchema(Schema):
    entries = fields.List(fields.Nested(AuditEntrySchema), required=True)
    count = fields.Integer(required=True)


@blp.route("/admin/audit", methods=["GET"])
@admin_required
@blp.arguments(AuditArgs, location="query")
@blp.response(200, AuditListSchema)
def list_entries(args: dict[str, Any]):
    """Administrative changes, newest first; filters combine (AND)."""
    skip, limit = args.pop("skip"), args.pop("limit")
    found, count = entries(args, skip, limit)
    return {"entries": found, "count": count}
