"""Each callable function's own path (``POST /functions/<its name>``), so that generated clients get a
method per function; the generic ``/functions/{name}`` stays for any of them."""

from __future__ import annotations

import re
from typing import Any

from flask import Flask

from trellis.credentials import ADMIN_SECURITY

from .state import of

TAG = "functions"
# The callers each auth level lets in (an administrator may call every function).
SECURITY = {
    "anyone": [{}, {"bearerAuth": []}, {"masterkey": []}],
    "user": [{"bearerAuth": []}, {"masterkey": []}],
    "admin": ADMIN_SECURITY,
}
_ERROR = {"$ref": "#/components/schemas/Error"}
_WORD = re.compile(r"[^A-Za-z0-9]+")


def paths(app: Flask) -> dict[str, Any]:
    out: dict[str, Any] = {"paths": {}}
    for name, found in sorted(of(app).registry.functions.items()):
        errors = {"400": "Params refused", "404": "No such function", "429": "Too many calls", "500": "FUNCTION_ERROR"}
        if found.auth != "anyone":
            errors.update({"401": "Missing or invalid credentials", "403": "Not allowed"})
        out["paths"][f"/functions/{name}"] = {
            "post": {
                "operationId": "callFunction" + "".join(part.capitalize() for part in _WORD.split(name) if part),
                "summary": f"Call the function {name!r} (auth: {found.auth}; file {found.file})",
                "description": (found.function.__doc__ or "").strip(),
                "tags": [TAG],
                "security": SECURITY[found.auth],
                "requestBody": {
                    "required": False,
                    "content": {"application/json": {"schema": {"type": "object", "description": "its params"}}},
                },
                "responses": {
                    "200": {
                        "description": "What the function returned",
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/FunctionCallResult"}}
                        },
                    },
                    **{
                        status: {"description": text, "content": {"application/json": {"schema": _ERROR}}}
                        for status, text in sorted(errors.items())
                    },
                },
            }
        }
    return out
