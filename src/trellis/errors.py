"""One error shape for every error: ``{"name", "status", "message", "errors"?}``.

Users see it described in ``docs/modules.md``, "Routes: schemas, errors, guards".
"""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, g, jsonify
from marshmallow import Schema, fields
from sqlalchemy.exc import DBAPIError, IntegrityError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from werkzeug.exceptions import HTTPException

from . import db

log = logging.getLogger(__name__)

STATUS_NAMES = {
    400: "INVALID_ARGUMENTS",
    401: "UNAUTHORIZED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    406: "NOT_ACCEPTABLE",
    409: "CONFLICT",
    411: "LENGTH_REQUIRED",
    413: "PAYLOAD_TOO_LARGE",
    414: "URI_TOO_LONG",
    415: "UNSUPPORTED_MEDIA_TYPE",
    416: "RANGE_NOT_SATISFIABLE",
    422: "INVALID_ARGUMENTS",
    429: "RATE_LIMITED",
    500: "INTERNAL_SERVER_ERROR",
    503: "SERVICE_UNAVAILABLE",
}


# At most this many reasons in one error body: a body with a million bad elements would otherwise answer
# one reason per element (tens of megabytes built and sent by a cooperative server).
MAX_ERRORS = 100


class ErrorSchema(Schema):
    """The error body, for the OpenAPI document."""

    name = fields.String(required=True, metadata={"example": "NOT_FOUND"})
    status = fields.Integer(required=True, metadata={"example": 404})
    message = fields.String(required=True)
    errors = fields.Dict(metadata={"description": "field name → list of reasons (validation errors)"})
    errorsOmitted = fields.Integer(
        metadata={"description": f"reasons left out of `errors` (it holds at most {MAX_ERRORS})"}
    )
    requestId = fields.String()


class APIError(Exception):
    """An error a client can cause; rendered with its status and message."""

    def __init__(
        self,
        status: int,
        message: str,
        errors: dict[str, Any] | None = None,
        name: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors
        self.name = name or STATUS_NAMES.get(status, "ERROR")
        self.headers = headers or {}


def bad_request(message: str, errors: dict[str, Any] | None = None) -> APIError:
    return APIError(400, message, errors)


def unauthorized(message: str = "Missing or invalid credentials") -> APIError:
    return APIError(401, message)


def forbidden(message: str = "Not allowed") -> APIError:
    return APIError(403, message)


def not_found(message: str = "Not found") -> APIError:
    return APIError(404, message)


def conflict(message: str, errors: dict[str, Any] | None = None) -> APIError:
    return APIError(409, message, errors)


def provider_error(message: str) -> APIError:
    """An external provider (SMTP, Twilio, FCM …) failed: 500 PROVIDER_ERROR, as the specification says."""
    return APIError(500, message, name="PROVIDER_ERROR")


def body(status: int, message: str, errors: Any = None, name: str | None = None) -> dict[str, Any]:
    payload: dict[str, Any] = {"name": name or STATUS_NAMES.get(status, "ERROR"), "status": status, "message": message}
    if errors:
        budget = [MAX_ERRORS]
        payload["errors"] = _bounded(errors, budget)
        if budget[0] < 0:
            omitted = -budget[0]
            payload["errorsOmitted"] = omitted
            payload["message"] = f"{message} ({omitted} more error(s) left out)"
    request_id = g.get("request_id") if g else None
    if request_id:
        payload["requestId"] = request_id
    return payload


def _bounded(errors: Any, budget: list[int]) -> Any:
    """The first ``budget[0]`` reasons of ``errors``, in order; ``budget[0]`` ends negative by the number
    left out. Field names become text: a multipart part without a name is keyed None, which sorted JSON
    cannot mix with str."""
    if isinstance(errors, dict):
        kept = {}
        for key, value in errors.items():
            if budget[0] <= 0:
                budget[0] -= _count(value)
                continue
            kept["" if key is None else str(key)] = _bounded(value, budget)
        return kept
    if isinstance(errors, list):
        kept_items = errors[: max(budget[0], 0)]
        budget[0] -= len(errors)
        return kept_items
    budget[0] -= 1
    return errors


def _count(errors: Any) -> int:
    if isinstance(errors, dict):
        return sum(_count(value) for value in errors.values())
    return len(errors) if isinstance(errors, list) else 1


def _render(status: int, message: str, errors: Any = None, name: str | None = None, headers: Any = None):
    response = jsonify(body(status, message, errors, name))
    response.status_code = status
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


def flatten_validation(messages: Any) -> Any:
    """webargs reports ``{"json": {...}}`` or ``{"query": {...}}``; clients want the field errors."""
    if isinstance(messages, dict) and len(messages) == 1:
        ((location, inner),) = messages.items()
        if location in {"json", "query", "form", "files", "headers", "view_args", "path", "json_or_form"}:
            return inner
    if isinstance(messages, dict):
        merged: dict[str, Any] = {}
        for inner in messages.values():
            if isinstance(inner, dict):
                merged.update(inner)
        return merged or messages
    return {"_schema": messages if isinstance(messages, list) else [str(messages)]}


def handle_http_exception(error: HTTPException):
    status = error.code or 500
    data = getattr(error, "data", None) or {}
    errors = data.get("errors")
    if errors is None and "messages" in data:
        errors = flatten_validation(data["messages"])
    message = data.get("message")
    if status in (400, 422) and errors and not message:
        message = "Invalid request: " + _summary(errors)
        status = 400
    if not message:
        message = error.description or error.name
    headers = dict(data.get("headers") or {})
    if status == 405 and error.get_response().headers.get("Allow"):
        headers["Allow"] = error.get_response().headers["Allow"]
    if status == 429:
        message = f"Too many requests: {error.description}"
    return _render(status, message, errors, headers=headers)


def _summary(errors: Any) -> str:
    if isinstance(errors, dict):
        parts = []
        for key, value in list(errors.items())[:3]:
            reason = value[0] if isinstance(value, list) and value and isinstance(value[0], str) else "invalid"
            parts.append(f"{key}: {reason}")
        return "; ".join(parts)
    return str(errors)


def _driver_faults() -> tuple[type[Exception], ...]:
    try:
        import psycopg2
    except ImportError:  # SQLite only
        return ()
    return (psycopg2.OperationalError, psycopg2.InterfaceError)


UNAVAILABLE_MESSAGE = "The database is unavailable; retry shortly"


def database_unavailable(error: BaseException) -> bool:
    """Whether ``error`` is the database's fault, not the request's or ours: the server down or restarting,
    a dead pooled connection, no free connection (the pool's timeout, or the server's ``max_connections``).
    The client may retry: a 503."""
    if isinstance(error, DBAPIError):
        return bool(error.connection_invalidated) or isinstance(error, (OperationalError, InterfaceError))
    return isinstance(error, (PoolTimeoutError, *_driver_faults()))


def register(app: Flask) -> None:
    @app.errorhandler(APIError)
    def _api_error(error: APIError):
        return _render(error.status, error.message, error.errors, error.name, error.headers)

    @app.errorhandler(IntegrityError)
    def _integrity(error: IntegrityError):
        db.session.rollback()
        log.info("integrity error answered as 409: %s", error.orig.__class__.__name__)
        return _render(409, "The request conflicts with an existing record (a unique value is taken)")

    @app.errorhandler(DBAPIError)
    def _database_error(error: DBAPIError):
        if not database_unavailable(error):
            return _unexpected(error)
        return _database_unavailable(error)

    def _database_unavailable(error: Exception):
        # A dead pooled connection after a PostgreSQL restart, a server going down, a full pool: the
        # client may retry (the pool has dropped the dead connections by then), so not a 500.
        try:
            db.session.rollback()
        except Exception:  # the connection is gone: nothing to roll back
            log.debug("rollback after a database failure failed too", exc_info=True)
        # the driver's first line says which fault (too many clients, refused, closed); it holds no secret
        cause = str(getattr(error, "orig", None) or error).strip().splitlines()
        log.warning("database unavailable, answered 503: %s: %s", error.__class__.__name__, cause[0] if cause else "")
        return _render(503, UNAVAILABLE_MESSAGE, headers={"Retry-After": "1"})

    # Code that takes a raw driver connection (engine.raw_connection()) meets the driver's own errors.
    faults: tuple[type[Exception], ...] = (PoolTimeoutError, *_driver_faults())
    for fault in faults:
        app.register_error_handler(fault, _database_unavailable)

    @app.errorhandler(Exception)
    def _unexpected(error: Exception):
        if isinstance(error, HTTPException):
            return handle_http_exception(error)
        log.exception("unhandled error (request id %s)", g.get("request_id"))
        return _render(500, "Internal server error; quote the request id when reporting it")
