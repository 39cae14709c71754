"""CORS on every HTTP route (REST, GraphQL, files, OpenAPI) from ``TRELLIS_CORS_ORIGINS``: preflights
answered with the methods, the credential headers and a max age; actual responses expose X-Request-ID;
an origin not listed gets no CORS headers."""

from __future__ import annotations

import pytest
from flask import Flask

from trellis import create_app
from trellis.cors import allowed_origins

ALLOWED = "https://app.example"
ROUTES = [
    ("GET", "/health"),
    ("GET", "/admin/database/schemas"),
    ("POST", "/graphql"),
    ("GET", "/openapi.json"),
    ("GET", "/storage/download/nothing"),
    ("POST", "/authentication/local"),
    ("DELETE", "/database/Thing/x"),
]


@pytest.fixture()
def listed_client(app_config, app, db):
    """The full app with an explicit list of origins (blanks and spaces in the setting are tolerated)."""
    return create_app({**app_config, "CORS_ORIGINS": f" {ALLOWED} , https://admin.example,"}).test_client()


def preflight(client, method: str, path: str, origin: str):
    return client.options(
        path,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": "authorization, content-type, masterkey",
        },
    )


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_preflight_of_every_route_kind(listed_client, method, path):
    response = preflight(listed_client, method, path, ALLOWED)
    assert response.status_code in (200, 204)
    headers = response.headers
    assert headers["Access-Control-Allow-Origin"] == ALLOWED
    assert method in headers["Access-Control-Allow-Methods"]
    allowed = {h.strip().lower() for h in headers["Access-Control-Allow-Headers"].split(",")}
    assert {"authorization", "content-type", "masterkey"} <= allowed
    assert int(headers["Access-Control-Max-Age"]) >= 600
    assert "Origin" in headers.get("Vary", "")


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_unlisted_origin_gets_no_cors_headers(listed_client, method, path):
    assert not [
        h
        for h in preflight(listed_client, method, path, "https://evil.example").headers
        if h[0].lower().startswith("access-control-")
    ]
    actual = listed_client.open(path, method=method, headers={"Origin": "https://evil.example"})
    assert not [h for h in actual.headers if h[0].lower().startswith("access-control-")]


def test_actual_responses_allow_the_origin_and_expose_the_request_id(listed_client, admin_headers):
    ok = listed_client.get("/admin/database/schemas", headers={"Origin": ALLOWED, **admin_headers})
    assert ok.status_code == 200
    assert ok.headers["Access-Control-Allow-Origin"] == ALLOWED
    assert "x-request-id" in ok.headers["Access-Control-Expose-Headers"].lower()
    graphql = listed_client.post(
        "/graphql", json={"query": "{ _schemas }"}, headers={"Origin": ALLOWED, **admin_headers}
    )
    assert graphql.status_code == 200 and graphql.headers["Access-Control-Allow-Origin"] == ALLOWED
    # Errors carry the headers too, or a browser app could not read the error body.
    denied = listed_client.get("/admin/database/schemas", headers={"Origin": ALLOWED})
    assert denied.status_code == 401 and denied.headers["Access-Control-Allow-Origin"] == ALLOWED
    missing = listed_client.get("/storage/download/nothing", headers={"Origin": ALLOWED, **admin_headers})
    assert missing.status_code == 404 and missing.headers["Access-Control-Allow-Origin"] == ALLOWED


def test_default_allows_any_origin(client):
    response = preflight(client, "POST", "/graphql", "http://localhost:5173")
    assert response.headers["Access-Control-Allow-Origin"] == "*"
    actual = client.get("/health", headers={"Origin": "http://localhost:5173"})
    assert actual.headers["Access-Control-Allow-Origin"] == "*"
    assert "x-request-id" in actual.headers["Access-Control-Expose-Headers"].lower()


def test_one_parsing_for_http_and_socketio(app_config, app, db):
    listed = create_app({**app_config, "CORS_ORIGINS": "https://a.example,https://b.example"})
    assert allowed_origins(listed) == ["https://a.example", "https://b.example"]
    socket_check = listed.extensions["socketio"].server.eio.cors_allowed_origins  # the list, and same-origin
    elsewhere = {"wsgi.url_scheme": "http", "HTTP_HOST": "api.example"}
    assert socket_check("https://b.example", elsewhere) and not socket_check("https://c.example", elsewhere)
    assert allowed_origins(app) == "*"


@pytest.mark.parametrize("origins", ["*", "https://a.example,https://b.example"])
def test_requests_without_origin_get_what_flask_cors_would_send(app_config, db, origins):
    """The constant copied onto responses to requests without ``Origin`` equals flask-cors's own answer."""
    from flask_cors import CORS

    from trellis.cors import ALLOWED_HEADERS, EXPOSED_HEADERS, METHODS, PREFLIGHT_MAX_AGE

    app = create_app({**app_config, "CORS_ORIGINS": origins})
    plain = Flask("plain")
    plain.route("/database/Item/<doc>")(lambda doc: {"_id": doc})
    configured = allowed_origins(app)
    CORS(
        plain,
        origins=configured,
        send_wildcard=configured == "*",
        methods=list(METHODS),
        allow_headers=list(ALLOWED_HEADERS),
        expose_headers=list(EXPOSED_HEADERS),
        max_age=PREFLIGHT_MAX_AGE,
        supports_credentials=False,
        vary_header=True,
    )
    ours = app.test_client().get("/health")
    theirs = plain.test_client().get("/database/Item/abc")
    assert ours.status_code == theirs.status_code == 200

    def cors(response):
        return [(k, v) for k, v in response.headers.items() if k.startswith("Access-Control-") or k == "Vary"]

    assert cors(theirs) and cors(ours) == cors(theirs)
