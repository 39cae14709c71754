"""GET/PUT /config/{moduleName}: stored, validated, merged with defaults, seen by every worker."""

from trellis import create_app


def test_get_config_gives_defaults(greeter_client, admin_headers):
    response = greeter_client.get("/config/greeter", headers=admin_headers)
    assert response.status_code == 200
    assert response.get_json() == {"active": True, "greeting": "hello", "repeat": 1}


def test_put_merges_validates_and_stores(greeter_client, admin_headers):
    response = greeter_client.put("/config/greeter", json={"greeting": "hi"}, headers=admin_headers)
    assert response.status_code == 200
    assert response.get_json() == {"active": True, "greeting": "hi", "repeat": 1}
    response = greeter_client.put("/config/greeter", json={"repeat": 2}, headers=admin_headers)
    assert response.get_json() == {"active": True, "greeting": "hi", "repeat": 2}
    assert greeter_client.get("/greeter/hello").get_json() == {"message": "hi hi"}


def test_put_rejects_invalid_values_with_field_errors(greeter_client, admin_headers):
    response = greeter_client.put("/config/greeter", json={"repeat": 9, "greeting": 3}, headers=admin_headers)
    assert response.status_code == 400
    body = response.get_json()
    assert body["name"] == "INVALID_ARGUMENTS"
    assert set(body["errors"]) == {"repeat", "greeting"}
    # nothing was stored
    assert greeter_client.get("/config/greeter", headers=admin_headers).get_json()["greeting"] == "hello"


def test_put_rejects_unknown_keys_and_non_objects(greeter_client, admin_headers):
    response = greeter_client.put("/config/greeter", json={"colour": "blue"}, headers=admin_headers)
    assert response.status_code == 400
    assert "colour" in response.get_json()["errors"]
    assert greeter_client.put("/config/greeter", json=[1, 2], headers=admin_headers).status_code == 400
    response = greeter_client.put(
        "/config/greeter", data="{not json", headers={**admin_headers, "Content-Type": "application/json"}
    )
    assert response.status_code == 400


def test_unknown_module_is_404(greeter_client, admin_headers):
    assert greeter_client.get("/config/nope", headers=admin_headers).status_code == 404
    assert greeter_client.put("/config/nope", json={}, headers=admin_headers).status_code == 404


def test_config_routes_need_admin(greeter_client):
    assert greeter_client.get("/config/greeter").status_code == 401
    assert greeter_client.put("/config/greeter", json={"greeting": "x"}).status_code == 401


def test_inactive_module_hides_public_routes_but_not_from_admins(greeter_client, admin_headers):
    assert greeter_client.put("/config/greeter", json={"active": False}, headers=admin_headers).status_code == 200
    response = greeter_client.get("/greeter/hello")
    assert response.status_code == 404
    assert "not active" in response.get_json()["message"]
    assert greeter_client.get("/greeter/hello", headers=admin_headers).status_code == 200
    greeter_client.put("/config/greeter", json={"active": True}, headers=admin_headers)
    assert greeter_client.get("/greeter/hello").status_code == 200


def test_a_change_in_one_worker_reaches_another(app_config, greeter_app, greeter_client, admin_headers):
    """Two apps on one database stand for two worker processes, each with its own cache."""
    other = create_app(app_config, modules=[greeter_app.extensions["trellis"].modules[0]]).test_client()
    assert other.get("/greeter/hello").get_json() == {"message": "hello"}  # warms the other's cache
    greeter_client.put("/config/greeter", json={"greeting": "bonjour"}, headers=admin_headers)
    assert other.get("/greeter/hello").get_json() == {"message": "bonjour"}


def test_config_schema_is_served_as_json_schema(greeter_client, admin_headers):
    response = greeter_client.get("/config/greeter/schema", headers=admin_headers)
    assert response.status_code == 200
    schema = response.get_json()
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert schema["properties"]["repeat"] == {"type": "integer", "default": 1, "minimum": 1, "maximum": 5}
    assert schema["properties"]["active"]["type"] == "boolean"
    assert greeter_client.get("/config/nope/schema", headers=admin_headers).status_code == 404
    assert greeter_client.get("/config/greeter/schema").status_code == 401


def test_modules_are_listed_with_their_active_flag(greeter_client, admin_headers):
    greeter_client.put("/config/greeter", json={"active": False}, headers=admin_headers)
    body = greeter_client.get("/config", headers=admin_headers).get_json()
    assert body == {"modules": [{"name": "greeter", "requires": [], "description": "", "active": False}], "count": 1}
