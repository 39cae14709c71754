"""Project as code across real processes: a project made on a SQLite server promoted to a PostgreSQL one,
two applies at once, and PostgreSQL restarting in the middle of an apply."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import requests
import sqlalchemy as sa

from trellis.testing.pg_cluster import BINARIES
from trellis.testing.plugin import TEST_MASTER_KEY, database_kind

from .backup_apps import ADMIN, make_app  # noqa: F401  (the fixture)

# Both databases in one test: it runs in the PostgreSQL pass of the suite (the SQLite pass has no server).
in_postgresql_pass = pytest.mark.skipif(database_kind() != "postgresql", reason="runs in the PostgreSQL pass")


def built_by_hand(url: str) -> None:
    """What an administrator builds on a development server, through the admin routes."""

    def call(method: str, path: str, body: Any) -> None:
        response = requests.request(method, url + path, json=body, headers=ADMIN, timeout=60)
        assert response.status_code in (200, 201), (path, response.text)

    call(
        "POST", "/admin/database/schemas", {"name": "Project", "fields": {"name": {"type": "String", "required": True}}}
    )
    call(
        "POST",
        "/admin/database/schemas",
        {
            "name": "Task",
            "fields": {
                "title": {"type": "String", "required": True, "searchable": True, "maxLength": 300},
                "estimate": {"type": "Number", "default": 1},
                "tags": ["String"],
                "due": "Date",
                "code": {"type": "String", "unique": True},
                "project": {"type": "Relation", "model": "Project"},
            },
            "modelOptions": {
                "conduit": {"authorization": {"enabled": True}, "cms": {"crudOperations": {"delete": False}}}
            },
        },
    )
    call(
        "POST",
        "/admin/database/customEndpoints",
        {
            "name": "tasksOf",
            "operation": "GET",
            "selectedSchema": "Task",
            "inputs": [{"name": "project", "type": "String", "location": "query"}],
            "query": {
                "schemaField": "project",
                "operation": "eq",
                "comparisonField": {"type": "Input", "value": "project"},
            },
            "paginated": True,
        },
    )
    call(
        "PUT",
        "/config/email",
        {
            "from": "Team <team@example.com>",
            "provider": "smtp",
            "smtp": {"host": "mail.example.com", "password": "dev-only"},
        },
    )


def openapi_of_schemas(url: str, names: tuple[str, ...]) -> dict[str, Any]:
    document = requests.get(url + "/openapi.json", timeout=60).json()
    paths = {p: v for p, v in document["paths"].items() if any(p.startswith(f"/database/{n}") for n in names)}
    paths |= {p: v for p, v in document["paths"].items() if p.startswith("/database/function/")}
    schemas = {k: v for k, v in document["components"]["schemas"].items() if any(k.startswith(n) for n in names)}
    return {"paths": paths, "schemas": schemas}


def post(url: str, route: str, project: Any, prune: bool = False) -> requests.Response:
    return requests.post(
        f"{url}/admin/project/{route}", json={"project": project, "prune": prune}, headers=ADMIN, timeout=120
    )


@in_postgresql_pass
def test_a_project_made_on_sqlite_applies_on_postgresql_and_serves_the_same_api(make_app, live_server_factory):  # noqa: F811
    made = {kind: make_app(kind) for kind in ("sqlite", "postgresql")}
    servers = {
        kind: live_server_factory(
            TRELLIS_DATABASE_URL=app.config["DATABASE_URL"], TRELLIS_STORAGE_PATH=app.config["STORAGE_PATH"]
        )
        for kind, app in made.items()
    }
    development, production = servers["sqlite"].url, servers["postgresql"].url
    built_by_hand(development)
    exported = requests.get(development + "/admin/project", headers=ADMIN, timeout=60)
    assert exported.status_code == 200
    project = exported.json()
    assert "dev-only" not in exported.text
    planned = post(production, "plan", project).json()
    assert {(c["kind"], c["name"], c["action"]) for c in planned["changes"]} == {
        ("schema", "Project", "create"),
        ("schema", "Task", "create"),
        ("customEndpoint", "tasksOf", "create"),
        ("config", "email", "update"),
    }
    applied = post(production, "apply", project)
    assert applied.status_code == 200 and applied.json() == planned
    assert post(production, "apply", project).json() == {"changes": [], "count": 0}
    names = ("Project", "Task")
    assert openapi_of_schemas(production, names) == openapi_of_schemas(development, names)
    assert openapi_of_schemas(production, names)["paths"]  # the comparison compared something
    # The promoted server works as the project says: access control on Task, the endpoint, the config.
    again = requests.get(production + "/admin/project", headers=ADMIN, timeout=60).json()
    assert again["modules"]["database"] == project["modules"]["database"]
    assert again["modules"]["email"]["config"]["from"] == "Team <team@example.com>"
    with made["postgresql"].app_context():
        from trellis import module_config

        assert module_config.get("email")["smtp"]["password"] == ""  # the target's own value, kept
    response = requests.get(production + "/database/function/tasksOf?project=x", headers=ADMIN, timeout=60)
    assert response.status_code == 200, response.text


def many_schemas(count: int) -> dict[str, Any]:
    fields = {f"f{i}": {"type": "String", "searchable": i == 0} for i in range(8)}
    return {
        "version": 1,
        "modules": {"database": {"schemas": {f"Bulk{n:03d}": {"fields": fields} for n in range(count)}}},
    }


def test_two_applies_at_once_on_two_processes_one_wins(make_app, live_server_factory):  # noqa: F811
    app = make_app(database_kind())
    env = {"TRELLIS_DATABASE_URL": app.config["DATABASE_URL"], "TRELLIS_STORAGE_PATH": app.config["STORAGE_PATH"]}
    first, second = live_server_factory(**env), live_server_factory(**env)
    project = many_schemas(40)
    answers: dict[str, requests.Response] = {}
    ready = threading.Barrier(2)

    def apply(server: Any) -> None:
        ready.wait()
        answers[server.url] = post(server.url, "apply", project)

    threads = [threading.Thread(target=apply, args=(server,)) for server in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(180)
    statuses = sorted(response.status_code for response in answers.values())
    assert statuses == [200, 409], [r.text[:300] for r in answers.values()]
    loser = next(r for r in answers.values() if r.status_code == 409).json()
    assert "Another project apply" in loser["message"] and loser["requestId"]
    winner = next(r for r in answers.values() if r.status_code == 200).json()
    assert winner["count"] == 40
    for server in (first, second):
        assert post(server.url, "plan", project).json() == {"changes": [], "count": 0}


def answered(call: Any) -> Any:
    """``call()`` until it is not a 503: a pooled connection that died with a restart is met once each."""
    for _attempt in range(5):
        response = call()
        if response.status_code != 503:
            return response
    return response


@in_postgresql_pass
@pytest.mark.skipif(not BINARIES, reason="PostgreSQL server binaries are not installed")
def test_postgresql_restarting_mid_apply_leaves_the_previous_state(pg_cluster, app_config, tmp_path):
    from trellis import create_app
    from trellis.admins import ensure_first_admin
    from trellis.migrate import upgrade

    application = create_app({**app_config, "DATABASE_URL": pg_cluster.url, "STORAGE_PATH": str(tmp_path)})
    upgrade(application)
    with application.app_context():
        ensure_first_admin()
    client = application.test_client()
    before = client.get("/admin/project", headers=ADMIN).get_data(as_text=True)
    project = many_schemas(150)
    answer: dict[str, Any] = {}

    def apply() -> None:
        response = client.post(
            "/admin/project/apply", json={"project": project}, headers={"masterkey": TEST_MASTER_KEY}
        )
        answer["status"], answer["body"] = response.status_code, response.get_json()

    watcher = sa.create_engine(pg_cluster.url)
    thread = threading.Thread(target=apply)
    thread.start()
    try:
        # The apply holds the revision row from its first statement to its commit: restart while it does.
        deadline = time.monotonic() + 60
        with watcher.connect() as connection:
            while time.monotonic() < deadline:
                held = connection.execute(
                    sa.text(
                        "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                        "WHERE c.relname = 'core_project_revision' AND l.mode = 'RowExclusiveLock'"
                    )
                ).scalar()
                tables = connection.execute(
                    sa.text("SELECT count(*) FROM pg_locks WHERE mode = 'AccessExclusiveLock'")
                ).scalar()
                if held and tables and tables > 10:  # a few schemas' tables made: well inside the apply
                    break
                time.sleep(0.01)
        watcher.dispose()
        pg_cluster.pg_ctl("restart")
    finally:
        thread.join(120)
    assert answer["status"] == 503, answer
    assert answer["body"]["name"] != "INTERNAL_SERVER_ERROR"
    after = answered(lambda: client.get("/admin/project", headers=ADMIN))
    assert after.status_code == 200 and after.get_data(as_text=True) == before  # nothing of the apply
    again = answered(lambda: client.post("/admin/project/apply", json={"project": project}, headers=ADMIN))
    assert again.status_code == 200 and again.get_json()["count"] == 150, again.get_json()
    application.extensions["trellis_events"].stop()
    application.extensions["trellis"].engine.dispose()
