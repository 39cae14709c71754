"""/openapi.json: every route documented, security schemes, request-time paths from modules."""

import re

from marshmallow import fields

from trellis import Module, create_app
from trellis.http import Blueprint, PageBlueprint
from trellis.module_config import ModuleConfigSchema, get


class DynamicConfig(ModuleConfigSchema):
    things = fields.List(fields.String(), load_default=list)


def dynamic_paths(app):
    """Paths computed from the module's current configuration, on every request."""
    paths = {}
    for thing in get("dynamic")["things"]:
        paths[f"/dynamic/{thing}"] = {"get": {"summary": f"the {thing}", "responses": {"200": {"description": "OK"}}}}
    return {"paths": paths, "tags": [{"name": "dynamic", "description": "computed"}]}


DYNAMIC = Module(
    name="dynamic",
    config_schema=DynamicConfig,
    openapi_paths=dynamic_paths,
    blueprints=(Blueprint("dynamic", __name__, description="dynamic"),),
)


def test_static_document(client):
    doc = client.get("/openapi.json").get_json()
    assert doc["openapi"] == "3.0.3"
    schemes = doc["components"]["securitySchemes"]
    assert schemes["masterkey"] == {"type": "apiKey", "in": "header", "name": "masterkey"}
    assert schemes["bearerAuth"]["scheme"] == "bearer"
    login = doc["paths"]["/login"]["post"]
    assert login["security"] == [{"masterkey": []}]
    assert "requestBody" in login and "200" in login["responses"] and "401" in login["responses"]
    config = doc["paths"]["/config/{moduleName}"]
    assert config["put"]["security"] == [{"masterkey": []}, {"bearerAuth": []}]
    assert {"200", "400", "401", "403"} <= set(config["put"]["responses"])
    assert doc["components"]["schemas"]["Error"]["required"] == ["message", "name", "status"]


def test_guards_document_their_security_and_errors(client):
    """A guard adds its security and 401/403 (flask-smorest's doc / alt_response); a status the route
    documents itself keeps the route's description."""
    paths = client.get("/openapi.json").get_json()["paths"]
    audit = paths["/admin/audit"]["get"]
    assert audit["security"] == [{"masterkey": []}, {"bearerAuth": []}]
    assert audit["responses"]["401"]["description"] == "Missing or invalid credentials"
    assert audit["responses"]["403"]["description"] == "Not allowed"
    assert audit["responses"]["403"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
    change = paths["/authentication/local/change-password"]["post"]
    assert change["security"] == [{"bearerAuth": []}]
    assert change["responses"]["401"]["description"] == "Missing or invalid credentials, or a wrong old password"
    assert change["responses"]["403"]["description"] == "Not allowed"


# The generic document routes: documented as one typed path family per CMS-enabled schema instead.
GENERIC_DOCUMENTS = {"database-documents", "database-changes"}  # replaced by per-schema paths


def test_every_served_route_is_documented(app, client):
    doc = client.get("/openapi.json").get_json()
    documented = {(path, method.upper()) for path, item in doc["paths"].items() for method in item}
    for rule in app.url_map.iter_rules():
        # static files (the site icon too) and the docs pages themselves are not API operations
        files = ("static", "swagger_assets", "favicon")
        if rule.endpoint.split(".")[-1] in files or rule.endpoint.startswith("api-docs"):
            continue
        # Pages for browsers (the console's HTML and scripts), not API operations: not in the document.
        pages = isinstance(app.blueprints.get(rule.endpoint.split(".")[0]), PageBlueprint)
        if pages or rule.endpoint.split(".")[0] in GENERIC_DOCUMENTS:
            assert not any(p == str(rule).replace("<string:", "{").replace(">", "}") for p in doc["paths"])
            continue
        path = re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", str(rule))  # <string:moduleName> → {moduleName}
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            assert (path, method) in documented, f"{method} {path} is served but not in /openapi.json"


def test_module_paths_are_computed_per_request(app_config, admin_headers, db):
    client = create_app(app_config, modules=[DYNAMIC]).test_client()
    assert not [p for p in client.get("/openapi.json").get_json()["paths"] if p.startswith("/dynamic/")]
    client.put("/config/dynamic", json={"things": ["apple", "pear"]}, headers=admin_headers)
    doc = client.get("/openapi.json").get_json()
    assert {"/dynamic/apple", "/dynamic/pear"} <= set(doc["paths"])
    assert doc["paths"]["/dynamic/pear"]["get"]["summary"] == "the pear"
    client.put("/config/dynamic", json={"things": ["pear"]}, headers=admin_headers)
    assert "/dynamic/apple" not in client.get("/openapi.json").get_json()["paths"]


def test_swagger_page_uses_local_assets(client):
    page = client.get("/swagger").get_data(as_text=True)
    assert "/swagger/assets/swagger-ui-bundle.js" in page and "/openapi.json" in page
    assert "cdn" not in page.lower() and "https://" not in page
    asset = client.get("/swagger/assets/swagger-ui-bundle.js")
    assert asset.status_code == 200 and len(asset.get_data()) > 100_000
