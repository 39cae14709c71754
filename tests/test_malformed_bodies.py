"""The malformed-body corpus over every JSON write route listed in ``/openapi.json`` (static routes and
a sample Database schema's generated routes): each answer is the parser's 4xx in the error shape.

Each body is the route's own request schema filled with plain values, then poisoned: every value
replaced by the bad token (so a route that read the body itself would meet it in every field).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from trellis.testing.plugin import TEST_MASTER_KEY

WRITE_METHODS = ("post", "put", "patch", "delete")
MARK = "__POISON__"
DEEP = "[" * 10_000 + "]" * 10_000


def _poisoned(token: str) -> Any:
    return lambda sample: _encode(sample).replace(f'"{MARK}"', token).encode()


def _encode(sample: dict[str, Any]) -> str:
    return json.dumps({key: MARK for key in sample} or {"value": MARK})


# The content type is checked where the route loads its arguments, after its credential and lookup
# checks (administrator credentials are sent, so user-only routes answer 403, an unknown schema 404).
AFTER_ROUTE_GUARDS = (415, 403, 404)

# name → (body builder from the sample object, content type, expected statuses)
CORPUS = {
    "lone surrogate": (_poisoned('"\\ud800"'), "application/json", (400,)),
    "lone low surrogate in a key": (lambda s: b'{"\\udc00": 1}', "application/json", (400,)),
    "nesting 10,000 deep": (_poisoned(DEEP), "application/json", (400,)),
    "nesting 65 deep": (_poisoned("[" * 65 + "]" * 65), "application/json", (400,)),
    "integer over 4,300 digits": (_poisoned("1" * 5000), "application/json", (400,)),
    "NaN": (_poisoned("NaN"), "application/json", (400,)),
    "Infinity": (_poisoned("-Infinity"), "application/json", (400,)),
    "float out of range": (_poisoned("1e999"), "application/json", (400,)),
    "duplicate keys": (lambda s: _encode(s)[:-1].encode() + b', "dup": 1, "dup": 2}', "application/json", (400,)),
    "BOM": (lambda s: b"\xef\xbb\xbf" + _encode(s).encode(), "application/json", (400,)),
    "invalid UTF-8": (
        lambda s: _encode(s).replace(f'"{MARK}"', '"\xff"').encode("latin-1"),
        "application/json",
        (400,),
    ),
    "encoded surrogate (CESU)": (
        lambda s: _encode(s).replace(f'"{MARK}"', '"x"').encode().replace(b'"x"', b'"\xed\xa0\x80"'),
        "application/json",
        (400,),
    ),
    "NUL escape": (_poisoned('"a\\u0000b"'), "application/json", (400,)),
    "truncated JSON": (lambda s: _encode(s)[:-1].encode(), "application/json", (400,)),
    "wrong content type": (lambda s: _encode(s).encode(), "text/plain", AFTER_ROUTE_GUARDS),
    "form-encoded": (lambda s: b"a=1&b=2", "application/x-www-form-urlencoded", AFTER_ROUTE_GUARDS),
}
SMALL_LIMIT = 64 * 1024


@pytest.fixture()
def json_write_routes(client, admin_headers) -> list[tuple[str, str, dict[str, Any]]]:
    """(method, path, sample body) of every operation with a JSON request body, including the generated
    routes of a sample Database schema (created inside the test's rolled-back transaction)."""
    created = client.post(
        "/admin/database/schemas",
        headers=admin_headers,
        json={
            "name": "CorpusSample",
            "fields": {"title": {"type": "String", "unique": True}, "n": "Number", "tags": ["String"]},
        },
    )
    assert created.status_code == 201, created.get_json()
    document = client.get("/openapi.json").get_json()
    routes = []
    for path, item in document["paths"].items():
        for method in WRITE_METHODS:
            operation = item.get(method)
            content = ((operation or {}).get("requestBody") or {}).get("content") or {}
            if "application/json" not in content:
                continue
            schema = _resolve(document, content["application/json"].get("schema") or {})
            sample = {name: 1 for name in (schema.get("properties") or {})}
            routes.append((method.upper(), re.sub(r"\{[^}]+\}", "x0", path), sample))
    assert any(path == "/database/CorpusSample" for _m, path, _s in routes)
    assert len(routes) >= 40, [f"{m} {p}" for m, p, _s in routes]
    return routes


def _resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _check(response: Any, expected: tuple[int, ...], graphql: bool = False) -> str | None:
    """None when the answer is the expected status in the error shape, else what is wrong."""
    try:
        payload = json.loads(response.get_data())
    except ValueError:
        return f"{response.status_code} with a body that is not JSON: {response.get_data()[:200]!r}"
    if response.status_code not in expected:
        return f"{response.status_code} (expected {expected}): {str(payload)[:300]}"
    if graphql:  # GraphQL over HTTP: the same error, in the GraphQL shape its clients parse
        errors = payload.get("errors") if isinstance(payload, dict) else None
        if not errors or set(payload) - {"errors"}:
            return f"not the GraphQL error shape: {str(payload)[:300]}"
        payload = {"message": errors[0].get("message"), **errors[0].get("extensions", {})}
        payload = {key: payload[key] for key in ("message", "status", "errors") if key in payload}
    if not isinstance(payload, dict) or set(payload) - {"name", "status", "message", "errors", "requestId"}:
        return f"not the error shape: {str(payload)[:300]}"
    if payload.get("status") != response.status_code or not isinstance(payload.get("message"), str):
        return f"not the error shape: {str(payload)[:300]}"
    if "errors" in payload and not isinstance(payload["errors"], dict):
        return f"errors is not an object: {payload['errors']!r}"
    if "Decode" in payload["message"] or "Error(" in payload["message"]:
        return f"a Python repr in message: {payload['message']!r}"
    return None


@pytest.mark.parametrize("case", sorted(CORPUS))
def test_malformed_bodies_get_the_parsers_4xx_on_every_json_write_route(client, json_write_routes, case):
    build, content_type, expected = CORPUS[case]
    wrong: dict[str, str] = {}
    server_errors = 0
    for method, path, sample in json_write_routes:
        response = client.open(
            path, method=method, data=build(sample), content_type=content_type, headers={"masterkey": TEST_MASTER_KEY}
        )
        server_errors += response.status_code >= 500
        problem = _check(response, expected, graphql=path == "/graphql")
        if problem:
            wrong[f"{method} {path}"] = problem
    assert not wrong, f"{case}: {server_errors} × 5xx over {len(json_write_routes)} routes\n" + "\n".join(
        f"{route}: {problem}" for route, problem in wrong.items()
    )


def test_oversized_bodies_are_413_before_they_are_read(app, client, json_write_routes):
    """Bodies over the route's limit: a Content-Length over it, and a chunked body that passes it."""
    old = app.config["MAX_CONTENT_LENGTH"]
    app.config["MAX_CONTENT_LENGTH"] = SMALL_LIMIT
    try:
        wrong = {}
        body = json.dumps({"value": "x" * (SMALL_LIMIT + 10)}).encode()
        for method, path, _sample in json_write_routes:
            if path.startswith("/forms/submit/"):
                continue  # the form's own maxBodyBytes applies (tested in the Forms module)
            response = client.open(
                path, method=method, data=body, content_type="application/json", headers={"masterkey": TEST_MASTER_KEY}
            )
            problem = _check(response, (413,), graphql=path == "/graphql")
            if problem:
                wrong[f"{method} {path}"] = problem
        assert not wrong, "\n".join(f"{route}: {problem}" for route, problem in wrong.items())
    finally:
        app.config["MAX_CONTENT_LENGTH"] = old


def test_a_body_without_content_type_on_login_is_415(client):
    response = client.post(
        "/login",
        data=json.dumps({"username": "admin", "password": "x"}),
        headers={"masterkey": TEST_MASTER_KEY, "Content-Type": ""},
    )
    assert response.status_code == 415
    assert response.get_json()["name"] == "UNSUPPORTED_MEDIA_TYPE"


def test_a_json_route_without_a_body_still_validates_its_fields(client):
    response = client.post("/login", headers={"masterkey": TEST_MASTER_KEY})
    assert response.status_code == 400
    assert set(response.get_json()["errors"]) == {"username", "password"}


def test_valid_unicode_and_big_numbers_within_limits_pass(client, admin_headers):
    """Paired surrogates, 64 levels, a 4,300-digit-free large number: the parser accepts them."""
    created = client.post(
        "/admin/database/schemas",
        headers=admin_headers,
        json={"name": "Accepts", "fields": {"title": "String", "blob": "JSON", "n": "Number"}},
    )
    assert created.status_code == 201, created.get_json()
    nested = "[" * 30 + "]" * 30
    body = '{"title": "\\ud83d\\ude00 \\u00e9", "blob": ' + nested + ', "n": 1.5e300}'
    response = client.post("/database/Accepts", data=body, content_type="application/json", headers=admin_headers)
    assert response.status_code == 201, response.get_json()
    assert response.get_json()["title"] == "\U0001f600 é"


@pytest.mark.parametrize(
    "url",
    [
        "/database/CorpusSample?title=%ED%A0%80",  # a UTF-8-encoded lone surrogate in a query value
        "/database/CorpusSample?title[$regex]=%ED%A0%80",
        "/database/%ED%A0%80",  # … in a path segment
        "/authentication/local/verify?token=%ED%A0%80",
        "/storage/file/%ED%A0%80",
        "/chat/rooms/%ED%A0%80",
    ],
)
def test_lone_surrogates_in_urls_are_never_a_server_error(client, json_write_routes, url):
    """Werkzeug decodes URLs with replacement characters, so a surrogate never reaches our code as one."""
    response = client.get(url, headers={"masterkey": TEST_MASTER_KEY})
    assert response.status_code < 500, response.get_json()
    assert _check(response, (response.status_code,)) is None or response.status_code < 400
