"""flask --app wsgi trellis …: admin create / reset-password, modules, openapi export, init."""

import json


def run(app, *args, input=None):
    return app.test_cli_runner().invoke(args=["trellis", *args], input=input)


def test_admin_create_and_reset_password(app, client, admin_headers, db):
    result = run(app, "admin", "create", "ops", "--password", "ops-password-1")
    assert result.exit_code == 0, result.output
    login = {"username": "ops", "password": "ops-password-1"}
    assert client.post("/login", json=login, headers=admin_headers).status_code == 200
    result = run(app, "admin", "reset-password", "ops", "--password", "ops-password-2")
    assert result.exit_code == 0, result.output
    assert client.post("/login", json=login, headers=admin_headers).status_code == 401
    login["password"] = "ops-password-2"
    assert client.post("/login", json=login, headers=admin_headers).status_code == 200


def test_admin_create_refuses_duplicates_and_short_passwords(app, db):
    assert run(app, "admin", "create", "admin", "--password", "long-enough-1").exit_code != 0
    result = run(app, "admin", "create", "shorty", "--password", "short")
    assert result.exit_code != 0 and "at least 8" in result.output
    assert run(app, "admin", "reset-password", "ghost", "--password", "long-enough-1").exit_code != 0


def test_password_is_prompted_when_not_given(app, client, admin_headers, db):
    result = run(app, "admin", "create", "prompted", input="prompted-pass\nprompted-pass\n")
    assert result.exit_code == 0, result.output
    login = {"username": "prompted", "password": "prompted-pass"}
    assert client.post("/login", json=login, headers=admin_headers).status_code == 200


def test_modules_lists_loaded_modules_in_order(app):
    result = run(app, "modules")
    assert result.exit_code == 0
    listed = [line.split()[0] for line in result.output.splitlines()]
    assert listed == [m.name for m in app.extensions["trellis"].modules]


def test_openapi_export_writes_the_full_document(app, tmp_path, db):
    target = tmp_path / "openapi.json"
    result = run(app, "openapi", "export", str(target))
    assert result.exit_code == 0, result.output
    doc = json.loads(target.read_text())
    assert doc["openapi"].startswith("3.") and "/login" in doc["paths"]
    assert doc == app.test_client().get("/openapi.json").get_json()
