"""HTTP building blocks every module uses: the Blueprint, list arguments, common response schemas."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import flask_smorest
from flask import Flask, Request
from marshmallow import INCLUDE, Schema, fields, validate
from sqlalchemy import Select, func, select
from webargs import core
from webargs.flaskparser import FlaskParser, is_json_request
from werkzeug.exceptions import RequestEntityTooLarge

from . import current, db
from .errors import APIError, ErrorSchema, bad_request
from .jsonbody import has_body, unsupported_media_type

MAX_LIMIT = 1000
DEFAULT_LIMIT = 25
# Offsets reach SQL as integers: past a bigint PostgreSQL fails (bigint out of range) and SQLite cannot bind
# them, so every skip is capped (as the contract's lists do) with a 400.
MAX_SKIP = 2**31 - 1


class ArgumentsParser(FlaskParser):
    # Invalid input is a 400, as everywhere else in the API, not webargs' 422.
    DEFAULT_VALIDATION_STATUS = 400

    def get_default_request(self) -> Request:
        # The request itself, not Flask's proxy of it (trellis.current): webargs reads several attributes
        # per parsed argument.
        return current.request()

    def _raw_load_json(self, req: Request) -> Any:
        """The core's parser (``request.get_json``, already run before the route), not webargs' own; a
        body that is not declared JSON is a 415 rather than "Missing data for required field"."""
        if not has_body(req):
            if req.method in ("PUT", "PATCH"):
                # Without this an all-optional schema loads {}: a silent 200 that changed nothing (or, for
                # a replacing PUT, everything).
                raise bad_request(f"A {req.method} on this route needs a JSON body")
            return core.missing
        if not is_json_request(req):
            raise unsupported_media_type()
        return req.get_json()

    def parse(self, argmap: Any, req: Request | None = None, *, location: str | None = None, **kwargs: Any) -> Any:
        """A JSON object for a :class:`FreeFormSchema` is taken as it is (a copy, as marshmallow's load
        returns): there is nothing to check or convert, and the way through webargs and marshmallow costs
        a create (``bench/results/core.md#free-form-bodies``). Anything else (no body,
        not an object, another schema) goes through webargs, with its errors."""
        if isinstance(argmap, FreeFormSchema) and (location or self.location) == "json" and not kwargs.get("validate"):
            body = self.load_json(req or self.get_default_request(), argmap)
            if isinstance(body, dict):
                return dict(body)
        return super().parse(argmap, req, location=location, **kwargs)


F = TypeVar("F", bound=Callable[..., Any])
BodyLimit = int | Callable[[], int]


def body_limit(limit: BodyLimit) -> Callable[[F], F]:
    """Declare a route's own body limit in bytes (or a function of the config returning it). The core
    checks it before anything reads the body: a larger ``Content-Length`` is a 413 without reading a
    byte, and a chunked body is cut off with a 413 as soon as it passes the limit."""

    def decorate(func: F) -> F:
        func.trellis_body_limit = limit  # type: ignore[attr-defined]  # copied by functools.wraps
        return func

    return decorate


def apply_body_limit(app: Flask, req: Request) -> None:
    """Before every request with a body: the route's limit (``body_limit``) or the app's ``MAX_CONTENT_LENGTH``."""
    view = app.view_functions.get(req.endpoint or "")
    limit = getattr(view, "trellis_body_limit", None)
    if limit is None:
        limit = app.config.get("MAX_CONTENT_LENGTH")
        if limit is None:
            return
    elif callable(limit):
        limit = limit()
    length = req.content_length
    if length is not None:
        if length > limit:
            raise _too_large(limit)
        req.max_content_length = limit
    elif has_body(req):
        # A chunked body: werkzeug refuses reads past ``max_content_length``; one byte more tells a body of
        # exactly ``limit`` bytes from a longer one (JSON bodies are read here, the others as they are used).
        req.max_content_length = limit + 1
        if req.is_json:
            try:
                length = len(req.get_data(cache=True))
            except RequestEntityTooLarge:
                raise _too_large(limit) from None
            if length > limit:
                raise _too_large(limit)


def _too_large(limit: int) -> APIError:
    return APIError(413, f"The request body is larger than this route's limit of {limit} bytes")


class Blueprint(flask_smorest.Blueprint):
    """flask-smorest Blueprint whose argument errors are 400 and documented as such."""

    ARGUMENTS_PARSER = ArgumentsParser()

    def arguments(self, schema: Any, *, location: str = "json", **kwargs: Any) -> Callable[[F], F]:
        """flask-smorest's ``arguments``; a JSON body also documents the 415 the parser answers when the
        body is not declared JSON (unless the route documents its own 415)."""
        load = super().arguments(schema, location=location, **kwargs)
        if location != "json":
            return load
        refused = self.alt_response(
            415, schema=ErrorSchema, description="The body is not declared JSON (Content-Type: application/json)"
        )

        def decorate(func: F) -> F:
            func = load(func)
            if 415 in getattr(func, "_apidoc", {}).get("response", {}).get("responses", {}):
                return func
            return refused(func)

        return decorate


# What every browser page a module serves (the console, the account pages) is sent with. script-src 'self'
# and no 'unsafe-inline' anywhere: the only code that runs is the server's own .js files. No referrer: a
# page's address may carry a token (a password reset link).
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
PAGE_SECURITY_HEADERS = {
    "Content-Security-Policy": PAGE_CSP,
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
}


def secure_page(response: Any) -> Any:
    """Add the page headers (those already set win); an HTML page is never stored by a cache."""
    for name, value in PAGE_SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    if response.mimetype == "text/html":
        response.headers["Cache-Control"] = "no-store"
    return response


class PageBlueprint(flask_smorest.Blueprint):
    """A blueprint of browser pages and their assets (the admin console, the account pages).

    It is registered through the Api like every blueprint, so the host installs and guards it the one way,
    but its routes are not API operations: they add nothing to ``/openapi.json`` (a client generator
    would make functions of them). Its tag is dropped with the other tags no operation uses. Its
    answers carry :data:`PAGE_SECURITY_HEADERS` (``secure_page``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.after_request(secure_page)

    def register_views_in_doc(self, api: Any, app: Any, spec: Any, *, name: str, parameters: Any) -> None:
        return None


class ListArgs(Schema):
    """``skip``/``limit`` of every list route (limit above 1000 → 400)."""

    skip = fields.Integer(load_default=0, validate=validate.Range(min=0, max=MAX_SKIP))
    limit = fields.Integer(load_default=DEFAULT_LIMIT, validate=validate.Range(min=1, max=MAX_LIMIT))


class FreeFormSchema(Schema):
    """A JSON object whose keys another layer validates (module configs, documents).

    Loads every key as is (a request body of this schema skips marshmallow: see ``ArgumentsParser.parse``) and
    dumps the object unchanged; documented as an open object. Subclasses add no fields.
    """

    class Meta:
        unknown = INCLUDE

    def dump(self, obj: Any, *, many: bool | None = None) -> Any:
        return obj


class DeletedSchema(Schema):
    _id = fields.String(required=True)
    deleted = fields.Boolean(required=True)


class MessageSchema(Schema):
    message = fields.String(required=True)


def deleted(record_id: str) -> dict[str, Any]:
    return {"_id": record_id, "deleted": True}


def list_schema(name: str, plural: str, item: type[Schema] | Schema) -> type[Schema]:
    """``{<plural>: [item], count}`` response schema for a list route."""
    return Schema.from_dict(
        {plural: fields.List(fields.Nested(item), required=True), "count": fields.Integer(required=True)},
        name=name,
    )


def paginate(query: Select, skip: int, limit: int, order_by: Sequence[Any] = ()) -> tuple[list[Any], int]:
    """Rows of ``query`` for one page and the total before skip/limit."""
    total = db.session.execute(select(func.count()).select_from(query.order_by(None).subquery())).scalar_one()
    page = query.order_by(*order_by).offset(skip).limit(limit) if order_by else query.offset(skip).limit(limit)
    return list(db.session.execute(page).scalars()), total
