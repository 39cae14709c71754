"""The one JSON body parser: every request body, Flask's ``get_json`` and webargs' JSON loading.

It refuses what the contract's Conventions list (400 ``INVALID_ARGUMENTS``, never a 500): invalid
UTF-8, a BOM, lone surrogates, ``NaN``/``Infinity``, integers over 4,300 digits, numbers outside
float range, nesting deeper than 64 levels, duplicate keys, and NUL characters (PostgreSQL cannot
store them). A body sent without ``Content-Type: application/json`` to a JSON route is a 415.

The checks that would cost a walk over the parsed value run only when a cheap scan of the raw bytes
says they can matter (more than 64 brackets; a ``\\uD…`` escape), so a common body pays one
``json.loads`` with a hook per object (duplicate keys) and per float (range).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from flask import Request
from flask.json.provider import DefaultJSONProvider

from .errors import APIError
from .server.formbody import FormParser

MAX_DEPTH = 64
# A JSON \u0000 escape, not preceded by an escaped backslash (the text "\\u0000" holds no NUL).
_JSON_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
# A UTF-16 surrogate escape; only then can a decoded string hold a lone surrogate.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class JSONBodyError(ValueError):
    """A body the parser refuses; the message is shown to the client."""


def _refuse_constant(name: str) -> Any:
    raise JSONBodyError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise JSONBodyError(f"The number {text[:40]} is outside the range of a double")
    return value


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _value in pairs:
            if key in seen:
                raise JSONBodyError(f"Duplicate key {key[:40]!r}")
            seen.add(key)
    return result


_DECODER = json.JSONDecoder(object_pairs_hook=_object, parse_float=_finite_float, parse_constant=_refuse_constant)


def loads(data: str | bytes | bytearray) -> Any:
    """Parse a JSON text strictly; raises :class:`JSONBodyError` with a plain-text reason."""
    if isinstance(data, (bytes, bytearray)):
        try:
            text = bytes(data).decode("utf-8")  # strict: refuses invalid UTF-8 and encoded surrogates
        except UnicodeDecodeError as exc:
            raise JSONBodyError(f"The body is not valid UTF-8 (byte {exc.start})") from None
    else:
        text = data
    if text.startswith("\ufeff"):
        raise JSONBodyError("The body starts with a byte order mark; send UTF-8 without one")
    if "\\u0000" in text and _JSON_NUL.search(text):  # the substring test is C speed; the regex is not
        raise JSONBodyError("NUL characters are not allowed")
    try:
        value = _DECODER.decode(text)
    except JSONBodyError:
        raise
    except RecursionError:
        raise JSONBodyError(f"The JSON is nested deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise JSONBodyError(f"Invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except ValueError as exc:  # an integer over Python's 4,300-digit limit
        raise JSONBodyError(f"Invalid JSON number: {str(exc).split(';')[0]}") from None
    if text.count("[") + text.count("{") > MAX_DEPTH:  # brackets in strings count too: only a hint
        _check_depth(value)
    if _SURROGATE_ESCAPE.search(text):
        _check_surrogates(value)
    return value


def _check_depth(value: Any) -> None:
    """Level by level over the containers only: a walk of every value was far slower on large bodies
    (``bench/results/core.md#depth-check``)."""
    level = [value] if isinstance(value, (dict, list)) else []
    depth = 0
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            raise JSONBodyError(f"The JSON is nested deeper than {MAX_DEPTH} levels")
        below = []
        for item in level:
            for child in item.values() if isinstance(item, dict) else item:
                if isinstance(child, (dict, list)):
                    below.append(child)
        level = below


def _check_surrogates(value: Any) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            texts = [item]
        elif isinstance(item, dict):
            texts = list(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
            continue
        else:
            continue
        for text in texts:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise JSONBodyError("Strings must not contain lone UTF-16 surrogates (\\ud800-\\udfff)") from None


def refusal(exc: JSONBodyError) -> APIError:
    return APIError(400, f"The request body is not acceptable JSON: {exc}", {"body": [str(exc)]})


def unsupported_media_type(what: str = "the body") -> APIError:
    return APIError(415, f"Send {what} as JSON (Content-Type: application/json)")


def require_json(request: Request, what: str = "the body") -> None:
    """415 unless the request declares a JSON body (routes that read the body themselves)."""
    if not request.is_json:
        raise unsupported_media_type(what)


def has_body(request: Request) -> bool:
    environ = request.environ
    return bool(request.content_length) or "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()


class StrictJSONProvider(DefaultJSONProvider):
    """``app.json``: Flask's ``request.get_json`` (and ``flask.json.loads``) parse with :func:`loads`."""

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return loads(s)


class TrellisRequest(Request):
    """Flask's request whose JSON errors are the contract's 400/415 in the error shape, and whose form
    parser says which form limit a 413 is about (:mod:`trellis.server.formbody`)."""

    form_data_parser_class = FormParser

    def on_json_loading_failed(self, e: ValueError | None) -> Any:
        if e is None:
            raise unsupported_media_type()
        if isinstance(e, JSONBodyError):
            raise refusal(e)
        raise refusal(JSONBodyError(str(e)))


def parse_request_body(request: Request) -> None:
    """Before every route: a JSON body is parsed once (cached for ``get_json`` and webargs), so every
    route, whatever reads the body later, sees only bodies the parser accepts."""
    if request.is_json and has_body(request):
        request.get_json()
